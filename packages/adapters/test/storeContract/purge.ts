/**
 * The store contract, purgeFinished: deleting old FIRED and FAILED timers in batches.
 */
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { type ContractTest, ids, listAll, makeTimer, NS, OTHER_NS, services } from "./fixtures.js"

/** Registers the purgeFinished tests. */
export const purgeContract = (test: ContractTest) => {
  describe("purgeFinished", () => {
    test("deletes only FIRED and FAILED timers updated before `before`, and returns how many", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("fired-old", { state: "FIRED", attempts: 1, updatedAt: 100 }))
      yield* store.upsertTimer(makeTimer("failed-old", { state: "FAILED", attempts: 1, updatedAt: 200 }))
      yield* store.upsertTimer(makeTimer("other-ns-old", { namespace: OTHER_NS, state: "FIRED", attempts: 1, updatedAt: 100 }))
      yield* store.upsertTimer(makeTimer("fired-at-cutoff", { state: "FIRED", attempts: 1, updatedAt: 1_000 }))
      yield* store.upsertTimer(makeTimer("failed-new", { state: "FAILED", attempts: 1, updatedAt: 5_000 }))
      yield* store.upsertTimer(makeTimer("scheduled-old", { updatedAt: 1 }))
      yield* store.upsertTimer(makeTimer("retrying-old", { attempts: 2, lastError: "x", updatedAt: 1 }))
      expect(yield* store.purgeFinished(1_000, 100)).toBe(3)
      expect(ids(yield* listAll({ namespace: NS })).sort())
        .toStrictEqual(["failed-new", "fired-at-cutoff", "retrying-old", "scheduled-old"])
      expect(yield* listAll({ namespace: OTHER_NS })).toStrictEqual([])
      expect(yield* store.purgeFinished(1_000, 100)).toBe(0)
      expect(yield* store.purgeFinished(1_001, 100)).toBe(1)
      expect(yield* store.purgeFinished(Number.MAX_SAFE_INTEGER, 100)).toBe(1)
      expect(ids(yield* listAll({ namespace: NS })).sort()).toStrictEqual(["retrying-old", "scheduled-old"])
    }))

    test("deletes at most `limit` timers per call", Effect.gen(function*() {
      const { store } = yield* services
      for (const n of [1, 2, 3, 4, 5]) {
        yield* store.upsertTimer(makeTimer(`done-${n}`, { state: n % 2 === 0 ? "FAILED" : "FIRED", attempts: 1, updatedAt: n }))
      }
      yield* store.upsertTimer(makeTimer("pending", { updatedAt: 0 }))
      expect(yield* store.purgeFinished(1_000, 2)).toBe(2)
      expect((yield* listAll({ namespace: NS })).length).toBe(4)
      expect(yield* store.purgeFinished(1_000, 2)).toBe(2)
      expect(yield* store.purgeFinished(1_000, 2)).toBe(1)
      expect(yield* store.purgeFinished(1_000, 2)).toBe(0)
      expect(ids(yield* listAll({ namespace: NS }))).toStrictEqual(["pending"])
    }))
  })
}
