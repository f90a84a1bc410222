/**
 * The firing engine (Engine + shard fibers) over the real SQLite store, with a
 * scripted delivery. All time is the TestClock: nothing here sleeps for real.
 */
import { describe, expect, it } from "@effect/vitest"
import { DeliveryOutcome, RetryPolicy, shardIdOf, shardKey } from "@timer/core"
import { Cause, Deferred, Effect, Exit, Fiber, Option, Random } from "effect"
import { open } from "./support/fakeDelivery.js"
import { advanceTo, idInShard, settle, startEngine, T0, timerRecord } from "./support/engineHarness.js"

const SECOND = 1_000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

const { delivered, permanent, reschedule, retryable } = DeliveryOutcome

/** [timerId, test clock at the call] of every delivery call so far. */
const timeline = (calls: ReadonlyArray<{ readonly timerId: string; readonly at: number }>) =>
  calls.map((call) => [call.timerId, call.at] as const)

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

  it.scoped("a wake-up that arrives after the fiber read the store but before it sleeps is not lost", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { idlePollMs: 10 * HOUR } })
      yield* h.create("far", T0 + HOUR)
      yield* advanceTo(T0 + SECOND)

      // Hold the fiber just after its next read of the store's next due time...
      const pause = h.pauseAfterNextFireAfter()
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

      // A change that leaves executeAt alone keeps the arming and its retry state.
      yield* advanceTo(T0 + 15 * SECOND)
      const kept = yield* h.timers.update({ namespace: "default", timerId: "rearm", payload: { n: 1 } })
      expect(kept).toMatchObject({ attempts: 1, firingId: failed.firingId, nextFireAt: failed.nextFireAt, lastError: "boom" })

      yield* advanceTo(T0 + 20 * SECOND)
      const updated = yield* h.timers.update({ namespace: "default", timerId: "rearm", executeAt: T0 + MINUTE })
      const stored = yield* h.row("rearm")
      for (const record of [updated, stored]) {
        expect(record).toMatchObject({ state: "SCHEDULED", attempts: 0, executeAt: T0 + MINUTE, nextFireAt: T0 + MINUTE })
        expect(record.firingId).not.toBe(failed.firingId)
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

describe("outcomes", () => {
  it.scoped("Reschedule re-arms the timer at the time the callback asked for, under a new firing id", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        script: (delivery) => delivery.script("again", reschedule(T0 + 10 * MINUTE), delivered)
      })
      yield* h.create("again", T0 + 5 * SECOND)
      yield* advanceTo(T0 + 5 * SECOND)
      const first = h.delivery.callsOf("again")
      expect(timeline(first)).toEqual([["again", T0 + 5 * SECOND]])

      const rearmed = yield* h.row("again")
      expect(rearmed).toMatchObject({
        state: "SCHEDULED",
        executeAt: T0 + 10 * MINUTE,
        nextFireAt: T0 + 10 * MINUTE,
        attempts: 0,
        executedAt: T0 + 5 * SECOND
      })
      expect(rearmed.firingId).not.toBe(first[0]!.firingId)

      yield* advanceTo(T0 + 10 * MINUTE - 1)
      expect(h.delivery.callsOf("again")).toHaveLength(1)
      yield* advanceTo(T0 + HOUR)
      const calls = h.delivery.callsOf("again")
      expect(timeline(calls)).toEqual([["again", T0 + 5 * SECOND], ["again", T0 + 10 * MINUTE]])
      expect(calls[1]!.attempt).toBe(1)
      expect(calls[1]!.firingId).toBe(rearmed.firingId)
      expect(calls[1]!.firingId).not.toBe(calls[0]!.firingId)
      expect(yield* h.row("again")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 10 * MINUTE })
    }))

  it.scoped("Reschedule after failed attempts starts the new arming afresh: attempts 0, retry state cleared", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        random: Random.fixed([0]),
        script: (delivery) =>
          delivery.script("recover", retryable("HTTP 500"), retryable("HTTP 502"), reschedule(T0 + 10 * MINUTE), delivered)
      })
      yield* h.create("recover", T0 + 5 * SECOND)
      // Jitter 0: retries after 500ms, then 1s.
      yield* advanceTo(T0 + 5 * SECOND + 1_500)
      const calls = h.delivery.callsOf("recover")
      expect(timeline(calls)).toEqual([
        ["recover", T0 + 5 * SECOND],
        ["recover", T0 + 5 * SECOND + 500],
        ["recover", T0 + 5 * SECOND + 1_500]
      ])
      expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3])

      const rearmed = yield* h.row("recover")
      expect(rearmed).toMatchObject({
        state: "SCHEDULED",
        attempts: 0,
        executeAt: T0 + 10 * MINUTE,
        nextFireAt: T0 + 10 * MINUTE,
        executedAt: T0 + 5 * SECOND + 1_500
      })
      expect(rearmed.lastError).toBeUndefined()
      expect(rearmed.firstAttemptAt).toBeUndefined()
      expect(rearmed.firingId).not.toBe(calls[0]!.firingId)

      yield* advanceTo(T0 + HOUR)
      const after = h.delivery.callsOf("recover")
      expect(after).toHaveLength(4)
      expect(after[3]).toMatchObject({ at: T0 + 10 * MINUTE, attempt: 1, firingId: rearmed.firingId })
      expect(yield* h.row("recover")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 10 * MINUTE })
    }))

  const jitters: ReadonlyArray<readonly [string, number | undefined]> = [
    ["random jitter", undefined],
    ["jitter 0: the band's lower edge", 0],
    ["jitter ~1: the band's upper edge", 0.999999]
  ]
  for (const [label, jitter] of jitters) {
    it.scoped(`Retryable failures back off exponentially within the jitter band, then the timer FAILS after maxAttempts (${label})`, () =>
      Effect.gen(function*() {
        // Bases: 1s, 5s, then 25s and 125s capped at 10s. An uncapped base would give a delay of at least 12.5s.
        const policy = new RetryPolicy({ maxAttempts: 5, initialInterval: SECOND, backoffMultiplier: 5, maxInterval: 10 * SECOND })
        const bases = [SECOND, 5 * SECOND, 10 * SECOND, 10 * SECOND]
        const h = yield* startEngine({
          script: (delivery) =>
            delivery.script("flaky", ...[1, 2, 3, 4, 5].map((n) => retryable(`HTTP 503 #${n}`))),
          ...(jitter === undefined ? {} : { random: Random.fixed([jitter]) })
        })
        const start = T0 + SECOND
        yield* h.create("flaky", start, { retryPolicy: policy })
        yield* advanceTo(start)
        expect(timeline(h.delivery.callsOf("flaky"))).toEqual([["flaky", start]])
        const firingId = h.delivery.callsOf("flaky")[0]!.firingId

        for (const [i, base] of bases.entries()) {
          const failures = i + 1
          const last = h.delivery.callsOf("flaky")[i]!
          const row = yield* h.row("flaky")
          expect(row).toMatchObject({
            state: "SCHEDULED",
            attempts: failures,
            lastError: `HTTP 503 #${failures}`,
            firstAttemptAt: start,
            firingId
          })
          const delay = row.nextFireAt - last.at
          expect(delay).toBeGreaterThanOrEqual(base / 2)
          expect(delay).toBeLessThanOrEqual(base)
          if (jitter !== undefined) expect(delay).toBe(Math.round(base / 2 + (base / 2) * jitter))

          yield* advanceTo(last.at + base / 2 - 1)
          expect(h.delivery.callsOf("flaky")).toHaveLength(failures)
          yield* advanceTo(row.nextFireAt - 1)
          expect(h.delivery.callsOf("flaky")).toHaveLength(failures)
          yield* advanceTo(row.nextFireAt)
          const calls = h.delivery.callsOf("flaky")
          expect(calls).toHaveLength(failures + 1)
          expect(calls[failures]!.at).toBe(row.nextFireAt)
          expect(calls[failures]!.attempt).toBe(failures + 1)
          expect(calls[failures]!.firingId).toBe(firingId)
        }

        const final = yield* h.row("flaky")
        expect(final.state).toBe("FAILED")
        expect(final.attempts).toBe(5)
        expect(final.lastError).toContain("HTTP 503 #5")
        expect(final.lastError).toContain("gave up after 5 attempts")

        yield* advanceTo(T0 + 24 * HOUR)
        expect(h.delivery.callsOf("flaky")).toHaveLength(5)
      }))
  }

  it.scoped("Retry-After replaces the backoff and is capped by maxInterval", () =>
    Effect.gen(function*() {
      const policy = new RetryPolicy({ maxAttempts: 5, initialInterval: SECOND, maxInterval: 5 * SECOND })
      const h = yield* startEngine({
        script: (delivery) =>
          delivery.script("busy", retryable("HTTP 429", 2_500), retryable("HTTP 503", 60 * SECOND), delivered)
      })
      yield* h.create("busy", T0 + SECOND, { retryPolicy: policy })
      yield* advanceTo(T0 + SECOND)
      expect(yield* h.row("busy")).toMatchObject({ attempts: 1, nextFireAt: T0 + 3_500, lastError: "HTTP 429" })

      yield* advanceTo(T0 + 3_499)
      expect(h.delivery.callsOf("busy")).toHaveLength(1)
      yield* advanceTo(T0 + 3_500)
      expect(h.delivery.callsOf("busy")).toHaveLength(2)
      // Asked for 60s, capped at maxInterval 5s.
      expect(yield* h.row("busy")).toMatchObject({ attempts: 2, nextFireAt: T0 + 8_500, lastError: "HTTP 503" })

      yield* advanceTo(T0 + HOUR)
      const calls = h.delivery.callsOf("busy")
      expect(timeline(calls)).toEqual([["busy", T0 + SECOND], ["busy", T0 + 3_500], ["busy", T0 + 8_500]])
      expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3])
      expect(new Set(calls.map((call) => call.firingId)).size).toBe(1)
      expect(yield* h.row("busy")).toMatchObject({ state: "FIRED", attempts: 3, executedAt: T0 + 8_500 })
    }))

  it.scoped("Permanent fails the timer at once after one attempt", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        script: (delivery) => delivery.script("gone", permanent("HTTP 404 (not retried)"))
      })
      yield* h.create("gone", T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(yield* h.row("gone")).toMatchObject({ state: "FAILED", attempts: 1, lastError: "HTTP 404 (not retried)" })
      yield* advanceTo(T0 + 24 * HOUR)
      expect(timeline(h.delivery.callsOf("gone"))).toEqual([["gone", T0 + SECOND]])
    }))

  it.scoped("maxAttemptsDuration stops the retries even though attempts are left", () =>
    Effect.gen(function*() {
      // Every delay is in [2s, 4s]; no retry may start more than 10s after the first attempt.
      const policy = new RetryPolicy({
        maxAttempts: 1000,
        maxAttemptsDuration: 10 * SECOND,
        initialInterval: 4 * SECOND,
        backoffMultiplier: 1,
        maxInterval: 4 * SECOND
      })
      const h = yield* startEngine({
        script: (delivery) => delivery.script("slow", ...Array.from({ length: 50 }, () => retryable("HTTP 500")))
      })
      const start = T0 + SECOND
      yield* h.create("slow", start, { retryPolicy: policy })
      yield* advanceTo(T0 + HOUR)

      const calls = h.delivery.callsOf("slow")
      const last = calls[calls.length - 1]!
      expect(calls[0]!.at).toBe(start)
      expect(calls.length).toBeGreaterThanOrEqual(3)
      expect(calls.length).toBeLessThanOrEqual(6)
      // The last attempt started within the window, and its retry (at least 2s later) would have left it.
      expect(last.at - start).toBeLessThanOrEqual(10 * SECOND)
      expect(last.at - start).toBeGreaterThan(6 * SECOND)
      for (let i = 1; i < calls.length; i++) {
        expect(calls[i]!.at - calls[i - 1]!.at).toBeGreaterThanOrEqual(2 * SECOND)
        expect(calls[i]!.at - calls[i - 1]!.at).toBeLessThanOrEqual(4 * SECOND)
      }
      const final = yield* h.row("slow")
      expect(final).toMatchObject({ state: "FAILED", attempts: calls.length, updatedAt: last.at })
      expect(final.lastError).toContain("HTTP 500")
      expect(final.lastError).toContain("maxAttemptsDuration")
    }))
})

