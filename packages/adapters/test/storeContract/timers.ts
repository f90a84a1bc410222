/**
 * The store contract, single timers: upsertTimer, round trips of every field
 * and payload, getTimer and deleteTimer.
 */
import { describe, expect } from "@effect/vitest"
import { type FiringUpdate, RetryPolicy, type TimerRecord } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, ids, listAll, makeTimer, mustGet, NS, OTHER_NS, services, takeShard } from "./fixtures.js"

/** Registers the tests of storing, reading and deleting one timer. */
export const timersContract = (test: ContractTest) => {
  describe("upsertTimer", () => {
    test("inserts a timer and returns it as stored", Effect.gen(function*() {
      const { store } = yield* services
      const timer = makeTimer("a", { payload: { x: 1 } })
      expect(yield* store.upsertTimer(timer)).toStrictEqual(timer)
      expect(yield* store.getTimer({ namespace: NS, id: "a" })).toStrictEqual(Option.some(timer))
    }))

    test("a NATS subject or a Kafka topic as the target, and the command that armed a timer, round-trip; a target replaces the other kind", Effect.gen(function*() {
      const { store } = yield* services
      const { callbackUrl: _u, ...base } = makeTimer("nats", { payload: { x: 1 } })
      const published: TimerRecord = {
        ...base,
        natsSubject: "orders.reminders",
        origin: { tenantId: "t1", serviceCallId: "sc1", commandId: "cmd-1", correlationId: "corr-1" }
      }
      expect(yield* store.upsertTimer(published)).toStrictEqual(published)
      expect(yield* mustGet(published)).toStrictEqual(published)
      const { natsSubject: _s, origin: _o, ...rest } = published
      const webhook: TimerRecord = { ...rest, callbackUrl: "http://127.0.0.1:9/other", firingId: "firing-nats-2" }
      expect(yield* store.updateScheduled(published, () => webhook)).toStrictEqual(webhook)
      expect(yield* mustGet(published)).toStrictEqual(webhook)
      const back: TimerRecord = { ...rest, natsSubject: "orders.later", firingId: "firing-nats-3" }
      yield* store.upsertTimer(back)
      expect(yield* mustGet(published)).toStrictEqual(back)
      const kafka: TimerRecord = { ...rest, kafkaTopic: "orders.reminders", firingId: "firing-nats-4" }
      yield* store.upsertTimer(kafka)
      expect(yield* mustGet(published)).toStrictEqual(kafka)
    }))

    test("replaces every field of an existing timer but keeps its createdAt", Effect.gen(function*() {
      const { ownership, store } = yield* services
      const original = makeTimer("a", {
        executeAt: 1_000,
        nextFireAt: 1_000,
        callbackUrl: "http://one.test/hook",
        payload: { version: 1 },
        retryPolicy: new RetryPolicy({ maxAttempts: 3, initialInterval: 2_000 }),
        callbackTimeoutSeconds: 5,
        createdAt: 100,
        updatedAt: 100
      })
      yield* store.upsertTimer(original)
      // Bring the stored timer far from a fresh one: retried, then FAILED.
      const lease = yield* takeShard(ownership, { namespace: NS, shardId: 0 }, "owner")
      const retry: FiringUpdate = {
        _tag: "RetryScheduled",
        attempts: 1,
        nextFireAt: 1_500,
        firstAttemptAt: 1_000,
        lastError: "boom"
      }
      expect(yield* store.recordFiring(lease, original, original.firingId, retry, 1_100)).toBe(true)
      const failed: FiringUpdate = { _tag: "Failed", attempts: 2, lastError: "boom again" }
      expect(yield* store.recordFiring(lease, original, original.firingId, failed, 1_600)).toBe(true)
      expect((yield* mustGet(original)).state).toBe("FAILED")

      const replacement: TimerRecord = {
        namespace: NS,
        id: "a",
        shardId: 0,
        executeAt: 5_000,
        nextFireAt: 5_000,
        callbackUrl: "https://two.test/other",
        payload: ["v", 2],
        callbackTimeoutSeconds: 30,
        state: "SCHEDULED",
        attempts: 0,
        firingId: "firing-a-2",
        createdAt: 4_000,
        updatedAt: 4_000
      }
      const expected = { ...replacement, createdAt: 100 }
      expect(yield* store.upsertTimer(replacement)).toStrictEqual(expected)
      expect(yield* mustGet(replacement)).toStrictEqual(expected)
    }))

    test("replacing a SCHEDULED timer clears the fields of its earlier firings", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("a", {
        attempts: 3,
        nextFireAt: 7_000,
        firstAttemptAt: 1_000,
        lastError: "timeout",
        executedAt: 500,
        payload: null
      }))
      const replacement = makeTimer("a", { executeAt: 9_000, firingId: "firing-a-2", createdAt: 8_000, updatedAt: 8_000 })
      yield* store.upsertTimer(replacement)
      expect(yield* mustGet(replacement)).toStrictEqual({ ...replacement, createdAt: 100 })
    }))

    test("one id never yields two timers, whatever its executeAt", Effect.gen(function*() {
      const { store } = yield* services
      for (const [n, executeAt] of [1_000, 50_000, 10, 50_000].entries()) {
        yield* store.upsertTimer(makeTimer("only", { executeAt, nextFireAt: executeAt, firingId: `f${n}` }))
      }
      const all = yield* listAll({ namespace: NS })
      expect(ids(all)).toStrictEqual(["only"])
      expect(all[0]).toMatchObject({ executeAt: 50_000, nextFireAt: 50_000, firingId: "f3" })
    }))

    test("the same id in two namespaces is two timers", Effect.gen(function*() {
      const { store } = yield* services
      const mine = makeTimer("same", { payload: "mine" })
      const theirs = makeTimer("same", { namespace: OTHER_NS, payload: "theirs", executeAt: 2_000 })
      yield* store.upsertTimer(mine)
      yield* store.upsertTimer(theirs)
      expect(yield* mustGet({ namespace: NS, id: "same" })).toStrictEqual(mine)
      expect(yield* mustGet({ namespace: OTHER_NS, id: "same" })).toStrictEqual(theirs)
      expect(ids(yield* listAll({ namespace: NS }))).toStrictEqual(["same"])
      expect(ids(yield* listAll({ namespace: OTHER_NS }))).toStrictEqual(["same"])
      expect(yield* store.deleteTimer({ namespace: NS, id: "same" })).toBe(true)
      expect(yield* mustGet({ namespace: OTHER_NS, id: "same" })).toStrictEqual(theirs)
    }))
  })

  describe("round trips", () => {
    const payloads: ReadonlyArray<readonly [string, unknown]> = [
      ["an object", { a: 1, nested: { b: [true, false, null], c: "x" }, empty: {}, list: [] }],
      ["an array", [1, "two", { three: 3 }, [4], null]],
      ["a string", "hello"],
      ["an empty string", ""],
      ["a string that looks like JSON", "{\"a\":1}"],
      ["an integer", 42],
      ["zero", 0],
      ["a negative float", -12.5],
      ["a large integer", Number.MAX_SAFE_INTEGER],
      ["true", true],
      ["false", false],
      ["JSON null", null],
      ["unicode text", { text: "héllo wörld — ñ, 日本語, Ελληνικά, עברית, emoji 🎉👩‍💻", "clé ✓": "ü" }],
      ["escapes", "quote \" backslash \\ newline \n tab \t"]
    ]
    for (const [label, payload] of payloads) {
      test(`payload: ${label}`, Effect.gen(function*() {
        const { store } = yield* services
        const timer = makeTimer("p", { payload })
        expect(yield* store.upsertTimer(timer)).toStrictEqual(timer)
        const stored = yield* mustGet(timer)
        expect("payload" in stored).toBe(true)
        expect(stored.payload).toStrictEqual(payload)
        expect(stored).toStrictEqual(timer)
      }))
    }

    test("an absent payload stays absent, unlike JSON null", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("absent"))
      yield* store.upsertTimer(makeTimer("null", { payload: null }))
      const absent = yield* mustGet({ namespace: NS, id: "absent" })
      const nulled = yield* mustGet({ namespace: NS, id: "null" })
      expect("payload" in absent).toBe(false)
      expect("payload" in nulled).toBe(true)
      expect(nulled.payload).toBeNull()
    }))

    test("unicode timer ids", Effect.gen(function*() {
      const { store } = yield* services
      const timer = makeTimer("tïmer-日本-🎉")
      yield* store.upsertTimer(timer)
      expect(yield* mustGet({ namespace: NS, id: "tïmer-日本-🎉" })).toStrictEqual(timer)
      expect(Option.isNone(yield* store.getTimer({ namespace: NS, id: "timer-日本-🎉" }))).toBe(true)
    }))

    test("retry policy: a RetryPolicy with durations and every field", Effect.gen(function*() {
      const { store } = yield* services
      const retryPolicy = new RetryPolicy({
        maxAttempts: 7,
        maxAttemptsDuration: 2 * 3_600_000,
        initialInterval: 1_500,
        backoffMultiplier: 1.5,
        maxInterval: 90_000
      })
      yield* store.upsertTimer(makeTimer("r", { retryPolicy }))
      const stored = yield* mustGet({ namespace: NS, id: "r" })
      expect(stored.retryPolicy).toBeInstanceOf(RetryPolicy)
      expect({ ...stored.retryPolicy }).toStrictEqual({
        maxAttempts: 7,
        maxAttemptsDuration: 7_200_000,
        initialInterval: 1_500,
        backoffMultiplier: 1.5,
        maxInterval: 90_000
      })
    }))

    test("retry policy: partial, empty and absent", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("partial", { retryPolicy: new RetryPolicy({ initialInterval: 250 }) }))
      yield* store.upsertTimer(makeTimer("empty", { retryPolicy: new RetryPolicy({}) }))
      yield* store.upsertTimer(makeTimer("absent"))
      const partial = yield* mustGet({ namespace: NS, id: "partial" })
      expect(partial.retryPolicy).toBeInstanceOf(RetryPolicy)
      expect({ ...partial.retryPolicy }).toStrictEqual({ initialInterval: 250 })
      const empty = yield* mustGet({ namespace: NS, id: "empty" })
      expect(empty.retryPolicy).toBeInstanceOf(RetryPolicy)
      expect({ ...empty.retryPolicy }).toStrictEqual({})
      expect("retryPolicy" in (yield* mustGet({ namespace: NS, id: "absent" }))).toBe(false)
    }))

    test("every optional field and large timestamps", Effect.gen(function*() {
      const { store } = yield* services
      const far = 4_102_444_800_123 // 2100-01-01T00:00:00.123Z
      const timer = makeTimer("full", {
        shardId: 4095,
        executeAt: far,
        nextFireAt: far + 1,
        firstAttemptAt: far - 1,
        executedAt: far - 2,
        lastError: "HTTP 503: Service Unavailable ✗",
        attempts: 999,
        createdAt: far - 3,
        updatedAt: far - 4,
        callbackTimeoutSeconds: 60
      })
      yield* store.upsertTimer(timer)
      expect(yield* mustGet(timer)).toStrictEqual(timer)
    }))
  })

  describe("getTimer and deleteTimer", () => {
    test("getTimer is None when the timer does not exist", Effect.gen(function*() {
      const { store } = yield* services
      expect(yield* store.getTimer({ namespace: NS, id: "missing" })).toStrictEqual(Option.none())
      yield* store.upsertTimer(makeTimer("present"))
      expect(yield* store.getTimer({ namespace: OTHER_NS, id: "present" })).toStrictEqual(Option.none())
    }))

    test("deleteTimer is true when it deleted the timer, then false", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.upsertTimer(makeTimer("a"))
      yield* store.upsertTimer(makeTimer("b"))
      expect(yield* store.deleteTimer({ namespace: NS, id: "a" })).toBe(true)
      expect(yield* store.getTimer({ namespace: NS, id: "a" })).toStrictEqual(Option.none())
      expect(yield* store.deleteTimer({ namespace: NS, id: "a" })).toBe(false)
      expect(yield* store.deleteTimer({ namespace: OTHER_NS, id: "b" })).toBe(false)
      expect(ids(yield* listAll({ namespace: NS }))).toStrictEqual(["b"])
    }))
  })
}
