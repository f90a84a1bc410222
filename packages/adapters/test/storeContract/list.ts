/**
 * The store contract, listTimers: order, filters, limit and keyset pagination.
 */
import { describe, expect } from "@effect/vitest"
import { type TimerQuery, TimerStore } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, ids, listAll, makeTimer, NS, OTHER_NS, services } from "./fixtures.js"

/** Registers the listTimers tests. */
export const listContract = (test: ContractTest) => {
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
}