describe("shard ownership", () => {
  it.scoped("a version bump by another owner during a delivery stops the shard's fiber and writes nothing", () =>
    Effect.gen(function*() {
      const numShards = 4
      const lostShard = 1
      const h = yield* startEngine({ config: { defaultNamespaceShards: numShards } })
      const owned = yield* h.engine.ownedShards
      expect(owned.map((lease) => lease.shardId).sort()).toEqual([0, 1, 2, 3])
      expect(owned.every((lease) => lease.version === 1 && lease.ownerId === "engine-test")).toBe(true)

      const a = idInShard("lost-a", lostShard, numShards)
      const b = idInShard("lost-b", lostShard, numShards)
      const gateA = h.delivery.gate(a)
      h.delivery.gate(b) // never opened: this delivery is still in flight when the shard is lost
      const createdA = yield* h.create(a, T0 + SECOND)
      const createdB = yield* h.create(b, T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.calls.map((call) => [call.timerId, call.status])).toEqual([[a, "in-flight"], [b, "in-flight"]])

      // Another owner claims the shard.
      yield* h.sql`UPDATE shards SET version = version + 1 WHERE namespace = ${"default"} AND shard_id = ${lostShard}`
      yield* open(gateA, delivered)
      yield* settle

      // The write was refused as a whole.
      expect(h.firings.map((firing) => firing.key.id)).toEqual([a])
      const exit = h.firings[0]!.exit
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(error).toMatchObject({ _tag: "ShardOwnershipLost", namespace: "default", shardId: lostShard, heldVersion: 1 })
      expect(yield* h.row(a)).toEqual(createdA)
      expect(yield* h.row(b)).toEqual(createdB)
      expect(yield* h.row(a)).toMatchObject({ state: "SCHEDULED", attempts: 0 })
      // The other in-flight delivery of the lost shard was cut short.
      expect(h.delivery.callsOf(b).map((call) => call.status)).toEqual(["interrupted"])

      const leases = yield* h.engine.ownedShards
      expect(leases.map((lease) => lease.shardId).sort()).toEqual([0, 2, 3])

      // The lost shard fires nothing more; the others go on.
      const c = idInShard("lost-c", lostShard, numShards)
      const other = idInShard("other", 3, numShards)
      yield* h.create(c, T0 + 2 * SECOND)
      yield* h.create(other, T0 + 2 * SECOND)
      yield* advanceTo(T0 + HOUR)
      expect(h.delivery.callsOf(c)).toHaveLength(0)
      expect(h.delivery.callsOf(a)).toHaveLength(1)
      expect(timeline(h.delivery.callsOf(other))).toEqual([[other, T0 + 2 * SECOND]])
      expect(yield* h.row(c)).toMatchObject({ state: "SCHEDULED", attempts: 0 })
      expect(yield* h.row(other)).toMatchObject({ state: "FIRED", attempts: 1 })
      expect(h.firings.map((firing) => firing.key.id)).toEqual([a, other])
    }))
})

