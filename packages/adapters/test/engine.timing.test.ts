/**
 * The firing engine (Engine + shard fibers) over the real SQLite store, with a
 * scripted delivery, on the TestClock: firing order, wake-ups of a sleeping
 * shard fiber, and Timers.update moving or re-arming a timer.
 */
import { describe, expect, it } from "@effect/vitest"
import { DeliveryOutcome, RetryPolicy } from "@timer/core"
import { Deferred, Effect, Exit } from "effect"
import { open, timeline } from "./support/fakeDelivery.js"
import { advanceTo, HOUR, MINUTE, SECOND, settle, startEngine, T0, timerRecord } from "./support/engineHarness.js"

const { delivered, retryable } = DeliveryOutcome

describe("firing order and timing", () => {
  for (const shardConcurrency of [1, 32]) {
    it.scoped(`fires past-due timers oldest first and future ones exactly at executeAt (shardConcurrency ${shardConcurrency})`, () =>
      Effect.gen(function*() {
        // Written straight to the store before the engine starts, in no particular order.
        const seeded: ReadonlyArray<readonly [string, number]> = [
          ["m-past-10s", T0 - 10 * SECOND],
          ["z-past-30s", T0 - 30 * SECOND],
          ["a-future-9s", T0 + 9 * SECOND],
          ["k-past-20s", T0 - 20 * SECOND],
          ["b-future-2s", T0 + 2 * SECOND],
          ["q-future-5s", T0 + 5 * SECOND]
        ]
        const h = yield* startEngine({
          config: { shardConcurrency },
          seed: (store, settings) =>
            Effect.forEach(seeded, ([id, at]) => store.upsertTimer(timerRecord(settings, id, at, T0 - HOUR)))
        })

        // At start (clock T0) the past-due timers fire at once, oldest first; no future one does.
        expect(timeline(h.delivery.calls)).toEqual([
          ["z-past-30s", T0],
          ["k-past-20s", T0],
          ["m-past-10s", T0]
        ])

        yield* advanceTo(T0 + 2 * SECOND - 1)
        expect(h.delivery.calls).toHaveLength(3)

        yield* advanceTo(T0 + 5 * SECOND - 1)
        expect(timeline(h.delivery.calls.slice(3))).toEqual([["b-future-2s", T0 + 2 * SECOND]])

        // One jump over the rest: each fires at its own executeAt, not at the end of the jump.
        yield* advanceTo(T0 + MINUTE)
        expect(timeline(h.delivery.calls)).toEqual([
          ["z-past-30s", T0],
          ["k-past-20s", T0],
          ["m-past-10s", T0],
          ["b-future-2s", T0 + 2 * SECOND],
          ["q-future-5s", T0 + 5 * SECOND],
          ["a-future-9s", T0 + 9 * SECOND]
        ])
        for (const call of h.delivery.calls) {
          expect(call.request.firedAt).toBe(call.at)
          expect(call.attempt).toBe(1)
          const row = yield* h.row(call.timerId)
          expect(row).toMatchObject({ state: "FIRED", attempts: 1, executedAt: call.at })
        }
      }))
  }
})

describe("wake-ups", () => {
  it.scoped("a timer created due sooner than the fiber's planned wake-up fires at its own time", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: 10 * HOUR } })
      yield* h.create("far", T0 + HOUR)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.calls).toHaveLength(0)

      // The shard fiber sleeps until T0 + 1h; this one is due in 4 seconds.
      yield* h.create("soon", T0 + 5 * SECOND)
      yield* advanceTo(T0 + 2 * HOUR)
      expect(timeline(h.delivery.calls)).toEqual([
        ["soon", T0 + 5 * SECOND],
        ["far", T0 + HOUR]
      ])
    }))

  it.scoped("a timer created in an idle shard fires at its own time, not at the idle poll", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: MINUTE } })
      yield* advanceTo(T0 + 10 * SECOND)
      yield* h.create("idle-1", T0 + 13 * SECOND)
      // Already due when created: fires at once.
      yield* h.create("idle-late", T0 - 5 * SECOND)
      yield* settle
      expect(timeline(h.delivery.calls)).toEqual([["idle-late", T0 + 10 * SECOND]])

      yield* advanceTo(T0 + 5 * MINUTE)
      expect(timeline(h.delivery.calls)).toEqual([
        ["idle-late", T0 + 10 * SECOND],
        ["idle-1", T0 + 13 * SECOND]
      ])
    }))

  it.scoped("timers due beyond the idle poll send no wake-up and still fire at their own time", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: MINUTE } })
      yield* advanceTo(T0 + 10 * SECOND)
      yield* h.create("beyond", T0 + 10 * SECOND + MINUTE + 1)
      yield* h.create("within", T0 + 10 * SECOND + MINUTE)
      yield* h.timers.update({ namespace: "default", timerId: "within", executeAt: T0 + HOUR })
      expect(h.notified.map((notice) => notice.at)).toEqual([T0 + 10 * SECOND + MINUTE])

      yield* advanceTo(T0 + 2 * HOUR)
      expect(timeline(h.delivery.calls)).toEqual([
        ["beyond", T0 + 10 * SECOND + MINUTE + 1],
        ["within", T0 + HOUR]
      ])
    }))

  it.scoped("a wake-up that arrives after the fiber read the store but before it sleeps is not lost", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: 10 * HOUR } })
      yield* h.create("far", T0 + HOUR)
      yield* advanceTo(T0 + SECOND)

      // Hold the fiber just after its next read of the store's next due time...
      const pause = h.pauseAfterNextRead()
      yield* h.create("middle", T0 + 30 * MINUTE)
      yield* settle
      expect(yield* Deferred.isDone(pause.reached)).toBe(true)
      // ...and create a timer that its read did not see.
      yield* h.create("soon", T0 + 5 * SECOND)
      yield* Deferred.succeed(pause.release, undefined)
      yield* settle

      yield* advanceTo(T0 + 2 * HOUR)
      expect(timeline(h.delivery.calls)).toEqual([
        ["soon", T0 + 5 * SECOND],
        ["middle", T0 + 30 * MINUTE],
        ["far", T0 + HOUR]
      ])
    }))
})

