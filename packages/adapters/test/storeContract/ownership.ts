/**
 * The store contract, ShardOwnership's shards: the shard rows (ensureShards,
 * shards), the compare-and-set claim, release, and what a stale lease may no
 * longer do.
 */
import { describe, expect } from "@effect/vitest"
import { type ShardLease, ShardOwnershipLost, type ShardState } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, ids, makeTimer, NS, OTHER_NS, services, takeShard } from "./fixtures.js"

/** A shard row as `shards` lists it. */
const row = (namespace: string, shardId: number, version = 0, ownerId?: string): ShardState => ({
  namespace,
  shardId,
  version,
  ownerId
})

/** The rows of shards 0..n-1 of a namespace, never claimed. */
const freshRows = (namespace: string, n: number) => Array.from({ length: n }, (_, shardId) => row(namespace, shardId))

/** The stored row of one shard, if any. */
const rowOf = (shard: { readonly namespace: string; readonly shardId: number }) =>
  Effect.flatMap(services, ({ ownership }) => ownership.shards).pipe(
    Effect.map((rows) => Option.fromNullable(rows.find((r) => r.namespace === shard.namespace && r.shardId === shard.shardId)))
  )

/** Registers the shard ownership tests. */
export const ownershipContract = (test: ContractTest) => {
  describe("shard rows", () => {
    test("a new store has no shard rows", Effect.gen(function*() {
      const { ownership } = yield* services
      expect(yield* ownership.shards).toStrictEqual([])
    }))

    test("ensureShards makes shards 0..n-1 at version 0 with no owner", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 12)
      // Ordered by shard id as a number (10 and 11 after 9).
      expect(yield* ownership.shards).toStrictEqual(freshRows(NS, 12))
    }))

    test("ensureShards is idempotent: existing rows keep their version and owner, only missing ones are added", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 4)
      const one = Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 1 }, "a", 0))
      const twoA = Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 2 }, "a", 0))
      Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 2 }, "b", twoA.version))
      const three = Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 3 }, "c", 0))
      yield* ownership.release(three)
      const claimed = [row(NS, 0), row(NS, 1, 1, one.ownerId), row(NS, 2, 2, "b"), row(NS, 3, 1)]
      expect(yield* ownership.shards).toStrictEqual(claimed)

      yield* ownership.ensureShards(NS, 4)
      expect(yield* ownership.shards).toStrictEqual(claimed)
      // Fewer shards: nothing is removed.
      yield* ownership.ensureShards(NS, 2)
      expect(yield* ownership.shards).toStrictEqual(claimed)
      // More shards: only the missing rows are made.
      yield* ownership.ensureShards(NS, 7)
      expect(yield* ownership.shards).toStrictEqual([...claimed, row(NS, 4), row(NS, 5), row(NS, 6)])
      // The claims still hold: a stale version still loses, the current one still wins.
      expect(yield* ownership.claim({ namespace: NS, shardId: 2 }, "c", 0)).toStrictEqual(Option.none())
      expect(yield* ownership.claim({ namespace: NS, shardId: 2 }, "c", 2))
        .toStrictEqual(Option.some({ namespace: NS, shardId: 2, version: 3, ownerId: "c" }))
    }))

    test("concurrent ensureShards (instances starting at once) make every row once", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* Effect.all(
        [1_200, 700, 1_200, 1, 1_200, 1_000].map((n) => ownership.ensureShards(NS, n)),
        { concurrency: "unbounded", discard: true }
      )
      expect(yield* ownership.shards).toStrictEqual(freshRows(NS, 1_200))
    }))

    test("shards lists every namespace's rows, by namespace then shard id", Effect.gen(function*() {
      const { ownership } = yield* services
      // Names whose order is the same under any collation, made out of order.
      yield* ownership.ensureShards("gamma", 3)
      yield* ownership.ensureShards("alpha", 11)
      yield* ownership.ensureShards("beta", 1)
      yield* ownership.claim({ namespace: "beta", shardId: 0 }, "x", 0)
      expect(yield* ownership.shards).toStrictEqual([
        ...freshRows("alpha", 11),
        row("beta", 0, 1, "x"),
        ...freshRows("gamma", 3)
      ])
      // Namespaces are independent: the same shard id of another namespace is untouched by a claim.
      expect(yield* rowOf({ namespace: "alpha", shardId: 0 })).toStrictEqual(Option.some(row("alpha", 0)))
    }))

    test("ensureShards makes 4096 shards, once", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(OTHER_NS, 2)
      yield* ownership.ensureShards(NS, 4096)
      const expected = [...freshRows(NS, 4096), ...freshRows(OTHER_NS, 2)]
      expect(yield* ownership.shards).toStrictEqual(expected)
      yield* ownership.ensureShards(NS, 4096)
      expect(yield* ownership.shards).toStrictEqual(expected)
      expect(yield* ownership.claim({ namespace: NS, shardId: 4095 }, "a", 0))
        .toStrictEqual(Option.some({ namespace: NS, shardId: 4095, version: 1, ownerId: "a" }))
      expect(yield* ownership.claim({ namespace: NS, shardId: 4096 }, "a", 0)).toStrictEqual(Option.none())
    }))
  })

  describe("claim", () => {
    test("at the version seen, claim increments the version, records the owner and returns the lease", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 2)
      const shard = { namespace: NS, shardId: 1 }
      expect(yield* ownership.claim(shard, "a", 0)).toStrictEqual(Option.some({ ...shard, version: 1, ownerId: "a" }))
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0), row(NS, 1, 1, "a")])
      // A claim by the holder itself is a new claim too (a restart under the same id).
      expect(yield* ownership.claim(shard, "a", 1)).toStrictEqual(Option.some({ ...shard, version: 2, ownerId: "a" }))
      expect(yield* ownership.claim(shard, "b", 2)).toStrictEqual(Option.some({ ...shard, version: 3, ownerId: "b" }))
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0), row(NS, 1, 3, "b")])
    }))

    test("a claim given a shard row as listed returns a lease of exactly the lease's fields", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 1)
      const first = Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 0 }, "old", 0))
      const listed = (yield* ownership.shards)[0]!
      expect(listed).toStrictEqual(row(NS, 0, 1, "old"))
      // As the planner does: the listed row is the shard, its version the version seen.
      const lease: ShardLease = Option.getOrThrow(yield* ownership.claim(listed, "new", listed.version))
      expect(lease).toStrictEqual({ namespace: NS, shardId: 0, version: first.version + 1, ownerId: "new" })
    }))

    test("at a stale (or future) version, claim returns None and changes nothing", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 1)
      const shard = { namespace: NS, shardId: 0 }
      Option.getOrThrow(yield* ownership.claim(shard, "a", 0))
      Option.getOrThrow(yield* ownership.claim(shard, "a", 1))
      const before = yield* ownership.shards
      expect(before).toStrictEqual([row(NS, 0, 2, "a")])
      for (const seen of [0, 1, 3, 100]) {
        expect(yield* ownership.claim(shard, "b", seen)).toStrictEqual(Option.none())
        expect(yield* ownership.shards).toStrictEqual(before)
      }
      // A released shard is claimed at its version too, not at an older one.
      yield* ownership.release({ ...shard, version: 2, ownerId: "a" })
      expect(yield* ownership.claim(shard, "b", 1)).toStrictEqual(Option.none())
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0, 2)])
    }))

    test("a claim of a shard that has no row returns None and makes no row", Effect.gen(function*() {
      const { ownership } = yield* services
      expect(yield* ownership.claim({ namespace: NS, shardId: 0 }, "a", 0)).toStrictEqual(Option.none())
      expect(yield* ownership.shards).toStrictEqual([])
      yield* ownership.ensureShards(NS, 2)
      // Past the namespace's shards, and in a namespace without rows.
      expect(yield* ownership.claim({ namespace: NS, shardId: 2 }, "a", 0)).toStrictEqual(Option.none())
      expect(yield* ownership.claim({ namespace: OTHER_NS, shardId: 0 }, "a", 0)).toStrictEqual(Option.none())
      expect(yield* ownership.shards).toStrictEqual(freshRows(NS, 2))
    }))

    test("concurrent claims at the same version: exactly one wins, on every shard", Effect.gen(function*() {
      const { ownership } = yield* services
      const shardCount = 20
      const contenders = ["a", "b", "c"]
      yield* ownership.ensureShards(NS, shardCount)
      // Every claim of every shard at once.
      const attempts = Array.from({ length: shardCount }, (_, shardId) =>
        contenders.map((ownerId) => ({ shard: { namespace: NS, shardId }, ownerId })))
      const results = yield* Effect.all(
        attempts.flat().map(({ ownerId, shard }) => ownership.claim(shard, ownerId, 0)),
        { concurrency: "unbounded" }
      )
      const rows = yield* ownership.shards
      for (let shardId = 0; shardId < shardCount; shardId++) {
        const won = results.slice(shardId * contenders.length, (shardId + 1) * contenders.length).filter(Option.isSome)
        expect(won).toHaveLength(1)
        const lease = won[0]!.value
        expect(lease).toMatchObject({ namespace: NS, shardId, version: 1 })
        expect(contenders).toContain(lease.ownerId)
        // The row shows the winner.
        expect(rows[shardId]).toStrictEqual(row(NS, shardId, 1, lease.ownerId))
      }
      // Again, each shard from the version its winner got.
      const again = yield* Effect.all(
        attempts.flat().map(({ ownerId, shard }) => ownership.claim(shard, ownerId, 1)),
        { concurrency: "unbounded" }
      )
      for (let shardId = 0; shardId < shardCount; shardId++) {
        const won = again.slice(shardId * contenders.length, (shardId + 1) * contenders.length).filter(Option.isSome)
        expect(won.map((lease) => lease.value.version)).toStrictEqual([2])
      }
      expect((yield* ownership.shards).map((r) => r.version)).toStrictEqual(Array.from({ length: shardCount }, () => 2))
    }))
  })

  describe("release", () => {
    test("release of the current lease clears the owner and keeps the version", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 2)
      const lease = Option.getOrThrow(yield* ownership.claim({ namespace: NS, shardId: 1 }, "a", 0))
      yield* ownership.release(lease)
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0), row(NS, 1, 1)])
      // Releasing again changes nothing.
      yield* ownership.release(lease)
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0), row(NS, 1, 1)])
    }))

    test("after a release, a claim at the version seen succeeds", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 1)
      const shard = { namespace: NS, shardId: 0 }
      const first = Option.getOrThrow(yield* ownership.claim(shard, "a", 0))
      yield* ownership.release(first)
      const seen = Option.getOrThrow(yield* rowOf(shard))
      expect(seen).toStrictEqual(row(NS, 0, 1))
      expect(yield* ownership.claim(shard, "b", seen.version))
        .toStrictEqual(Option.some({ ...shard, version: 2, ownerId: "b" }))
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0, 2, "b")])
    }))

    test("release of a stale lease changes nothing", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.ensureShards(NS, 1)
      const shard = { namespace: NS, shardId: 0 }
      const first = Option.getOrThrow(yield* ownership.claim(shard, "a", 0))
      const second = Option.getOrThrow(yield* ownership.claim(shard, "b", first.version))
      yield* ownership.release(first)
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0, 2, "b")])
      // Even a stale lease of the same owner (an earlier claim of its own).
      const third = Option.getOrThrow(yield* ownership.claim(shard, "b", second.version))
      yield* ownership.release(second)
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0, 3, "b")])
      // And one of a shard since released: the row stays as the release left it.
      yield* ownership.release(third)
      yield* ownership.release(second)
      expect(yield* ownership.shards).toStrictEqual([row(NS, 0, 3)])
    }))

    test("release of a lease on a shard without a row changes nothing", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.release({ namespace: NS, shardId: 0, version: 0, ownerId: "a" })
      yield* ownership.release({ namespace: NS, shardId: 0, version: 1, ownerId: "a" })
      expect(yield* ownership.shards).toStrictEqual([])
    }))
  })

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

    test("a new claim by the same owner fences its earlier lease (a restart under the same id)", Effect.gen(function*() {
      const { ownership, store } = yield* services
      const timer = makeTimer("due", { executeAt: 100 })
      yield* store.upsertTimer(timer)
      yield* ownership.ensureShards(NS, 1)
      const shard = { namespace: NS, shardId: 0 }
      const before = Option.getOrThrow(yield* ownership.claim(shard, "same", 0))
      const after = Option.getOrThrow(yield* ownership.claim(shard, "same", before.version))
      const fired = { _tag: "Fired", attempts: 1, executedAt: 150 } as const
      const lostDue = yield* Effect.flip(store.dueTimers(before, 100, 10))
      expect(lostDue).toBeInstanceOf(ShardOwnershipLost)
      expect(lostDue).toMatchObject({ namespace: NS, shardId: 0, heldVersion: before.version })
      expect(yield* Effect.flip(store.recordFiring(before, timer, timer.firingId, fired, 150))).toBeInstanceOf(ShardOwnershipLost)
      expect((yield* store.getTimer(timer)).pipe(Option.map((t) => t.state))).toStrictEqual(Option.some("SCHEDULED"))
      expect(ids(yield* store.dueTimers(after, 100, 10))).toStrictEqual(["due"])
      expect(yield* store.recordFiring(after, timer, timer.firingId, fired, 150)).toBe(true)
    }))

    test("a lease released and claimed by another through the compare-and-set is fenced on the firing path", Effect.gen(function*() {
      const { ownership, store } = yield* services
      const timer = makeTimer("due", { executeAt: 100 })
      yield* store.upsertTimer(timer)
      yield* ownership.ensureShards(NS, 1)
      const shard = { namespace: NS, shardId: 0 }
      const old = Option.getOrThrow(yield* ownership.claim(shard, "a", 0))
      yield* ownership.release(old)
      const seen = Option.getOrThrow(yield* rowOf(shard))
      const current = Option.getOrThrow(yield* ownership.claim(seen, "b", seen.version))
      const fired = { _tag: "Fired", attempts: 1, executedAt: 150 } as const
      expect(yield* Effect.flip(store.dueTimers(old, 100, 10))).toBeInstanceOf(ShardOwnershipLost)
      expect(yield* Effect.flip(store.recordFiring(old, timer, timer.firingId, fired, 150))).toBeInstanceOf(ShardOwnershipLost)
      // The old owner's release after the takeover does not open the shard again.
      yield* ownership.release(old)
      expect(yield* Effect.flip(store.dueTimers(old, 100, 10))).toBeInstanceOf(ShardOwnershipLost)
      expect(yield* store.recordFiring(current, timer, timer.firingId, fired, 150)).toBe(true)
    }))
  })
}
