/**
 * The store contract, ShardOwnership's instances: heartbeat, liveInstances and
 * deregister.
 */
import { describe, expect } from "@effect/vitest"
import type { InstanceInfo } from "@timer/core"
import { Effect } from "effect"
import { type ContractTest, services } from "./fixtures.js"

/** An instance; timestamps past 2^32 so that they are stored as 64-bit integers. */
const instance = (id: string, overrides: Partial<InstanceInfo> = {}): InstanceInfo => ({
  id,
  host: `host-of-${id}`,
  pid: 40_000 + id.length,
  startedAt: 1_700_000_000_000,
  expiresAt: 1_700_000_060_000,
  ...overrides
})

/** Registers the instance tests. */
export const instancesContract = (test: ContractTest) => {
  describe("instances", () => {
    test("no instance is live in a new store", Effect.gen(function*() {
      const { ownership } = yield* services
      expect(yield* ownership.liveInstances(0)).toStrictEqual([])
    }))

    test("heartbeat registers instances; liveInstances lists them by id with every field as given", Effect.gen(function*() {
      const { ownership } = yield* services
      const charlie = instance("charlie", { host: "h3", pid: 3, startedAt: 1_700_000_000_003, expiresAt: 1_700_000_090_000 })
      const alpha = instance("alpha", { host: "h1.example.org", pid: 2_147_483_647, startedAt: 5, expiresAt: 1_700_000_050_000 })
      const bravo = instance("bravo", { host: "h2", pid: 1, startedAt: 1_699_999_999_999, expiresAt: 1_700_000_070_000 })
      // Registered out of order.
      for (const info of [charlie, alpha, bravo]) yield* ownership.heartbeat(info)
      expect(yield* ownership.liveInstances(1_700_000_000_000)).toStrictEqual([alpha, bravo, charlie])
    }))

    test("liveInstances(now) lists only the instances with expiresAt > now", Effect.gen(function*() {
      const { ownership } = yield* services
      const early = instance("early", { expiresAt: 1_000 })
      const late = instance("late", { expiresAt: 2_000 })
      yield* ownership.heartbeat(early)
      yield* ownership.heartbeat(late)
      expect(yield* ownership.liveInstances(0)).toStrictEqual([early, late])
      expect(yield* ownership.liveInstances(999)).toStrictEqual([early, late])
      // Expired at expiresAt itself.
      expect(yield* ownership.liveInstances(1_000)).toStrictEqual([late])
      expect(yield* ownership.liveInstances(1_999)).toStrictEqual([late])
      expect(yield* ownership.liveInstances(2_000)).toStrictEqual([])
      // Reading does not remove: an expired instance is listed again at an earlier `now`.
      expect(yield* ownership.liveInstances(500)).toStrictEqual([early, late])
    }))

    test("a heartbeat renews the instance: the last expiresAt counts, and there is still one entry", Effect.gen(function*() {
      const { ownership } = yield* services
      const first = instance("a", { expiresAt: 1_000 })
      yield* ownership.heartbeat(first)
      expect(yield* ownership.liveInstances(1_500)).toStrictEqual([])
      // Renewed after it had expired: live again.
      yield* ownership.heartbeat({ ...first, expiresAt: 2_000 })
      expect(yield* ownership.liveInstances(1_500)).toStrictEqual([{ ...first, expiresAt: 2_000 }])
      yield* ownership.heartbeat({ ...first, expiresAt: 3_000 })
      expect(yield* ownership.liveInstances(2_500)).toStrictEqual([{ ...first, expiresAt: 3_000 }])
      expect(yield* ownership.liveInstances(0)).toStrictEqual([{ ...first, expiresAt: 3_000 }])
      // The last heartbeat decides, even an earlier expiry.
      yield* ownership.heartbeat({ ...first, expiresAt: 1_200 })
      expect(yield* ownership.liveInstances(1_500)).toStrictEqual([])
    }))

    test("a heartbeat under a registered id (a restart) records the new host, pid and startedAt", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.heartbeat(instance("a", { host: "old-host", pid: 111, startedAt: 1_000, expiresAt: 5_000 }))
      const restarted = instance("a", { host: "new-host", pid: 222, startedAt: 2_000, expiresAt: 6_000 })
      yield* ownership.heartbeat(restarted)
      expect(yield* ownership.liveInstances(2_000)).toStrictEqual([restarted])
    }))

    test("deregister removes the instance at once, leaving the others", Effect.gen(function*() {
      const { ownership } = yield* services
      const a = instance("a")
      const b = instance("b")
      yield* ownership.heartbeat(a)
      yield* ownership.heartbeat(b)
      yield* ownership.deregister("a")
      // Gone although its registration had not expired.
      expect(yield* ownership.liveInstances(0)).toStrictEqual([b])
      // A heartbeat registers it again.
      yield* ownership.heartbeat(a)
      expect(yield* ownership.liveInstances(0)).toStrictEqual([a, b])
    }))

    test("deregister of an unknown or already removed id succeeds and changes nothing", Effect.gen(function*() {
      const { ownership } = yield* services
      yield* ownership.deregister("never-registered")
      const b = instance("b")
      yield* ownership.heartbeat(b)
      yield* ownership.deregister("never-registered")
      yield* ownership.deregister("b-")
      expect(yield* ownership.liveInstances(0)).toStrictEqual([b])
      yield* ownership.deregister("b")
      yield* ownership.deregister("b")
      expect(yield* ownership.liveInstances(0)).toStrictEqual([])
    }))
  })
}
