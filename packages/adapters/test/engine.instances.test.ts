/**
 * Several engines on one store: the shards spread evenly over the live
 * instances and follow them joining, leaving and dying, never held by two at
 * once (the stale owner's race and the exclusive store are in
 * engine.fencing.test.ts). Two or three engines run in this process on one SQLite
 * file, each with its own instance id, wake-ups and delivery, on the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { planAssignment, shardIdOf, shardKey } from "@timer/core"
import { Effect, Exit } from "effect"
import { idInShard, SECOND, T0 } from "./support/engineHarness.js"
import { open } from "./support/fakeDelivery.js"
import {
  ALL_SHARDS,
  checkOwnership,
  deliveriesOf,
  NUM_SHARDS,
  openSharedStore,
  ROUND_MS,
  settleAll,
  spread,
  startInstance,
  stepTo,
  TTL_MS
} from "./support/instancesHarness.js"


describe("two instances", () => {
  it.scoped("spread 16 shards 8/8, each held by exactly one; timers created through either fire once, on time, by their shard's owner", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const a = yield* startInstance(shared, "a")
      expect(yield* a.held).toEqual(ALL_SHARDS)
      yield* stepTo(T0 + 100, 100)
      const b = yield* startInstance(shared, "b")
      const instances = [a, b]
      yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))

      expect(yield* spread(instances)).toEqual({ a: 8, b: 8 })
      const holders = yield* checkOwnership(shared, instances)
      expect(holders.size).toBe(NUM_SHARDS)
      const rows = yield* shared.shardRows
      expect(rows.map((row) => row.shardId)).toEqual(ALL_SHARDS)
      expect(rows.filter((row) => row.ownerId === "a")).toHaveLength(8)
      expect(rows.filter((row) => row.ownerId === "b")).toHaveLength(8)
      expect([...(yield* a.held), ...(yield* b.held)].sort((x, y) => x - y)).toEqual(ALL_SHARDS)

      // Two timers per shard, one created through each instance, due at scattered times.
      const created: Array<{ readonly id: string; readonly executeAt: number }> = []
      for (const shardId of ALL_SHARDS) {
        for (const [i, via] of instances.entries()) {
          const id = idInShard(`two-${via.id}-${shardId}`, shardId, NUM_SHARDS)
          const executeAt = T0 + 2 * SECOND + 137 + 211 * shardId + 71 * i
          yield* via.create(id, executeAt)
          created.push({ id, executeAt })
        }
      }
      yield* stepTo(T0 + 8 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))

      for (const { executeAt, id } of created) {
        const owner = holders.get(shardKey({ namespace: "default", shardId: shardIdOf(id, NUM_SHARDS) }))
        expect(deliveriesOf(instances, id), id).toEqual([{ by: owner, at: executeAt }])
        expect(yield* shared.store.getTimer({ namespace: "default", id })).toMatchObject({
          value: { state: "FIRED", attempts: 1, executedAt: executeAt }
        })
      }
      // Half of them were created through the instance that does not own their shard: woken across instances.
      expect(shared.bus.broadcasts()).toBe(NUM_SHARDS)
      for (const instance of instances) {
        expect(instance.firings.every((firing) => firing.exit._tag === "Success")).toBe(true)
        expect(instance.firings).toHaveLength(NUM_SHARDS)
      }
      // The spread did not move once it was reached.
      expect(yield* spread(instances)).toEqual({ a: 8, b: 8 })
    }))
})

/** Three instances started 100 ms apart (a, b, c), stepped until T0 + 2 s: spread 6/5/5. */
const startThree = (shared: Effect.Effect.Success<typeof openSharedStore>) =>
  Effect.gen(function*() {
    const a = yield* startInstance(shared, "a")
    yield* stepTo(T0 + 100, 100)
    const b = yield* startInstance(shared, "b")
    yield* stepTo(T0 + 200, 100)
    const c = yield* startInstance(shared, "c")
    const instances = [a, b, c]
    yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))
    expect(yield* spread(instances)).toEqual({ a: 6, b: 5, c: 5 })
    return { a, b, c, instances }
  })

const keyOf = (shardId: number) => shardKey({ namespace: "default", shardId })

