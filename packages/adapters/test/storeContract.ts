/**
 * The store contract: what every TimerStore and ShardOwnership adapter must do,
 * written against the ports only (no SQL). An adapter's test file calls
 * `storeContractSuite` with a factory of fresh, empty stores.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  applyFiringUpdate,
  Namespace,
  NamespaceExists,
  RetryPolicy,
  ShardOwnership,
  ShardOwnershipLost,
  TimerNotFound,
  TimerNotPending,
  TimerStore,
  type FiringUpdate,
  type ShardLease,
  type TimerKey,
  type TimerQuery,
  type TimerRecord
} from "@timer/core"
import { Effect, Option, type Layer, type Scope } from "effect"

const NS = "contract"
const OTHER_NS = "contract-other"

/** A SCHEDULED timer in namespace NS, shard 0; `overrides` win. */
export const makeTimer = (id: string, overrides: Partial<TimerRecord> = {}): TimerRecord => {
  const executeAt = overrides.executeAt ?? 1_000
  return {
    namespace: NS,
    id,
    shardId: 0,
    executeAt,
    nextFireAt: executeAt,
    callbackUrl: "http://127.0.0.1:9/hook",
    callbackTimeoutSeconds: 10,
    state: "SCHEDULED",
    attempts: 0,
    firingId: `firing-${id}-1`,
    createdAt: 100,
    updatedAt: 100,
    ...overrides
  }
}

const namespace = (name: string, numShards = 4, createdAt = 10) => new Namespace({ name, numShards, createdAt })

const services = Effect.all({ store: TimerStore, ownership: ShardOwnership })

/** Reads a timer that must exist. */
const mustGet = (key: TimerKey) =>
  Effect.flatMap(TimerStore, (store) => store.getTimer(key)).pipe(
    Effect.map((found) => Option.getOrThrowWith(found, () => new Error(`timer ${key.namespace}/${key.id} is missing`)))
  )

/** Every timer of a namespace, in list order. */
const listAll = (query: Omit<TimerQuery, "limit" | "after">) =>
  Effect.flatMap(TimerStore, (store) => store.listTimers({ ...query, limit: 1_000 })).pipe(
    Effect.map((page) => page.timers)
  )

const ids = (timers: ReadonlyArray<TimerRecord>) => timers.map((t) => t.id)

/**
 * Registers the contract tests. `makeLayer` must return a layer that builds a
 * new, empty store each time it is built (every test builds its own), e.g. a
 * fresh SQLite file or a fresh PostgreSQL schema.
 */
