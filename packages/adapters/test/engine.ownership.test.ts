/**
 * The firing engine over the real SQLite store, with a scripted delivery, on
 * the TestClock: a shard lost to another owner, shutdown within its grace
 * period, and the bounds on deliveries in flight.
 */
import { describe, expect, it } from "@effect/vitest"
import { DeliveryOutcome, shardIdOf, shardKey } from "@timer/core"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { open, timeline } from "./support/fakeDelivery.js"
import { advanceTo, HOUR, idInShard, MINUTE, SECOND, settle, startEngine, T0 } from "./support/engineHarness.js"

const { delivered } = DeliveryOutcome

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