describe("a third instance joining", () => {
  it.scoped("shards move until 6/5/5, never held by two at once, and timers keep firing during the move", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const a = yield* startInstance(shared, "a")
      yield* stepTo(T0 + 100, 100)
      const b = yield* startInstance(shared, "b")
      const two = [a, b]
      yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, two)))
      expect(yield* spread(two)).toEqual({ a: 8, b: 8 })
      const before = yield* checkOwnership(shared, two)

      // Three timers per shard, due every 61 ms from T0 + 2.1 s on, created through a and b.
      const created: Array<{ readonly id: string; readonly executeAt: number; readonly shardId: number }> = []
      for (let k = 0; k < 3 * NUM_SHARDS; k++) {
        const shardId = k % NUM_SHARDS
        const id = idInShard(`join-${k}`, shardId, NUM_SHARDS)
        const executeAt = T0 + 2 * SECOND + 100 + 61 * k
        yield* two[k % 2]!.create(id, executeAt)
        created.push({ id, executeAt, shardId })
      }
      yield* stepTo(T0 + 2300, 100, () => Effect.asVoid(checkOwnership(shared, two)))
      const c = yield* startInstance(shared, "c")
      const three = [a, b, c]
      // And one per shard created through c as soon as it runs (it holds none yet).
      expect(yield* c.held).toEqual([])
      for (let k = 0; k < NUM_SHARDS; k++) {
        const id = idInShard(`join-c-${k}`, k, NUM_SHARDS)
        const executeAt = T0 + 2300 + 50 + 97 * k
        yield* c.create(id, executeAt)
        created.push({ id, executeAt, shardId: k })
      }
      yield* stepTo(T0 + 6 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, three)))

      expect(yield* spread(three)).toEqual({ a: 6, b: 5, c: 5 })
      const after = yield* checkOwnership(shared, three)
      // Five shards moved, each from a or b to c: given up by their holder, then claimed; a and b claimed nothing.
      const moved = ALL_SHARDS.filter((shardId) => before.get(keyOf(shardId)) !== after.get(keyOf(shardId)))
      expect(moved).toHaveLength(5)
      for (const shardId of moved) expect(after.get(keyOf(shardId))).toBe("c")
      expect(c.claims.map((claim) => claim.lease.shardId).sort((x, y) => x - y)).toEqual(moved)
      expect(a.claims.filter((claim) => claim.at > T0 + SECOND)).toEqual([])
      expect(b.claims.filter((claim) => claim.at > T0 + SECOND)).toEqual([])
      expect(moved.filter((shardId) => before.get(keyOf(shardId)) === "a")).toHaveLength(2)

      // Every timer fired exactly once, by the holder of its shard at the time: on time in a shard
      // that stayed, at most one round late in one that moved.
      const byInMoved = new Set<string>()
      for (const { executeAt, id, shardId } of created) {
        const calls = deliveriesOf(three, id)
        expect(calls, id).toHaveLength(1)
        const call = calls[0]!
        if (moved.includes(shardId)) {
          expect([before.get(keyOf(shardId)), "c"], id).toContain(call.by)
          expect(call.at, id).toBeGreaterThanOrEqual(executeAt)
          expect(call.at - executeAt, id).toBeLessThanOrEqual(ROUND_MS)
          byInMoved.add(call.by === "c" ? "new" : "old")
        } else {
          expect(call, id).toEqual({ by: after.get(keyOf(shardId)), at: executeAt })
        }
        expect(yield* shared.store.getTimer({ namespace: "default", id })).toMatchObject({
          value: { state: "FIRED", attempts: 1 }
        })
      }
      // Timers of moved shards fired both before and after their move.
      expect(byInMoved).toEqual(new Set(["old", "new"]))
      for (const instance of three) expect(instance.firings.every((firing) => firing.exit._tag === "Success")).toBe(true)
    }))
})

