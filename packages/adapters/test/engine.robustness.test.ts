/**
 * The firing engine over the real SQLite store, with a scripted delivery, on
 * the TestClock: shutdown of many shards at once, timers changed while their
 * delivery waits for a permit, a delivery that dies, and namespaces created
 * concurrently.
 */
import { describe, expect, it } from "@effect/vitest"
import { DeliveryOutcome } from "@timer/core"
import { Effect, Fiber, Option } from "effect"
import { open, timeline } from "./support/fakeDelivery.js"
import { advanceTo, HOUR, idInShard, MINUTE, SECOND, settle, startEngine, T0 } from "./support/engineHarness.js"

const { delivered } = DeliveryOutcome

describe("shutdown of many shards", () => {
  it.scoped("every shard gets the same grace period at once, not one after another", () =>
    Effect.gen(function*() {
      const numShards = 4
      const h = yield* startEngine({ config: { defaultNamespaceShards: numShards, shutdownGraceMs: 5 * SECOND } })
      const ids = Array.from({ length: numShards }, (_, shard) => idInShard(`stuck-${shard}`, shard, numShards))
      const gates = ids.map((id) => h.delivery.gate(id))
      yield* Effect.addFinalizer(() => Effect.forEach(gates, (gate) => open(gate, delivered), { discard: true }))
      for (const id of ids) yield* h.create(id, T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.inFlight()).toBe(numShards)

      const stopping = yield* Effect.fork(h.shutdown)
      yield* advanceTo(T0 + 6 * SECOND - 1)
      expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)
      // One grace period after the shutdown began, all four are cut short together.
      yield* advanceTo(T0 + 6 * SECOND)
      expect(Option.isSome(yield* Fiber.poll(stopping))).toBe(true)
      expect(h.delivery.calls.map((call) => call.status)).toEqual(ids.map(() => "interrupted"))
    }))
})

describe("shutdown and deliveries waiting for a permit", () => {
  it.scoped("once shutdown begins, a delivery still waiting for a permit makes no call", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { deliveryConcurrency: 1, shutdownGraceMs: 5 * SECOND } })
      const first = h.delivery.gate("first")
      yield* h.create("first", T0 + SECOND)
      yield* h.create("waiting", T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(h.delivery.calls.map((call) => call.timerId)).toEqual(["first"])

      const stopping = yield* Effect.fork(h.shutdown)
      yield* settle
      yield* open(first, delivered)
      yield* settle
      expect(Option.isSome(yield* Fiber.poll(stopping))).toBe(true)
      expect(h.delivery.calls.map((call) => call.timerId)).toEqual(["first"])
      expect(yield* h.row("first")).toMatchObject({ state: "FIRED" })
      expect(yield* h.row("waiting")).toMatchObject({ state: "SCHEDULED", attempts: 0 })
    }))
})

describe("timers changed while their delivery waits for a permit", () => {
  it.scoped("a deleted timer is not delivered; an updated one is delivered as updated", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { deliveryConcurrency: 1 } })
      const blocker = h.delivery.gate("blocker")
      yield* h.create("blocker", T0 + SECOND)
      yield* h.create("deleted", T0 + 2 * SECOND, { payload: { v: 1 } })
      yield* h.create("updated", T0 + 2 * SECOND, { payload: { v: 1 } })
      yield* advanceTo(T0 + 2 * SECOND)
      // The one permit is held by "blocker"; the other two wait for it.
      expect(h.delivery.calls.map((call) => call.timerId)).toEqual(["blocker"])

      yield* h.timers.delete({ namespace: "default", timerId: "deleted" })
      const updated = yield* h.timers.update({ namespace: "default", timerId: "updated", payload: { v: 2 } })
      yield* open(blocker, delivered)
      yield* settle
      yield* advanceTo(T0 + HOUR)

      expect(h.delivery.callsOf("deleted")).toHaveLength(0)
      const calls = h.delivery.callsOf("updated")
      expect(calls.map((call) => call.request.timer.payload)).toEqual([{ v: 2 }])
      expect(calls[0]!.firingId).toBe(updated.firingId)
      expect(yield* h.row("updated")).toMatchObject({ state: "FIRED", attempts: 1, payload: { v: 2 } })
    }))
})

describe("timers moved while in flight or waiting for a permit", () => {
  it.scoped("fire at their new time, not at the next idle poll (their new arming was left out of the reads meanwhile)", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({ config: { deliveryConcurrency: 1 } })
      const blocker = h.delivery.gate("blocker")
      yield* h.create("blocker", T0 + SECOND)
      yield* h.create("waiting", T0 + 2 * SECOND)
      yield* advanceTo(T0 + 2 * SECOND)
      expect(h.delivery.calls.map((call) => call.timerId)).toEqual(["blocker"])

      // "waiting" waits for the permit, "blocker" is in flight: both move a minute on.
      yield* h.timers.update({ namespace: "default", timerId: "waiting", executeAt: T0 + MINUTE })
      yield* h.timers.update({ namespace: "default", timerId: "blocker", executeAt: T0 + MINUTE + SECOND })
      yield* open(blocker)
      yield* settle
      yield* advanceTo(T0 + HOUR)

      expect(timeline(h.delivery.callsOf("waiting"))).toEqual([["waiting", T0 + MINUTE]])
      expect(timeline(h.delivery.callsOf("blocker"))).toEqual([["blocker", T0 + SECOND], ["blocker", T0 + MINUTE + SECOND]])
    }))
})

describe("a delivery that dies", () => {
  it.scoped("leaves its timer due: it fires again, and the shard goes on", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        script: (delivery) => delivery.script("dies-once", () => Effect.die("delivery bug"))
      })
      yield* h.create("dies-once", T0 + SECOND)
      yield* h.create("later", T0 + 10 * SECOND)
      yield* advanceTo(T0 + HOUR)
      // Fired again one second later, not at the next idle poll.
      expect(h.delivery.callsOf("dies-once").map((call) => [call.attempt, call.at])).toEqual([[1, T0 + SECOND], [1, T0 + 2 * SECOND]])
      expect(yield* h.row("dies-once")).toMatchObject({ state: "FIRED", attempts: 1 })
      expect(h.delivery.callsOf("later").map((call) => call.at)).toEqual([T0 + 10 * SECOND])
    }))
})

describe("namespaces created concurrently", () => {
  it.scoped("claim each shard once, and every shard fires", () =>
    Effect.gen(function*() {
      const h = yield* startEngine()
      yield* Effect.all(
        Array.from({ length: 3 }, () => h.timers.createNamespace({ name: "busy", numShards: 8 })),
        { concurrency: "unbounded" }
      )
      const leases = (yield* h.engine.ownedShards).filter((lease) => lease.namespace === "busy")
      expect(leases.map((lease) => lease.shardId).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
      expect(leases.every((lease) => lease.version === 1)).toBe(true)
      const ids = Array.from({ length: 8 }, (_, shard) => idInShard(`busy-${shard}`, shard, 8))
      for (const id of ids) yield* h.create(id, T0 + SECOND, { namespace: "busy" })
      yield* advanceTo(T0 + HOUR)
      for (const id of ids) expect(h.delivery.callsOf(id)).toHaveLength(1)
    }))
})
