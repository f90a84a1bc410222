/**
 * The store contract, ShardOwnership: claim and release, and what a stale
 * lease may no longer do.
 */
import { describe, expect } from "@effect/vitest"
import { ShardOwnershipLost } from "@timer/core"
import { Effect } from "effect"
import { type ContractTest, ids, makeTimer, NS, OTHER_NS, services, takeShard } from "./fixtures.js"

/** Registers the shard ownership tests. */
export const ownershipContract = (test: ContractTest) => {
  describe("shard ownership", () => {
    test("claim increments the version each time and records the owner", Effect.gen(function*() {
      const { ownership } = yield* services
      const shard = { namespace: NS, shardId: 0 }
      expect(yield* takeShard(ownership, shard, "a")).toStrictEqual({ namespace: NS, shardId: 0, version: 1, ownerId: "a" })
      expect(yield* takeShard(ownership, shard, "b")).toStrictEqual({ namespace: NS, shardId: 0, version: 2, ownerId: "b" })
      expect(yield* takeShard(ownership, shard, "b")).toStrictEqual({ namespace: NS, shardId: 0, version: 3, ownerId: "b" })
      // Versions are per shard and per namespace.
      expect((yield* takeShard(ownership, { namespace: NS, shardId: 1 }, "a")).version).toBe(1)
      expect((yield* takeShard(ownership, { namespace: OTHER_NS, shardId: 0 }, "a")).version).toBe(1)
      expect((yield* takeShard(ownership, shard, "c")).version).toBe(4)
    }))

    test("release then claim gives a new, working lease", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* store.upsertTimer(makeTimer("due", { executeAt: 100 }))
      const shard = { namespace: NS, shardId: 0 }
      const first = yield* takeShard(ownership, shard, "a")
      yield* ownership.release(first)
      const second = yield* takeShard(ownership, shard, "b")
      expect(second).toStrictEqual({ namespace: NS, shardId: 0, version: first.version + 1, ownerId: "b" })
      expect(ids(yield* store.dueTimers(second, 100, 10))).toStrictEqual(["due"])
      expect(yield* Effect.flip(store.dueTimers(first, 100, 10))).toBeInstanceOf(ShardOwnershipLost)
    }))

    test("releasing a stale lease does not disturb the current one", Effect.gen(function*() {
      const { ownership, store } = yield* services
      yield* store.upsertTimer(makeTimer("due", { executeAt: 100 }))
      const shard = { namespace: NS, shardId: 0 }
      const first = yield* takeShard(ownership, shard, "a")
      const second = yield* takeShard(ownership, shard, "b")
      yield* ownership.release(first)
      expect(ids(yield* store.dueTimers(second, 100, 10))).toStrictEqual(["due"])
      expect((yield* takeShard(ownership, shard, "c")).version).toBe(second.version + 1)
    }))
  })
}