describe("a shard given up while a delivery is in flight", () => {
  it.scoped("is released only once the delivery is done (drain, then release): never held by two at once", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const config = { shutdownGraceMs: 2 * SECOND }
      const a = yield* startInstance(shared, "a", { config })
      yield* stepTo(T0 + 100, 100)
      const b = yield* startInstance(shared, "b", { config })
      yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, [a, b])))
      expect(yield* spread([a, b])).toEqual({ a: 8, b: 8 })

      // The shards a will give up once c is alive, as its own plan says.
      const aKeys = new Set((yield* a.engine.ownedShards).map(shardKey))
      const plan = planAssignment({ me: "a", live: ["b", "c"], shards: yield* shared.shardRows, held: aKeys })
      expect(plan.release).toHaveLength(2)
      const shardId = plan.release[0]!.shardId
      // In that shard: a delivery in flight when a gives the shard up (T0 + 2.5 s), and a timer due while it drains.
      const slow = idInShard("drain-slow", shardId, NUM_SHARDS)
      const gate = a.delivery.gate(slow)
      yield* Effect.addFinalizer(() => open(gate))
      yield* a.create(slow, T0 + 2450)
      const during = idInShard("drain-during", shardId, NUM_SHARDS)
      yield* b.create(during, T0 + 2700)

      yield* stepTo(T0 + 2300, 100)
      const c = yield* startInstance(shared, "c", { config })
      const instances = [a, b, c]
      yield* stepTo(T0 + 3 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))
      // a still drains the shard: it holds it, and nobody else does.
      expect(a.delivery.callsOf(slow).map((call) => call.status)).toEqual(["in-flight"])
      expect(yield* a.held).toContain(shardId)
      expect((yield* shared.shardRows)[shardId]!.ownerId).toBe("a")

      yield* open(gate)
      yield* settleAll
      yield* stepTo(T0 + 5 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))
      expect(yield* spread(instances)).toEqual({ a: 6, b: 5, c: 5 })
      // The delivery in flight finished and its outcome was written under a's lease; c claimed the shard after.
      expect(deliveriesOf(instances, slow)).toEqual([{ by: "a", at: T0 + 2450 }])
      const written = a.firings.filter((firing) => firing.key.id === slow)
      expect(written.map((firing) => firing.exit)).toEqual([Exit.succeed(true)])
      expect(yield* shared.store.getTimer({ namespace: "default", id: slow })).toMatchObject({
        value: { state: "FIRED", attempts: 1, executedAt: T0 + 3 * SECOND }
      })
      const claimOfShard = c.claims.find((claim) => claim.lease.shardId === shardId)!
      expect(claimOfShard.at).toBeGreaterThanOrEqual(T0 + 3 * SECOND)
      expect(claimOfShard.at - (T0 + 3 * SECOND)).toBeLessThanOrEqual(ROUND_MS)
      // The timer due while a drained was fired once, by c, when it had claimed the shard.
      expect(deliveriesOf(instances, during)).toEqual([{ by: "c", at: claimOfShard.at }])
    }))
})

describe("an instance leaving", () => {
  it.scoped("its shutdown gives its shards back; the others take them within a second and fire its due timers", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const { a, b, c, instances } = yield* startThree(shared)
      const cShards = yield* c.held
      expect(cShards).toHaveLength(5)
      // Timers of c's shards due just after it leaves, created through c and through a.
      const created: Array<{ readonly id: string; readonly executeAt: number }> = []
      for (const [i, shardId] of cShards.entries()) {
        for (const [j, via] of [c, a].entries()) {
          const id = idInShard(`leave-${via.id}-${shardId}`, shardId, NUM_SHARDS)
          const executeAt = T0 + 2200 + 40 * i + 300 * j
          yield* via.create(id, executeAt)
          created.push({ id, executeAt })
        }
      }

      const leftAt = T0 + 2150
      yield* stepTo(leftAt, 50)
      yield* c.shutdown
      expect(yield* c.held).toEqual([])
      const rows = yield* shared.shardRows
      for (const shardId of cShards) expect(rows[shardId]!.ownerId).toBeUndefined()
      expect((yield* shared.instanceRows).map((row) => row.id)).toEqual(["a", "b"])

      yield* stepTo(leftAt + SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))
      expect(yield* spread(instances)).toEqual({ a: 8, b: 8, c: 0 })
      const holders = yield* checkOwnership(shared, instances)
      const takeovers = [...a.claims, ...b.claims].filter((claim) => claim.at > leftAt)
      expect(takeovers.map((claim) => claim.lease.shardId).sort((x, y) => x - y)).toEqual(cShards)
      for (const claim of takeovers) expect(claim.at - leftAt).toBeLessThanOrEqual(2 * ROUND_MS)

      expect(c.delivery.calls).toEqual([])
      for (const { executeAt, id } of created) {
        const calls = deliveriesOf(instances, id)
        expect(calls, id).toHaveLength(1)
        expect(calls[0]!.by).toBe(holders.get(keyOf(shardIdOf(id, NUM_SHARDS))))
        expect(calls[0]!.at).toBeGreaterThanOrEqual(executeAt)
        expect(calls[0]!.at).toBeLessThanOrEqual(leftAt + SECOND)
        expect(yield* shared.store.getTimer({ namespace: "default", id })).toMatchObject({
          value: { state: "FIRED", attempts: 1 }
        })
      }
    }))
})