describe("Timers.update", () => {
  it.scoped("moving a timer earlier wakes the shard fiber", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: 10 * HOUR } })
      yield* h.create("move", T0 + HOUR)
      yield* advanceTo(T0 + 10 * SECOND)
      yield* h.timers.update({ namespace: "default", timerId: "move", executeAt: T0 + 30 * SECOND })
      yield* advanceTo(T0 + 2 * HOUR)
      expect(timeline(h.delivery.calls)).toEqual([["move", T0 + 30 * SECOND]])
      expect(yield* h.row("move")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 30 * SECOND })
    }))

  it.scoped("a new executeAt re-arms the timer: new firing id, attempts 0, retry state cleared", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        config: { idlePollMs: 10 * HOUR },
        script: (delivery) => delivery.script("rearm", retryable("boom"))
      })
      yield* h.create("rearm", T0 + 10 * SECOND, { retryPolicy: new RetryPolicy({ initialInterval: 30 * MINUTE, maxInterval: HOUR }) })
      yield* advanceTo(T0 + 10 * SECOND)
      const first = h.delivery.callsOf("rearm")
      expect(timeline(first)).toEqual([["rearm", T0 + 10 * SECOND]])
      const failed = yield* h.row("rearm")
      expect(failed).toMatchObject({
        state: "SCHEDULED",
        attempts: 1,
        lastError: "boom",
        firingId: first[0]!.firingId,
        firstAttemptAt: T0 + 10 * SECOND
      })
      expect(failed.nextFireAt).toBeGreaterThanOrEqual(T0 + 10 * SECOND + 15 * MINUTE)

      // A change that leaves executeAt alone keeps the retry state, under a new firing id (the content changed).
      yield* advanceTo(T0 + 15 * SECOND)
      const kept = yield* h.timers.update({ namespace: "default", timerId: "rearm", payload: { n: 1 } })
      expect(kept).toMatchObject({ attempts: 1, nextFireAt: failed.nextFireAt, lastError: "boom" })
      expect(kept.firingId).not.toBe(failed.firingId)

      yield* advanceTo(T0 + 20 * SECOND)
      const updated = yield* h.timers.update({ namespace: "default", timerId: "rearm", executeAt: T0 + MINUTE })
      const stored = yield* h.row("rearm")
      for (const record of [updated, stored]) {
        expect(record).toMatchObject({ state: "SCHEDULED", attempts: 0, executeAt: T0 + MINUTE, nextFireAt: T0 + MINUTE })
        expect(record.firingId).not.toBe(kept.firingId)
        expect(record.lastError).toBeUndefined()
        expect(record.firstAttemptAt).toBeUndefined()
      }
      expect(stored.firingId).toBe(updated.firingId)

      yield* advanceTo(T0 + 2 * HOUR)
      const calls = h.delivery.callsOf("rearm")
      expect(timeline(calls)).toEqual([["rearm", T0 + 10 * SECOND], ["rearm", T0 + MINUTE]])
      expect(calls[1]!.attempt).toBe(1)
      expect(calls[1]!.firingId).toBe(updated.firingId)
      expect(yield* h.row("rearm")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + MINUTE })
    }))

  it.scoped("a firing superseded by an update while in flight writes nothing", () =>
    Effect.gen(function*() {
      const h = yield* startEngine()
      const gate = h.delivery.gate("busy")
      const created = yield* h.create("busy", T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.callsOf("busy").map((call) => call.status)).toEqual(["in-flight"])

      const updated = yield* h.timers.update({ namespace: "default", timerId: "busy", executeAt: T0 + MINUTE })
      yield* open(gate, delivered)
      yield* settle

      expect(h.firings).toHaveLength(1)
      expect(h.firings[0]!.firingId).toBe(created.firingId)
      expect(Exit.isSuccess(h.firings[0]!.exit) && h.firings[0]!.exit.value).toBe(false)
      expect(yield* h.row("busy")).toMatchObject({
        state: "SCHEDULED",
        attempts: 0,
        nextFireAt: T0 + MINUTE,
        firingId: updated.firingId
      })

      yield* advanceTo(T0 + HOUR)
      expect(timeline(h.delivery.callsOf("busy"))).toEqual([["busy", T0 + SECOND], ["busy", T0 + MINUTE]])
      expect(h.delivery.callsOf("busy")[1]!.firingId).toBe(updated.firingId)
      expect(yield* h.row("busy")).toMatchObject({ state: "FIRED", attempts: 1 })
    }))
})
