/**
 * The store contract, applyCommands: a batch of broker commands' changes,
 * applied in order in one transaction, with the seed ADR's rules (a second
 * ScheduleTimer moves a SCHEDULED timer and leaves a fired one alone).
 */
import { describe, expect } from "@effect/vitest"
import { StoreError, type TimerRecord } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, makeTimer, mustGet, NS, services } from "./fixtures.js"

/** A command-made timer: it publishes to a NATS subject and keeps its command. */
const commanded = (id: string, executeAt: number, commandId: string, overrides: Partial<TimerRecord> = {}): TimerRecord => {
  const { callbackUrl: _u, ...base } = makeTimer(id, { executeAt, firingId: `firing-${commandId}`, createdAt: 100, updatedAt: 100 })
  return {
    ...base,
    natsSubject: "timer.events",
    origin: { tenantId: "t1", serviceCallId: id, commandId, correlationId: `corr-${commandId}` },
    ...overrides
  }
}

/** Registers the applyCommands tests. */
export const commandsContract = (test: ContractTest) => {
  describe("applyCommands", () => {
    test("Schedule inserts a timer, then moves it while it is SCHEDULED: new time, firing id and origin, attempts afresh", Effect.gen(function*() {
      const { store } = yield* services
      const first = commanded("sc1", 5_000, "cmd-1")
      expect(yield* store.applyCommands([{ _tag: "Schedule", timer: first }])).toStrictEqual([{ _tag: "Armed", timer: first }])
      expect(yield* mustGet(first)).toStrictEqual(first)
      // A retry happened meanwhile.
      yield* store.updateScheduled(first, (t) => ({ ...t, attempts: 2, nextFireAt: 6_000, firstAttemptAt: 5_000, lastError: "x" }))

      const moved = commanded("sc1", 9_000, "cmd-2", { createdAt: 200, updatedAt: 200 })
      const expected: TimerRecord = { ...moved, createdAt: 100 }
      expect(yield* store.applyCommands([{ _tag: "Schedule", timer: moved }])).toStrictEqual([{ _tag: "Armed", timer: expected }])
      expect(yield* mustGet(first)).toStrictEqual(expected)
    }))

    test("Schedule at the same time again changes nothing (a redelivered command keeps the firing in flight)", Effect.gen(function*() {
      const { store } = yield* services
      const first = commanded("sc1", 5_000, "cmd-1")
      yield* store.applyCommands([{ _tag: "Schedule", timer: first }])
      const again = commanded("sc1", 5_000, "cmd-1b", { updatedAt: 300 })
      expect(yield* store.applyCommands([{ _tag: "Schedule", timer: again }])).toStrictEqual([{ _tag: "Unchanged" }])
      expect(yield* mustGet(first)).toStrictEqual(first)
    }))

    test("Schedule leaves a FIRED or FAILED timer as it is", Effect.gen(function*() {
      const { store } = yield* services
      const fired = commanded("fired", 5_000, "cmd-1", { state: "FIRED", attempts: 1, executedAt: 5_010 })
      const failed = commanded("failed", 5_000, "cmd-2", { state: "FAILED", attempts: 3, lastError: "gone" })
      yield* store.upsertTimer(fired)
      yield* store.upsertTimer(failed)
      expect(yield* store.applyCommands([
        { _tag: "Schedule", timer: commanded("fired", 9_000, "cmd-3") },
        { _tag: "Schedule", timer: commanded("failed", 9_000, "cmd-4") }
      ])).toStrictEqual([{ _tag: "Unchanged" }, { _tag: "Unchanged" }])
      expect(yield* mustGet(fired)).toStrictEqual(fired)
      expect(yield* mustGet(failed)).toStrictEqual(failed)
    }))

    test("Cancel deletes a SCHEDULED timer only", Effect.gen(function*() {
      const { store } = yield* services
      const fired = commanded("fired", 5_000, "cmd-1", { state: "FIRED", attempts: 1, executedAt: 5_010 })
      yield* store.upsertTimer(fired)
      yield* store.applyCommands([{ _tag: "Schedule", timer: commanded("sc1", 5_000, "cmd-2") }])
      expect(yield* store.applyCommands([
        { _tag: "Cancel", key: { namespace: NS, id: "sc1" } },
        { _tag: "Cancel", key: { namespace: NS, id: "sc1" } },
        { _tag: "Cancel", key: { namespace: NS, id: "fired" } },
        { _tag: "Cancel", key: { namespace: NS, id: "never" } }
      ])).toStrictEqual([{ _tag: "Cancelled" }, { _tag: "Unchanged" }, { _tag: "Unchanged" }, { _tag: "Unchanged" }])
      expect(yield* store.getTimer({ namespace: NS, id: "sc1" })).toStrictEqual(Option.none())
      expect(yield* mustGet(fired)).toStrictEqual(fired)
    }))

    test("a batch applies in order", Effect.gen(function*() {
      const { store } = yield* services
      const a = commanded("a", 5_000, "cmd-1")
      const a2 = commanded("a", 7_000, "cmd-3")
      expect((yield* store.applyCommands([
        { _tag: "Schedule", timer: a },
        { _tag: "Cancel", key: a },
        { _tag: "Schedule", timer: a2 },
        { _tag: "Schedule", timer: commanded("a", 8_000, "cmd-4") },
        { _tag: "Cancel", key: { namespace: NS, id: "b" } }
      ])).map((r) => r._tag)).toStrictEqual(["Armed", "Cancelled", "Armed", "Armed", "Unchanged"])
      expect(yield* mustGet(a)).toStrictEqual(commanded("a", 8_000, "cmd-4"))
    }))

    test("a batch is one transaction: a failing change undoes the ones before it", Effect.gen(function*() {
      const { store } = yield* services
      const kept = commanded("kept", 5_000, "cmd-0")
      yield* store.applyCommands([{ _tag: "Schedule", timer: kept }])
      const { natsSubject: _s, ...noTarget } = commanded("broken", 5_000, "cmd-2")
      const error = yield* Effect.flip(store.applyCommands([
        { _tag: "Schedule", timer: commanded("undone", 5_000, "cmd-1") },
        { _tag: "Cancel", key: kept },
        { _tag: "Schedule", timer: noTarget }
      ]))
      expect(error).toBeInstanceOf(StoreError)
      expect(yield* store.getTimer({ namespace: NS, id: "undone" })).toStrictEqual(Option.none())
      expect(yield* mustGet(kept)).toStrictEqual(kept)
    }))
  })
}