describe("an instance dying", () => {
  it.scoped("its shards are taken once its registration has lapsed, not before, within two rounds; it fences itself then", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const { a, b, c, instances } = yield* startThree(shared)
      const cLeases = yield* c.engine.ownedShards
      const cShards = cLeases.map((lease) => lease.shardId).sort((x, y) => x - y)
      expect(cShards).toHaveLength(5)

      // From here on c reaches the ownership port no more: no heartbeat, no release, no deregistration.
      const cutAt = T0 + 2150
      yield* stepTo(cutAt, 50)
      c.cutOffOwnership()
      const lapse = c.heartbeats.filter((beat) => beat.ok).at(-1)!.expiresAt
      expect(lapse).toBeGreaterThan(cutAt + TTL_MS - ROUND_MS)
      expect(lapse).toBeLessThanOrEqual(cutAt + TTL_MS)

      // In each of c's shards: a timer due while c is still registered, and one due just after it lapsed.
      const early: Array<{ readonly id: string; readonly executeAt: number }> = []
      const late: Array<{ readonly id: string; readonly executeAt: number }> = []
      for (const [i, shardId] of cShards.entries()) {
        const earlyId = idInShard(`dead-early-${shardId}`, shardId, NUM_SHARDS)
        yield* a.create(earlyId, cutAt + SECOND + 10 * i)
        early.push({ id: earlyId, executeAt: cutAt + SECOND + 10 * i })
        const lateId = idInShard(`dead-late-${shardId}`, shardId, NUM_SHARDS)
        yield* b.create(lateId, lapse + 100 + 10 * i)
        late.push({ id: lateId, executeAt: lapse + 100 + 10 * i })
      }

      yield* stepTo(lapse + 3 * ROUND_MS, 100, (now) =>
        Effect.gen(function*() {
          yield* checkOwnership(shared, instances)
          if (now < lapse) {
            // Still registered: its shards stay its own, at the versions it holds.
            const rows = yield* shared.shardRows
            for (const lease of cLeases) expect(rows[lease.shardId]).toMatchObject({ ownerId: "c", version: lease.version })
          } else {
            expect(yield* c.held).toEqual([])
          }
        }))

      const takeovers = [...a.claims, ...b.claims].filter((claim) => claim.at > cutAt)
      expect(takeovers.map((claim) => claim.lease.shardId).sort((x, y) => x - y)).toEqual(cShards)
      for (const claim of takeovers) {
        // Claimed from the dead owner at the version it held: nothing gave them back.
        expect(claim.seenVersion).toBe(cLeases.find((lease) => lease.shardId === claim.lease.shardId)!.version)
        expect(claim.at).toBeGreaterThanOrEqual(lapse)
      }
      const lastTakeover = Math.max(...takeovers.map((claim) => claim.at))
      expect(lastTakeover - lapse).toBeLessThanOrEqual(2 * ROUND_MS)
      expect(lastTakeover - cutAt).toBeLessThanOrEqual(TTL_MS + 2 * ROUND_MS)
      expect(yield* spread(instances)).toEqual({ a: 8, b: 8, c: 0 })
      expect(c.heartbeats.filter((beat) => beat.at > cutAt).every((beat) => !beat.ok)).toBe(true)

      // c fired what fell due while it was registered, and nothing after.
      for (const { executeAt, id } of early) expect(deliveriesOf(instances, id), id).toEqual([{ by: "c", at: executeAt }])
      expect(c.delivery.calls.filter((call) => call.at >= lapse)).toEqual([])
      const holders = yield* checkOwnership(shared, instances)
      for (const { executeAt, id } of late) {
        const calls = deliveriesOf(instances, id)
        expect(calls, id).toHaveLength(1)
        expect(calls[0]!.by).toBe(holders.get(keyOf(shardIdOf(id, NUM_SHARDS))))
        expect(calls[0]!.at).toBeGreaterThanOrEqual(executeAt)
        expect(calls[0]!.at).toBeLessThanOrEqual(lapse + 2 * ROUND_MS)
      }
    }))
})
