/**
 * The store contract, recordFiring: a firing's outcome is written only for the
 * arming it belongs to, and only under the current lease.
 */
import { describe, expect } from "@effect/vitest"
import { applyFiringUpdate, type FiringUpdate, RetryPolicy, ShardOwnershipLost, type TimerRecord } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, ids, listAll, makeTimer, mustGet, NS, services, takeShard } from "./fixtures.js"

/** Registers the recordFiring tests. */
export const firingContract = (test: ContractTest) => {
  describe("recordFiring", () => {
    // A timer that has been re-armed and retried, so every optional field is set.
    const armed = makeTimer("a", {
      executeAt: 1_000,
      nextFireAt: 1_400,
      payload: { keep: "me" },
      retryPolicy: new RetryPolicy({ maxAttempts: 5 }),
      attempts: 2,
      firstAttemptAt: 1_000,
      executedAt: 500,
      lastError: "HTTP 500",
      createdAt: 100,
      updatedAt: 1_200
    })
    const setup = Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* store.upsertTimer(armed)
      yield* store.upsertTimer(makeTimer("bystander", { executeAt: 1_000 }))
      const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      return { lease, ownership, store }
    })

    const updates: ReadonlyArray<FiringUpdate> = [
      { _tag: "Fired", attempts: 3, executedAt: 1_450 },
      { _tag: "Rearmed", executeAt: 60_000, firingId: "firing-a-2", executedAt: 1_450 },
      { _tag: "RetryScheduled", attempts: 3, nextFireAt: 5_000, firstAttemptAt: 1_000, lastError: "HTTP 503" },
      { _tag: "Failed", attempts: 3, lastError: "HTTP 404 (permanent)" }
    ]
    const expectations: Record<FiringUpdate["_tag"], Partial<TimerRecord>> = {
      Fired: { state: "FIRED", attempts: 3, executedAt: 1_450, lastError: "HTTP 500", updatedAt: 1_500 },
      Rearmed: {
        state: "SCHEDULED",
        attempts: 0,
        executeAt: 60_000,
        nextFireAt: 60_000,
        firingId: "firing-a-2",
        executedAt: 1_450,
        updatedAt: 1_500
      },
      RetryScheduled: {
        state: "SCHEDULED",
        attempts: 3,
        executeAt: 1_000,
        nextFireAt: 5_000,
        firstAttemptAt: 1_000,
        lastError: "HTTP 503",
        firingId: armed.firingId,
        updatedAt: 1_500
      },
      Failed: { state: "FAILED", attempts: 3, lastError: "HTTP 404 (permanent)", updatedAt: 1_500 }
    }

    for (const update of updates) {
      test(`${update._tag} writes what applyFiringUpdate describes`, Effect.gen(function*() {
        const { lease, store } = yield* setup
        const before = yield* mustGet(armed)
        const bystander = yield* mustGet({ namespace: NS, id: "bystander" })
        expect(yield* store.recordFiring(lease, armed, armed.firingId, update, 1_500)).toBe(true)
        const after = yield* mustGet(armed)
        expect(after).toStrictEqual(applyFiringUpdate(before, update, 1_500))
        expect(after).toMatchObject(expectations[update._tag])
        expect(after.createdAt).toBe(100)
        expect(after.payload).toStrictEqual({ keep: "me" })
        expect(yield* mustGet(bystander)).toStrictEqual(bystander)
      }))
    }

    test("after Rearmed only the new firingId is recorded", Effect.gen(function*() {
      const { lease, store } = yield* setup
      const rearm: FiringUpdate = { _tag: "Rearmed", executeAt: 60_000, firingId: "firing-a-2", executedAt: 1_450 }
      expect(yield* store.recordFiring(lease, armed, armed.firingId, rearm, 1_500)).toBe(true)
      const rearmed = yield* mustGet(armed)
      const fired: FiringUpdate = { _tag: "Fired", attempts: 1, executedAt: 60_010 }
      expect(yield* store.recordFiring(lease, armed, armed.firingId, fired, 60_020)).toBe(false)
      expect(yield* mustGet(armed)).toStrictEqual(rearmed)
      expect(yield* store.recordFiring(lease, armed, "firing-a-2", fired, 60_020)).toBe(true)
      expect(yield* mustGet(armed)).toStrictEqual(applyFiringUpdate(rearmed, fired, 60_020))
    }))

    test("a retry keeps the firingId, so the next attempt is recorded too", Effect.gen(function*() {
      const { lease, store } = yield* setup
      const retry: FiringUpdate = { _tag: "RetryScheduled", attempts: 3, nextFireAt: 5_000, firstAttemptAt: 1_000, lastError: "e" }
      expect(yield* store.recordFiring(lease, armed, armed.firingId, retry, 1_500)).toBe(true)
      const fired: FiringUpdate = { _tag: "Fired", attempts: 4, executedAt: 5_010 }
      expect(yield* store.recordFiring(lease, armed, armed.firingId, fired, 5_020)).toBe(true)
      expect(yield* mustGet(armed)).toMatchObject({ state: "FIRED", attempts: 4, executedAt: 5_010, lastError: "e" })
    }))

    test("returns false and changes nothing when an upsert re-armed the timer meanwhile", Effect.gen(function*() {
      const { lease, store } = yield* setup
      const replaced = makeTimer("a", { executeAt: 9_000, firingId: "firing-a-new", updatedAt: 1_300 })
      yield* store.upsertTimer(replaced)
      const before = yield* mustGet(armed)
      for (const update of updates) {
        expect(yield* store.recordFiring(lease, armed, armed.firingId, update, 1_500)).toBe(false)
      }
      expect(yield* mustGet(armed)).toStrictEqual(before)
      expect(before).toStrictEqual({ ...replaced, createdAt: 100 })
    }))

    test("returns false and changes nothing when the timer is no longer SCHEDULED", Effect.gen(function*() {
      const { lease, store } = yield* setup
      const fired: FiringUpdate = { _tag: "Fired", attempts: 3, executedAt: 1_450 }
      expect(yield* store.recordFiring(lease, armed, armed.firingId, fired, 1_500)).toBe(true)
      const before = yield* mustGet(armed)
      for (const update of updates) {
        expect(yield* store.recordFiring(lease, armed, armed.firingId, update, 2_000)).toBe(false)
      }
      expect(yield* mustGet(armed)).toStrictEqual(before)
    }))

    test("returns false when the timer was deleted, and does not bring it back", Effect.gen(function*() {
      const { lease, store } = yield* setup
      expect(yield* store.deleteTimer(armed)).toBe(true)
      for (const update of updates) {
        expect(yield* store.recordFiring(lease, armed, armed.firingId, update, 1_500)).toBe(false)
      }
      expect(yield* store.getTimer(armed)).toStrictEqual(Option.none())
      expect(ids(yield* listAll({ namespace: NS }))).toStrictEqual(["bystander"])
    }))

    test("fails with ShardOwnershipLost and writes nothing when the lease is stale", Effect.gen(function*() {
      const { lease, ownership, store } = yield* setup
      const newer = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "usurper")
      const before = yield* mustGet(armed)
      for (const update of updates) {
        const error = yield* Effect.flip(store.recordFiring(lease, armed, armed.firingId, update, 1_500))
        expect(error).toBeInstanceOf(ShardOwnershipLost)
        expect(error).toMatchObject({ namespace: NS, shardId: 0, heldVersion: lease.version })
      }
      expect(yield* mustGet(armed)).toStrictEqual(before)
      // The current lease still writes.
      const fired: FiringUpdate = { _tag: "Fired", attempts: 3, executedAt: 1_450 }
      expect(yield* store.recordFiring(newer, armed, armed.firingId, fired, 1_500)).toBe(true)
    }))

    test("concurrent outcomes under fresh and stale leases each get their own answer", Effect.gen(function*() {
      const { ownership, store } = yield* services
      // Shard 0 is taken over (its first lease is stale); shard 1's lease is current.
      const stale = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "old")
      yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "new")
      const fresh = yield* takeShard(ownership, { namespace: NS, shardId: 1 }, "owner")
      const onShard = (shardId: number, n: number) =>
        Array.from({ length: n }, (_, i) => makeTimer(`s${shardId}-${i}`, { shardId }))
      const lost = onShard(0, 10)
      const kept = onShard(1, 10)
      for (const timer of [...lost, ...kept]) yield* store.upsertTimer(timer)
      const fired: FiringUpdate = { _tag: "Fired", attempts: 1, executedAt: 2_000 }
      const results = yield* Effect.all(
        [
          ...lost.map((t) => Effect.either(store.recordFiring(stale, t, t.firingId, fired, 2_000))),
          ...kept.map((t, i) =>
            Effect.either(store.recordFiring(fresh, t, i % 2 === 0 ? t.firingId : "another-arming", fired, 2_000)))
        ],
        { concurrency: "unbounded" }
      )
      results.slice(0, 10).forEach((result) => {
        expect(result._tag).toBe("Left")
        expect(result._tag === "Left" && result.left).toBeInstanceOf(ShardOwnershipLost)
      })
      expect(results.slice(10).map((result) => result._tag === "Right" && result.right))
        .toStrictEqual(kept.map((_, i) => i % 2 === 0))
      for (const t of lost) expect((yield* mustGet(t)).state).toBe("SCHEDULED")
      for (const [i, t] of kept.entries()) expect((yield* mustGet(t)).state).toBe(i % 2 === 0 ? "FIRED" : "SCHEDULED")
    }))

    test("concurrent outcomes of every kind, one timer twice, are each written as applyFiringUpdate describes", Effect.gen(function*() {
      const { lease, store } = yield* setup
      const timers = updates.map((_, i) => makeTimer(`kind-${i}`, { executeAt: 1_000, payload: { i } }))
      const twice = makeTimer("twice", { executeAt: 1_000 })
      for (const timer of [...timers, twice]) yield* store.upsertTimer(timer)
      const before = yield* Effect.forEach([...timers, twice], mustGet)
      const retry: FiringUpdate = { _tag: "RetryScheduled", attempts: 1, nextFireAt: 1_600, firstAttemptAt: 1_500, lastError: "HTTP 503" }
      const fired: FiringUpdate = { _tag: "Fired", attempts: 2, executedAt: 1_600 }
      const results = yield* Effect.all(
        [
          ...timers.map((t, i) => store.recordFiring(lease, t, t.firingId, updates[i]!, 1_500)),
          // Queued together, so written in one batch: the second waits for the first.
          store.recordFiring(lease, twice, twice.firingId, retry, 1_500),
          store.recordFiring(lease, twice, twice.firingId, fired, 1_600)
        ],
        { concurrency: "unbounded" }
      )
      expect(results).toStrictEqual([true, true, true, true, true, true])
      for (const [i, t] of timers.entries()) {
        expect(yield* mustGet(t)).toStrictEqual(applyFiringUpdate(before[i]!, updates[i]!, 1_500))
      }
      expect(yield* mustGet(twice)).toStrictEqual(applyFiringUpdate(applyFiringUpdate(before[4]!, retry, 1_500), fired, 1_600))
    }))
  })
}
