/**
 * The store contract, what a shard fiber reads: dueTimers under a lease, and
 * when the shard is next due.
 */
import { describe, expect } from "@effect/vitest"
import { type ShardLease, ShardOwnershipLost, TimerStore } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, ids, makeTimer, NS, OTHER_NS, services, takeShard } from "./fixtures.js"

/** Registers the dueTimers tests. */
export const dueContract = (test: ContractTest) => {
  describe("dueTimers", () => {
    const seedShards = Effect.flatMap(TimerStore, (store) =>
      Effect.gen(function*() {
        yield* store.upsertTimer(makeTimer("due-300", { executeAt: 300 }))
        yield* store.upsertTimer(makeTimer("due-100", { executeAt: 100 }))
        yield* store.upsertTimer(makeTimer("later", { executeAt: 1_000 }))
        yield* store.upsertTimer(makeTimer("due-200", { executeAt: 200 }))
        // A retry: due by nextFireAt, not by executeAt.
        yield* store.upsertTimer(makeTimer("retry-250", { executeAt: 5_000, nextFireAt: 250, attempts: 1, firstAttemptAt: 50 }))
        // Due by executeAt but its retry is later.
        yield* store.upsertTimer(makeTimer("retry-later", { executeAt: 50, nextFireAt: 2_000, attempts: 1 }))
        yield* store.upsertTimer(makeTimer("fired", { executeAt: 10, state: "FIRED", attempts: 1, executedAt: 11 }))
        yield* store.upsertTimer(makeTimer("failed", { executeAt: 20, state: "FAILED", attempts: 1, lastError: "x" }))
        yield* store.upsertTimer(makeTimer("shard-1", { executeAt: 10, shardId: 1 }))
        yield* store.upsertTimer(makeTimer("other-ns", { executeAt: 10, namespace: OTHER_NS }))
      }))

    test("returns the SCHEDULED timers of the shard with nextFireAt <= now, oldest first", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* seedShards
      const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      const due = yield* store.dueTimers(lease, 300, 100)
      expect(ids(due)).toStrictEqual(["due-100", "due-200", "retry-250", "due-300"])
      expect(due.timers[2]).toStrictEqual(makeTimer("retry-250", { executeAt: 5_000, nextFireAt: 250, attempts: 1, firstAttemptAt: 50 }))
      expect(ids(yield* store.dueTimers(lease, 299, 100))).toStrictEqual(["due-100", "due-200", "retry-250"])
      expect(ids(yield* store.dueTimers(lease, 99, 100))).toStrictEqual([])
      expect(ids(yield* store.dueTimers(lease, 1_000_000, 100)))
        .toStrictEqual(["due-100", "due-200", "retry-250", "due-300", "later", "retry-later"])
    }))

    test("respects limit", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* seedShards
      const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      expect(ids(yield* store.dueTimers(lease, 300, 2))).toStrictEqual(["due-100", "due-200"])
      expect(ids(yield* store.dueTimers(lease, 300, 1))).toStrictEqual(["due-100"])
    }))

    test("leaves out the ids given as in flight, and the limit counts only the others", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* seedShards
      const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      expect(ids(yield* store.dueTimers(lease, 300, 100, ["due-100", "retry-250"]))).toStrictEqual(["due-200", "due-300"])
      expect(ids(yield* store.dueTimers(lease, 300, 1, ["due-100"]))).toStrictEqual(["due-200"])
      expect(ids(yield* store.dueTimers(lease, 300, 100, ["not-a-timer"]))).toStrictEqual(["due-100", "due-200", "retry-250", "due-300"])
    }))

    test("excludes other shards and other namespaces", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* seedShards
      const shard1 = yield* takeShard(ownership, { namespace: NS, shardId: 1 }, "owner")
      expect(ids(yield* store.dueTimers(shard1, 1_000_000, 100))).toStrictEqual(["shard-1"])
      const other = yield* takeShard(ownership, { namespace: OTHER_NS, shardId: 0 }, "owner")
      expect(ids(yield* store.dueTimers(other, 1_000_000, 100))).toStrictEqual(["other-ns"])
      const empty = yield* takeShard(ownership, { namespace: NS, shardId: 2 }, "owner")
      expect(yield* store.dueTimers(empty, 1_000_000, 100)).toStrictEqual({ timers: [], nextFireAt: Option.none() })
    }))

    test("fails with ShardOwnershipLost when the lease is stale", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* seedShards
      const first = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "first")
      const second = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "second")
      const error = yield* Effect.flip(store.dueTimers(first, 300, 100))
      expect(error).toBeInstanceOf(ShardOwnershipLost)
      expect(error).toMatchObject({ _tag: "ShardOwnershipLost", namespace: NS, shardId: 0, heldVersion: first.version })
      expect(ids(yield* store.dueTimers(second, 300, 100))).toStrictEqual(["due-100", "due-200", "retry-250", "due-300"])
    }))

    test("fails with ShardOwnershipLost for a lease on a shard never claimed", Effect.gen(function*() {
      const { store } = yield* services
      yield* seedShards
      const forged: ShardLease = { namespace: NS, shardId: 0, version: 1, ownerId: "nobody" }
      const error = yield* Effect.flip(store.dueTimers(forged, 300, 100))
      expect(error).toBeInstanceOf(ShardOwnershipLost)
    }))
  })

  describe("dueTimers: when the shard is next due", () => {
    const seedNext = Effect.flatMap(TimerStore, (store) =>
      Effect.gen(function*() {
        yield* store.upsertTimer(makeTimer("t300", { executeAt: 300 }))
        yield* store.upsertTimer(makeTimer("t100", { executeAt: 100 }))
        yield* store.upsertTimer(makeTimer("t200", { executeAt: 10, nextFireAt: 200, attempts: 1 }))
        yield* store.upsertTimer(makeTimer("fired", { executeAt: 150, state: "FIRED", attempts: 1 }))
        yield* store.upsertTimer(makeTimer("failed", { executeAt: 160, state: "FAILED", attempts: 1 }))
        yield* store.upsertTimer(makeTimer("shard-1", { executeAt: 120, shardId: 1 }))
        yield* store.upsertTimer(makeTimer("other-ns", { executeAt: 110, namespace: OTHER_NS }))
      }))
    const nextAt = (lease: ShardLease, now: number, limit = 100, excludeIds: ReadonlyArray<string> = []) =>
      Effect.flatMap(TimerStore, (store) => store.dueTimers(lease, now, limit, excludeIds)).pipe(
        Effect.map((due) => due.nextFireAt)
      )

    test("is the least nextFireAt after `now` among the shard's SCHEDULED timers", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* seedNext
      const shard0 = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      expect(yield* nextAt(shard0, 0)).toStrictEqual(Option.some(100))
      expect(yield* nextAt(shard0, 99)).toStrictEqual(Option.some(100))
      expect(yield* nextAt(shard0, 100)).toStrictEqual(Option.some(200))
      expect(yield* nextAt(shard0, 250)).toStrictEqual(Option.some(300))
      expect(yield* nextAt(shard0, 300)).toStrictEqual(Option.none())
      const shard1 = yield* takeShard(ownership, { namespace: NS, shardId: 1 }, "owner")
      expect(yield* nextAt(shard1, 0)).toStrictEqual(Option.some(120))
      expect(yield* nextAt(shard1, 120)).toStrictEqual(Option.none())
      const other = yield* takeShard(ownership, { namespace: OTHER_NS, shardId: 0 }, "owner")
      expect(yield* nextAt(other, 0)).toStrictEqual(Option.some(110))
      const empty = yield* takeShard(ownership, { namespace: NS, shardId: 3 }, "owner")
      expect(yield* nextAt(empty, 0)).toStrictEqual(Option.none())
    }))

    test("is the first one left behind when more are due than the limit (so at most now)", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* seedNext
      const shard0 = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      expect(yield* nextAt(shard0, 250, 1)).toStrictEqual(Option.some(200))
      expect(yield* nextAt(shard0, 250, 2)).toStrictEqual(Option.some(300))
    }))

    test("leaves out the timers in flight", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* seedNext
      const shard0 = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      expect(yield* nextAt(shard0, 0, 100, ["t100"])).toStrictEqual(Option.some(200))
      expect(yield* nextAt(shard0, 250, 1, ["t100"])).toStrictEqual(Option.some(300))
    }))
  })
}