export const storeContractSuite = (
  name: string,
  makeLayer: () => Layer.Layer<TimerStore | ShardOwnership, unknown>
) =>
  describe(`store contract: ${name}`, () => {
    const test = <A, E>(title: string, body: Effect.Effect<A, E, TimerStore | ShardOwnership | Scope.Scope>) =>
      it.scoped(title, () => Effect.provide(body, makeLayer()))

    describe("namespaces", () => {
      test("createNamespace stores a namespace that getNamespace reads back", Effect.gen(function*() {
        const { store } = yield* services
        expect(Option.isNone(yield* store.getNamespace("alpha"))).toBe(true)
        const created = yield* store.createNamespace(namespace("alpha", 8, 1234))
        expect(created).toStrictEqual(namespace("alpha", 8, 1234))
        expect(yield* store.getNamespace("alpha")).toStrictEqual(Option.some(namespace("alpha", 8, 1234)))
        expect(Option.isNone(yield* store.getNamespace("beta"))).toBe(true)
      }))

      test("listNamespaces returns every namespace ordered by name", Effect.gen(function*() {
        const { store } = yield* services
        expect(yield* store.listNamespaces).toStrictEqual([])
        // Names whose order is the same under any collation.
        for (const name of ["zeta", "alpha2", "mid.x", "b", "alpha", "beta"]) yield* store.createNamespace(namespace(name))
        const names = (yield* store.listNamespaces).map((ns) => ns.name)
        expect(names).toStrictEqual(["alpha", "alpha2", "b", "beta", "mid.x", "zeta"])
        expect((yield* store.listNamespaces)[0]).toStrictEqual(namespace("alpha"))
      }))

      test("creating an existing namespace with the same numShards returns the stored one", Effect.gen(function*() {
        const { store } = yield* services
        yield* store.createNamespace(namespace("alpha", 16, 1000))
        const again = yield* store.createNamespace(namespace("alpha", 16, 9999))
        expect(again).toStrictEqual(namespace("alpha", 16, 1000))
        expect(yield* store.listNamespaces).toStrictEqual([namespace("alpha", 16, 1000)])
      }))

      test("creating an existing namespace with another numShards fails with NamespaceExists", Effect.gen(function*() {
        const { store } = yield* services
        yield* store.createNamespace(namespace("alpha", 16, 1000))
        const error = yield* Effect.flip(store.createNamespace(namespace("alpha", 4, 2000)))
        expect(error).toBeInstanceOf(NamespaceExists)
        expect(error).toMatchObject({ _tag: "NamespaceExists", namespace: "alpha", numShards: 16, requestedNumShards: 4 })
        expect(yield* store.getNamespace("alpha")).toStrictEqual(Option.some(namespace("alpha", 16, 1000)))
      }))
    })

    describe("upsertTimer", () => {
      test("inserts a timer and returns it as stored", Effect.gen(function*() {
        const { store } = yield* services
        const timer = makeTimer("a", { payload: { x: 1 } })
        expect(yield* store.upsertTimer(timer)).toStrictEqual(timer)
        expect(yield* store.getTimer({ namespace: NS, id: "a" })).toStrictEqual(Option.some(timer))
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
        const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
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

    describe("updateScheduled", () => {
      test("replaces the timer with f of the stored timer and returns it", Effect.gen(function*() {
        const { store } = yield* services
        const original = makeTimer("a", { payload: { n: 1 }, retryPolicy: new RetryPolicy({ maxAttempts: 2 }) })
        yield* store.upsertTimer(original)
        const seen: Array<TimerRecord> = []
        const updated = yield* store.updateScheduled({ namespace: NS, id: "a" }, (timer) => {
          seen.push(timer)
          return {
            ...timer,
            executeAt: 3_000,
            nextFireAt: 3_000,
            firingId: "firing-a-2",
            callbackUrl: "https://elsewhere.test/x",
            payload: { n: 2 },
            callbackTimeoutSeconds: 20,
            updatedAt: 2_000
          }
        })
        expect(seen).toStrictEqual([original])
        const expected = {
          ...original,
          executeAt: 3_000,
          nextFireAt: 3_000,
          firingId: "firing-a-2",
          callbackUrl: "https://elsewhere.test/x",
          payload: { n: 2 },
          callbackTimeoutSeconds: 20,
          updatedAt: 2_000
        }
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
          const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
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

    describe("listTimers", () => {
      // Ids deliberately not in execute order; ties on executeAt at 2_000 and 5_000.
      const fixture = [
        makeTimer("m", { executeAt: 2_000 }),
        makeTimer("c", { executeAt: 5_000 }),
        makeTimer("z", { executeAt: 1_000 }),
        makeTimer("a", { executeAt: 2_000, state: "FIRED", attempts: 1, executedAt: 2_001 }),
        makeTimer("k", { executeAt: 2_000 }),
        makeTimer("b", { executeAt: 5_000, state: "FAILED", attempts: 3, lastError: "no" }),
        makeTimer("y", { executeAt: 3_000, nextFireAt: 9_000 }),
        makeTimer("d", { executeAt: 5_000 })
      ]
      const seed = Effect.flatMap(TimerStore, (store) =>
        Effect.gen(function*() {
          for (const timer of fixture) yield* store.upsertTimer(timer)
          // Noise that must never show up in NS.
          yield* store.upsertTimer(makeTimer("a", { namespace: OTHER_NS, executeAt: 2_500 }))
          yield* store.upsertTimer(makeTimer("other", { namespace: OTHER_NS, executeAt: 1 }))
        }))

      test("lists a namespace ordered by executeAt, ties broken by id", Effect.gen(function*() {
        yield* seed
        const all = yield* listAll({ namespace: NS })
        expect(ids(all)).toStrictEqual(["z", "a", "k", "m", "y", "b", "c", "d"])
        expect(all).toStrictEqual(["z", "a", "k", "m", "y", "b", "c", "d"].map((id) => fixture.find((t) => t.id === id)))
        expect(ids(yield* listAll({ namespace: OTHER_NS }))).toStrictEqual(["other", "a"])
        expect(yield* listAll({ namespace: "empty" })).toStrictEqual([])
      }))

      test("filters by state", Effect.gen(function*() {
        yield* seed
        expect(ids(yield* listAll({ namespace: NS, state: "SCHEDULED" }))).toStrictEqual(["z", "k", "m", "y", "c", "d"])
        expect(ids(yield* listAll({ namespace: NS, state: "FIRED" }))).toStrictEqual(["a"])
        expect(ids(yield* listAll({ namespace: NS, state: "FAILED" }))).toStrictEqual(["b"])
      }))

      test("filters by executeAtFrom (inclusive) and executeAtTo (exclusive)", Effect.gen(function*() {
        yield* seed
        expect(ids(yield* listAll({ namespace: NS, executeAtFrom: 2_000 }))).toStrictEqual(["a", "k", "m", "y", "b", "c", "d"])
        expect(ids(yield* listAll({ namespace: NS, executeAtFrom: 2_001 }))).toStrictEqual(["y", "b", "c", "d"])
        expect(ids(yield* listAll({ namespace: NS, executeAtTo: 3_000 }))).toStrictEqual(["z", "a", "k", "m"])
        expect(ids(yield* listAll({ namespace: NS, executeAtTo: 3_001 }))).toStrictEqual(["z", "a", "k", "m", "y"])
        expect(ids(yield* listAll({ namespace: NS, executeAtFrom: 2_000, executeAtTo: 5_000 }))).toStrictEqual(["a", "k", "m", "y"])
        expect(ids(yield* listAll({ namespace: NS, executeAtFrom: 2_000, executeAtTo: 2_000 }))).toStrictEqual([])
        expect(ids(yield* listAll({ namespace: NS, state: "SCHEDULED", executeAtFrom: 2_000, executeAtTo: 5_001 })))
          .toStrictEqual(["k", "m", "y", "c", "d"])
      }))

      test("respects limit and returns the cursor of the last timer", Effect.gen(function*() {
        const { store } = yield* services
        yield* seed
        const page = yield* store.listTimers({ namespace: NS, limit: 3 })
        expect(ids(page.timers)).toStrictEqual(["z", "a", "k"])
        expect(page.next).toStrictEqual(Option.some({ executeAt: 2_000, id: "k" }))
        const one = yield* store.listTimers({ namespace: NS, limit: 1 })
        expect(ids(one.timers)).toStrictEqual(["z"])
        expect(one.next).toStrictEqual(Option.some({ executeAt: 1_000, id: "z" }))
      }))

      test("after starts strictly after the cursor, within ties on executeAt", Effect.gen(function*() {
        const { store } = yield* services
        yield* seed
        const page = yield* store.listTimers({ namespace: NS, after: { executeAt: 2_000, id: "a" }, limit: 2 })
        expect(ids(page.timers)).toStrictEqual(["k", "m"])
        expect(page.next).toStrictEqual(Option.some({ executeAt: 2_000, id: "m" }))
        const rest = yield* store.listTimers({ namespace: NS, after: { executeAt: 2_000, id: "m" }, limit: 10 })
        expect(ids(rest.timers)).toStrictEqual(["y", "b", "c", "d"])
        expect(rest.next).toStrictEqual(Option.none())
        // A cursor between ids of a tie, of a timer that does not exist.
        const between = yield* store.listTimers({ namespace: NS, after: { executeAt: 5_000, id: "bb" }, limit: 10 })
        expect(ids(between.timers)).toStrictEqual(["c", "d"])
      }))

      test("keyset pagination returns every timer exactly once over many pages with equal executeAt", Effect.gen(function*() {
        const { store } = yield* services
        // 37 timers over 5 distinct executeAt values, inserted in a scrambled order.
        const all = Array.from({ length: 37 }, (_, i) => {
          const id = `t${String((i * 17) % 37).padStart(2, "0")}`
          return makeTimer(id, { executeAt: 1_000 * (1 + ((i * 7) % 5)), state: i % 6 === 0 ? "FIRED" : "SCHEDULED" })
        })
        for (const timer of all) yield* store.upsertTimer(timer)
        const expected = [...all]
          .sort((x, y) => x.executeAt - y.executeAt || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0))
          .map((t) => t.id)

        const paginate = (query: Omit<TimerQuery, "after">) =>
          Effect.gen(function*() {
            const pages: Array<ReadonlyArray<string>> = []
            let after: TimerQuery["after"]
            for (let guard = 0; guard < 100; guard++) {
              const page = yield* store.listTimers({ ...query, after })
              expect(page.timers.length).toBeLessThanOrEqual(query.limit)
              pages.push(ids(page.timers))
              if (Option.isNone(page.next)) break
              expect(page.timers.length).toBe(query.limit)
              const last = page.timers[page.timers.length - 1]!
              expect(page.next.value).toStrictEqual({ executeAt: last.executeAt, id: last.id })
              after = page.next.value
            }
            return pages
          })

        for (const limit of [1, 4, 5, 36, 37, 38, 100]) {
          const pages = yield* paginate({ namespace: NS, limit })
          expect(pages.flat()).toStrictEqual(expected)
          expect(pages.length).toBe(Math.max(1, Math.ceil(expected.length / limit)))
        }
        const scheduled = all.filter((t) => t.state === "SCHEDULED")
        const expectedScheduled = expected.filter((id) => scheduled.some((t) => t.id === id))
        expect((yield* paginate({ namespace: NS, state: "SCHEDULED", limit: 3 })).flat()).toStrictEqual(expectedScheduled)
      }))

      test("next is None on a last page that is exactly full", Effect.gen(function*() {
        const { store } = yield* services
        for (const id of ["a", "b", "c", "d"]) yield* store.upsertTimer(makeTimer(id, { executeAt: 1_000 }))
        const first = yield* store.listTimers({ namespace: NS, limit: 2 })
        expect(ids(first.timers)).toStrictEqual(["a", "b"])
        expect(first.next).toStrictEqual(Option.some({ executeAt: 1_000, id: "b" }))
        const second = yield* store.listTimers({ namespace: NS, after: { executeAt: 1_000, id: "b" }, limit: 2 })
        expect(ids(second.timers)).toStrictEqual(["c", "d"])
        expect(second.next).toStrictEqual(Option.none())
        const whole = yield* store.listTimers({ namespace: NS, limit: 4 })
        expect(whole.next).toStrictEqual(Option.none())
      }))
    })

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
        const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
        const due = yield* store.dueTimers(lease, 300, 100)
        expect(ids(due)).toStrictEqual(["due-100", "due-200", "retry-250", "due-300"])
        expect(due[2]).toStrictEqual(makeTimer("retry-250", { executeAt: 5_000, nextFireAt: 250, attempts: 1, firstAttemptAt: 50 }))
        expect(ids(yield* store.dueTimers(lease, 299, 100))).toStrictEqual(["due-100", "due-200", "retry-250"])
        expect(ids(yield* store.dueTimers(lease, 99, 100))).toStrictEqual([])
        expect(ids(yield* store.dueTimers(lease, 1_000_000, 100)))
          .toStrictEqual(["due-100", "due-200", "retry-250", "due-300", "later", "retry-later"])
      }))

      test("respects limit", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* seedShards
        const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
        expect(ids(yield* store.dueTimers(lease, 300, 2))).toStrictEqual(["due-100", "due-200"])
        expect(ids(yield* store.dueTimers(lease, 300, 1))).toStrictEqual(["due-100"])
      }))

      test("leaves out the ids given as in flight, and the limit counts only the others", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* seedShards
        const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
        expect(ids(yield* store.dueTimers(lease, 300, 100, ["due-100", "retry-250"]))).toStrictEqual(["due-200", "due-300"])
        expect(ids(yield* store.dueTimers(lease, 300, 1, ["due-100"]))).toStrictEqual(["due-200"])
        expect(ids(yield* store.dueTimers(lease, 300, 100, ["not-a-timer"]))).toStrictEqual(["due-100", "due-200", "retry-250", "due-300"])
      }))

      test("excludes other shards and other namespaces", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* seedShards
        const shard1 = yield* ownership.claim({ namespace: NS, shardId: 1 }, "owner")
        expect(ids(yield* store.dueTimers(shard1, 1_000_000, 100))).toStrictEqual(["shard-1"])
        const other = yield* ownership.claim({ namespace: OTHER_NS, shardId: 0 }, "owner")
        expect(ids(yield* store.dueTimers(other, 1_000_000, 100))).toStrictEqual(["other-ns"])
        const empty = yield* ownership.claim({ namespace: NS, shardId: 2 }, "owner")
        expect(yield* store.dueTimers(empty, 1_000_000, 100)).toStrictEqual([])
      }))

      test("fails with ShardOwnershipLost when the lease is stale", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* seedShards
        const first = yield* ownership.claim({ namespace: NS, shardId: 0 }, "first")
        const second = yield* ownership.claim({ namespace: NS, shardId: 0 }, "second")
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

    describe("nextFireAfter", () => {
      test("is the least nextFireAt strictly after `after` among the shard's SCHEDULED timers", Effect.gen(function*() {
        const { store } = yield* services
        yield* store.upsertTimer(makeTimer("t300", { executeAt: 300 }))
        yield* store.upsertTimer(makeTimer("t100", { executeAt: 100 }))
        yield* store.upsertTimer(makeTimer("t200", { executeAt: 10, nextFireAt: 200, attempts: 1 }))
        yield* store.upsertTimer(makeTimer("fired", { executeAt: 150, state: "FIRED", attempts: 1 }))
        yield* store.upsertTimer(makeTimer("failed", { executeAt: 160, state: "FAILED", attempts: 1 }))
        yield* store.upsertTimer(makeTimer("shard-1", { executeAt: 120, shardId: 1 }))
        yield* store.upsertTimer(makeTimer("other-ns", { executeAt: 110, namespace: OTHER_NS }))
        const shard = { namespace: NS, shardId: 0 }
        expect(yield* store.nextFireAfter(shard, 0)).toStrictEqual(Option.some(100))
        expect(yield* store.nextFireAfter(shard, 99)).toStrictEqual(Option.some(100))
        expect(yield* store.nextFireAfter(shard, 100)).toStrictEqual(Option.some(200))
        expect(yield* store.nextFireAfter(shard, 250)).toStrictEqual(Option.some(300))
        expect(yield* store.nextFireAfter(shard, 300)).toStrictEqual(Option.none())
        expect(yield* store.nextFireAfter({ namespace: NS, shardId: 1 }, 0)).toStrictEqual(Option.some(120))
        expect(yield* store.nextFireAfter({ namespace: NS, shardId: 1 }, 120)).toStrictEqual(Option.none())
        expect(yield* store.nextFireAfter({ namespace: OTHER_NS, shardId: 0 }, 0)).toStrictEqual(Option.some(110))
        expect(yield* store.nextFireAfter({ namespace: NS, shardId: 3 }, 0)).toStrictEqual(Option.none())
      }))

      test("is None for an empty store", Effect.gen(function*() {
        const { store } = yield* services
        expect(yield* store.nextFireAfter({ namespace: NS, shardId: 0 }, -1)).toStrictEqual(Option.none())
      }))
    })

    describe("shard ownership", () => {
      test("claim increments the version each time and records the owner", Effect.gen(function*() {
        const { ownership } = yield* services
        const shard = { namespace: NS, shardId: 0 }
        expect(yield* ownership.claim(shard, "a")).toStrictEqual({ namespace: NS, shardId: 0, version: 1, ownerId: "a" })
        expect(yield* ownership.claim(shard, "b")).toStrictEqual({ namespace: NS, shardId: 0, version: 2, ownerId: "b" })
        expect(yield* ownership.claim(shard, "b")).toStrictEqual({ namespace: NS, shardId: 0, version: 3, ownerId: "b" })
        // Versions are per shard and per namespace.
        expect((yield* ownership.claim({ namespace: NS, shardId: 1 }, "a")).version).toBe(1)
        expect((yield* ownership.claim({ namespace: OTHER_NS, shardId: 0 }, "a")).version).toBe(1)
        expect((yield* ownership.claim(shard, "c")).version).toBe(4)
      }))

      test("release then claim gives a new, working lease", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* store.upsertTimer(makeTimer("due", { executeAt: 100 }))
        const shard = { namespace: NS, shardId: 0 }
        const first = yield* ownership.claim(shard, "a")
        yield* ownership.release(first)
        const second = yield* ownership.claim(shard, "b")
        expect(second).toStrictEqual({ namespace: NS, shardId: 0, version: first.version + 1, ownerId: "b" })
        expect(ids(yield* store.dueTimers(second, 100, 10))).toStrictEqual(["due"])
        expect(yield* Effect.flip(store.dueTimers(first, 100, 10))).toBeInstanceOf(ShardOwnershipLost)
      }))

      test("releasing a stale lease does not disturb the current one", Effect.gen(function*() {
        const { ownership, store } = yield* services
        yield* store.upsertTimer(makeTimer("due", { executeAt: 100 }))
        const shard = { namespace: NS, shardId: 0 }
        const first = yield* ownership.claim(shard, "a")
        const second = yield* ownership.claim(shard, "b")
        yield* ownership.release(first)
        expect(ids(yield* store.dueTimers(second, 100, 10))).toStrictEqual(["due"])
        expect((yield* ownership.claim(shard, "c")).version).toBe(second.version + 1)
      }))
    })

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
        const lease = yield* ownership.claim({ namespace: NS, shardId: 0 }, "owner")
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
        const newer = yield* ownership.claim({ namespace: NS, shardId: 0 }, "usurper")
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
        const stale = yield* ownership.claim({ namespace: NS, shardId: 0 }, "old")
        yield* ownership.claim({ namespace: NS, shardId: 0 }, "new")
        const fresh = yield* ownership.claim({ namespace: NS, shardId: 1 }, "owner")
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
    })

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

    test("ping succeeds", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.ping
    }))
  })