describe("shutdown", () => {
  it.scoped("shutdown lets in-flight deliveries finish within shutdownGraceMs, then cuts the rest short", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { shutdownGraceMs: 5 * SECOND } })
      const finishing = h.delivery.gate("finishing")
      const stuck = h.delivery.gate("stuck") // opened only when the test ends, so that a failure cannot hang it
      yield* Effect.addFinalizer(() => open(stuck, delivered))
      yield* h.create("finishing", T0 + SECOND)
      yield* h.create("stuck", T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.calls.map((call) => call.status)).toEqual(["in-flight", "in-flight"])

      const stopping = yield* Effect.fork(h.shutdown)
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)

      // Within the grace period a delivery still finishes and its outcome is written.
      yield* advanceTo(T0 + 3 * SECOND)
      yield* open(finishing, delivered)
      yield* settle
      expect(yield* h.row("finishing")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 3 * SECOND })
      expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)

      // At the end of the grace period the stuck one is interrupted and nothing is written for it.
      yield* advanceTo(T0 + 6 * SECOND - 1)
      expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)
      yield* advanceTo(T0 + 6 * SECOND)
      expect(Option.isSome(yield* Fiber.poll(stopping))).toBe(true)
      expect(h.delivery.callsOf("stuck").map((call) => call.status)).toEqual(["interrupted"])
      expect(yield* h.row("stuck")).toMatchObject({ state: "SCHEDULED", attempts: 0 })
      expect(h.firings.map((firing) => firing.key.id)).toEqual(["finishing"])

      // The shard was given back.
      const shards = yield* h.sql<{ owner_id: string | null; version: number }>`SELECT owner_id, version FROM shards`
      expect(shards).toEqual([{ owner_id: null, version: 1 }])
    }))
})

