/**
 * Several engines on one store, on the TestClock: the seeds' race of a stale
 * owner with the new one (its writes are fenced, nothing of the new owner's is
 * marked, deleted or skipped), and an exclusive store refusing a second
 * instance while the first is alive.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Option } from "effect"
import { hostname } from "node:os"
import { idInShard, SECOND, T0 } from "./support/engineHarness.js"
import {
  ALL_SHARDS,
  checkOwnership,
  deliveriesOf,
  NUM_SHARDS,
  openSharedStore,
  settleAll,
  spread,
  startInstance,
  stepTo
} from "./support/instancesHarness.js"

describe("a stale owner racing the new one", () => {
  for (const bTimerFirst of [true, false]) {
    const variant = bTimerFirst
      ? "b's timer made before a resumes: a learns it on its next read"
      : "b's timer made after a resumed: a learns it from its writes"
    it.scoped(`an owner that loaded due timers before its shard was claimed writes nothing; the new owner fires them and its own (${variant})`, () =>
      Effect.gen(function*() {
        const shared = yield* openSharedStore
        const a = yield* startInstance(shared, "a")
        yield* stepTo(T0 + 100, 100)
        const b = yield* startInstance(shared, "b")
        const instances = [a, b]
        // b's first round took nothing: a is alive and holds every shard; a gives half up at its next round (T0 + 500).
        expect(yield* spread(instances)).toEqual({ a: 16, b: 0 })

        const shard = { namespace: "default", shardId: 3 }
        const loadedIds = [idInShard("race-a1", shard.shardId, NUM_SHARDS), idInShard("race-a2", shard.shardId, NUM_SHARDS)]
          .sort()
        for (const id of loadedIds) yield* a.create(id, T0 + 200)
        const pause = a.pauseAfterNextDueTimers(shard)
        yield* stepTo(T0 + 200, 100)
        // a's fiber of the shard has loaded both timers and is held before delivering them.
        const loaded = yield* Deferred.poll(pause.reached)
        expect(Option.isSome(loaded)).toBe(true)
        const loadedTimers = yield* Option.getOrThrow(loaded)
        expect(loadedTimers.map((timer) => timer.id).sort()).toEqual(loadedIds)
        expect(a.delivery.calls).toEqual([])

        // b claims the shard at the version it sees, and creates a timer due in the same window.
        const aLease = (yield* a.engine.ownedShards).find((lease) => lease.shardId === shard.shardId)!
        const seen = (yield* shared.shardRows)[shard.shardId]!
        expect(seen).toMatchObject({ ownerId: "a", version: aLease.version })
        const claimed = yield* b.ownership.claim(shard, "b", seen.version)
        expect(Option.getOrThrow(claimed)).toMatchObject({ ownerId: "b", version: aLease.version + 1 })
        const bId = idInShard("race-b", shard.shardId, NUM_SHARDS)
        const createB = b.create(bId, T0 + 200)
        const bTimerBefore = bTimerFirst ? yield* createB : undefined

        // a goes on: it delivers what it had loaded (at least once), but no write of it goes through
        // and it lets the shard go; b's timer is untouched, a's stay due.
        yield* Deferred.succeed(pause.release, undefined)
        yield* settleAll
        const bTimer = bTimerBefore ?? (yield* createB)
        expect(a.delivery.calls.map((call) => call.timerId).sort()).toEqual(loadedIds)
        expect(a.firings.map((firing) => firing.key.id).sort()).toEqual(loadedIds)
        expect(a.firings.filter((firing) => Exit.isSuccess(firing.exit))).toEqual([])
        // a's fiber learned from the store that the shard is no longer its own and stopped at once: when it
        // next read its due timers (woken by b's timer), or when it wrote an outcome.
        const refusalsOf = (exits: ReadonlyArray<Exit.Exit<unknown, unknown>>) =>
          exits.flatMap((exit) => Exit.isFailure(exit) ? Option.toArray(Cause.failureOption(exit.cause)) : [])
        const readRefusals = refusalsOf(a.dueCalls.filter((call) => call.lease.shardId === shard.shardId).map((call) => call.exit))
        const writeRefusals = refusalsOf(a.firings.map((firing) => firing.exit))
        expect((bTimerFirst ? readRefusals : writeRefusals).length).toBeGreaterThan(0)
        for (const refusal of [...readRefusals, ...writeRefusals]) {
          expect(refusal).toMatchObject({ _tag: "ShardOwnershipLost", shardId: shard.shardId, heldVersion: aLease.version })
        }
        for (const timer of loadedTimers) {
          expect(yield* shared.store.getTimer(timer)).toEqual(Option.some(timer))
        }
        expect(yield* shared.store.getTimer(bTimer)).toEqual(Option.some(bTimer))
        expect(yield* a.held).not.toContain(shard.shardId)

        // b takes the shard up at its next round (T0 + 600) and fires all three, each once.
        yield* stepTo(T0 + 600, 100)
        expect(yield* b.held).toContain(shard.shardId)
        yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, instances)))
        expect(yield* spread(instances)).toEqual({ a: 8, b: 8 })
        expect(deliveriesOf(instances, bId)).toEqual([{ by: "b", at: T0 + 600 }])
        for (const id of loadedIds) {
          expect(deliveriesOf(instances, id)).toEqual([{ by: "a", at: T0 + 200 }, { by: "b", at: T0 + 600 }])
        }
        for (const id of [...loadedIds, bId]) {
          expect(yield* shared.store.getTimer({ namespace: "default", id })).toMatchObject({
            value: { state: "FIRED", attempts: 1, executedAt: T0 + 600 }
          })
        }
        expect(b.firings.map((firing) => [firing.key.id, firing.exit._tag]).sort()).toEqual(
          [...loadedIds, bId].sort().map((id) => [id, "Success"])
        )
      }))
  }
})

describe("exclusive", () => {
  it.scoped("a second exclusive instance refuses to start with InstanceConflict while another is alive; once that one is gone it starts", () =>
    Effect.gen(function*() {
      const shared = yield* openSharedStore
      const a = yield* startInstance(shared, "a", { config: { exclusive: true } })
      yield* stepTo(T0 + SECOND, 100)
      const refused = yield* Effect.flip(startInstance(shared, "b", { config: { exclusive: true } }))
      expect(refused).toMatchObject({ _tag: "InstanceConflict", otherId: "a", otherHost: hostname(), otherPid: process.pid })
      // b left nothing behind: not registered, no shard claimed; a goes on holding them all.
      expect((yield* shared.instanceRows).map((row) => row.id)).toEqual(["a"])
      yield* stepTo(T0 + 2 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, [a])))
      expect(yield* a.held).toEqual(ALL_SHARDS)
      expect((yield* shared.shardRows).every((row) => row.ownerId === "a" && row.version === 1)).toBe(true)

      yield* a.shutdown
      const b = yield* startInstance(shared, "b", { config: { exclusive: true } })
      expect(yield* b.held).toEqual(ALL_SHARDS)
      expect((yield* shared.instanceRows).map((row) => row.id)).toEqual(["b"])
      yield* b.create("after-a", T0 + 2500)
      yield* stepTo(T0 + 3 * SECOND, 100, () => Effect.asVoid(checkOwnership(shared, [a, b])))
      expect(deliveriesOf([a, b], "after-a")).toEqual([{ by: "b", at: T0 + 2500 }])
    }))
})
