/**
 * The store contract, updateScheduled: a read-modify-write of a SCHEDULED
 * timer that loses no concurrent change and refuses a finished timer.
 */
import { describe, expect } from "@effect/vitest"
import { RetryPolicy, TimerNotFound, TimerNotPending, type TimerRecord } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, makeTimer, mustGet, NS, OTHER_NS, services, takeShard } from "./fixtures.js"

/** Registers the updateScheduled tests. */
export const updateScheduledContract = (test: ContractTest) => {
  describe("updateScheduled", () => {
    test("replaces the timer with f of the stored timer and returns it", Effect.gen(function*() {
      const { store } = yield* services
      const original = makeTimer("a", { payload: { n: 1 }, retryPolicy: new RetryPolicy({ maxAttempts: 2 }) })
      yield* store.upsertTimer(original)
      /** The f of this test: new times, a new arming and new values of the other fields. */
      const changed = (timer: TimerRecord): TimerRecord => ({
        ...timer,
        executeAt: 3_000,
        nextFireAt: 3_000,
        firingId: "firing-a-2",
        callbackUrl: "https://elsewhere.test/x",
        payload: { n: 2 },
        callbackTimeoutSeconds: 20,
        updatedAt: 2_000
      })
      const seen: Array<TimerRecord> = []
      const updated = yield* store.updateScheduled({ namespace: NS, id: "a" }, (timer) => {
        seen.push(timer)
        return changed(timer)
      })
      expect(seen).toStrictEqual([original])
      const expected = changed(original)
      expect(updated).toStrictEqual(expected)
      expect(yield* mustGet(original)).toStrictEqual(expected)
    }))

    test("can remove optional fields", Effect.gen(function*() {
      const { store } = yield* services
      const original = makeTimer("a", {
        payload: "x",
        retryPolicy: new RetryPolicy({ maxAttempts: 2 }),
        firstAttemptAt: 900,
        lastError: "e",
        attempts: 1
      })
      yield* store.upsertTimer(original)
      yield* store.updateScheduled(original, (timer) => {
        const { firstAttemptAt: _f, lastError: _l, payload: _p, retryPolicy: _r, ...rest } = timer
        return { ...rest, attempts: 0 }
      })
      const { firstAttemptAt: _f, lastError: _l, payload: _p, retryPolicy: _r, ...expected } = original
      expect(yield* mustGet(original)).toStrictEqual({ ...expected, attempts: 0 })
    }))

    test("concurrent updates do not lose each other's changes", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("counter", { payload: { n: 0 } }))
      const increment = store.updateScheduled({ namespace: NS, id: "counter" }, (timer) => ({
        ...timer,
        payload: { n: (timer.payload as { n: number }).n + 1 }
      }))
      yield* Effect.all(Array.from({ length: 20 }, () => increment), { concurrency: "unbounded", discard: true })
      expect((yield* mustGet({ namespace: NS, id: "counter" })).payload).toStrictEqual({ n: 20 })
    }))

    test("fails with TimerNotFound when the timer does not exist", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("a"))
      let called = false
      const error = yield* Effect.flip(store.updateScheduled({ namespace: OTHER_NS, id: "a" }, (timer) => {
        called = true
        return timer
      }))
      expect(error).toBeInstanceOf(TimerNotFound)
      expect(error).toMatchObject({ _tag: "TimerNotFound", namespace: OTHER_NS, timerId: "a" })
      expect(called).toBe(false)
      expect(yield* store.getTimer({ namespace: OTHER_NS, id: "a" })).toStrictEqual(Option.none())
    }))

    for (const [state, update] of [
      ["FIRED", { _tag: "Fired", attempts: 1, executedAt: 1_200 }],
      ["FAILED", { _tag: "Failed", attempts: 1, lastError: "gone" }]
    ] as const) {
      test(`fails with TimerNotPending when the timer is ${state}, changing nothing`, Effect.gen(function*() {
        const { ownership, store } = yield* services
        const timer = makeTimer("a")
        yield* store.upsertTimer(timer)
        const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
        expect(yield* store.recordFiring(lease, timer, timer.firingId, update, 1_300)).toBe(true)
        const before = yield* mustGet(timer)
        expect(before.state).toBe(state)
        let called = false
        const error = yield* Effect.flip(store.updateScheduled(timer, (t) => {
          called = true
          return { ...t, state: "SCHEDULED", executeAt: 9_000, nextFireAt: 9_000 }
        }))
        expect(error).toBeInstanceOf(TimerNotPending)
        expect(error).toMatchObject({ _tag: "TimerNotPending", namespace: NS, timerId: "a", state })
        expect(called).toBe(false)
        expect(yield* mustGet(timer)).toStrictEqual(before)
      }))
    }
  })
}