describe("concurrency", () => {
  it.scoped("no more than shardConcurrency deliveries of one shard are in flight at once", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { shardConcurrency: 2 } })
      const ids = ["c1", "c2", "c3", "c4", "c5"]
      const gates = new Map(ids.map((id) => [id, h.delivery.gate(id)]))
      for (const [i, id] of ids.entries()) yield* h.create(id, T0 + SECOND + i)
      yield* advanceTo(T0 + MINUTE)

      const shard = shardKey({ namespace: "default", shardId: 0 })
      expect(h.delivery.calls).toHaveLength(2)
      expect(h.delivery.inFlight(shard)).toBe(2)

      // Each finished delivery lets exactly one more start, oldest first.
      for (let done = 0; done < ids.length; done++) {
        const call = h.delivery.calls.find((c) => c.status === "in-flight")!
        yield* open(gates.get(call.timerId)!, delivered)
        yield* settle
        expect(h.delivery.calls).toHaveLength(Math.min(ids.length, done + 3))
        expect(h.delivery.inFlight(shard)).toBe(Math.min(2, ids.length - done - 1))
      }
      expect(h.delivery.calls.map((call) => call.timerId)).toEqual(ids)
      expect(h.delivery.maxInFlight(shard)).toBe(2)
      for (const id of ids) expect(yield* h.row(id)).toMatchObject({ state: "FIRED", attempts: 1 })
    }))

  it.scoped("deliveryConcurrency bounds deliveries over all shards", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { defaultNamespaceShards: 2, shardConcurrency: 8, deliveryConcurrency: 1 } })
      const ids = [idInShard("g", 0, 2), idInShard("h", 1, 2), idInShard("i", 0, 2), idInShard("j", 1, 2)]
      expect(new Set(ids.map((id) => shardIdOf(id, 2)))).toEqual(new Set([0, 1]))
      const gates = new Map(ids.map((id) => [id, h.delivery.gate(id)]))
      for (const id of ids) yield* h.create(id, T0 + SECOND)
      yield* advanceTo(T0 + MINUTE)

      for (let done = 0; done < ids.length; done++) {
        expect(h.delivery.inFlight()).toBe(1)
        expect(h.delivery.calls).toHaveLength(done + 1)
        const call = h.delivery.calls.find((c) => c.status === "in-flight")!
        yield* open(gates.get(call.timerId)!, delivered)
        yield* settle
      }
      expect(h.delivery.inFlight()).toBe(0)
      expect(h.delivery.maxInFlight()).toBe(1)
      expect(new Set(h.delivery.calls.map((call) => call.timerId))).toEqual(new Set(ids))
    }))
})
