/**
 * Broker commands through the CommandIntake into the engine, on the TestClock
 * over the SQLite store: the seed ADR's rules (idempotent by tenant and service
 * call, moved while pending, ignored once fired, past dueAt fires at once) and
 * our CancelTimer.
 */
import { describe, expect, it } from "@effect/vitest"
import { CommandIntake, commandTimerId, EngineConfig, type ScheduleTimer, type TimerCommand, TimerStore, TimerWakeups } from "@timer/core"
import { Effect, Either, Layer, Option } from "effect"
import { advanceTo, HOUR, MINUTE, SECOND, settle, startEngine, T0 } from "./support/engineHarness.js"
import { timeline } from "./support/fakeDelivery.js"

const TARGET = { natsSubject: "timer.events" }

const schedule = (id: string, serviceCallId: string, dueAt: number, correlationId?: string): ScheduleTimer => ({
  id,
  type: "ScheduleTimer",
  tenantId: "t1",
  ...(correlationId === undefined ? {} : { correlationId }),
  timestampMs: T0,
  payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId, dueAt }
})

const cancel = (id: string, serviceCallId: string): TimerCommand => ({
  id,
  type: "CancelTimer",
  tenantId: "t1",
  timestampMs: T0,
  payload: { _tag: "CancelTimer", tenantId: "t1", serviceCallId }
})

/** The engine harness with a CommandIntake over its store and wake-ups. */
const start = Effect.gen(function*() {
  const h = yield* startEngine()
  const intake = yield* Layer.build(CommandIntake.layer("default").pipe(
    Layer.provide(Layer.succeed(TimerStore, h.store)),
    Layer.provide(Layer.succeed(TimerWakeups, h.wakeups)),
    Layer.provide(Layer.succeed(EngineConfig, h.settings))
  ))
  const apply = (...commands: Array<TimerCommand>) => Effect.flatMap(CommandIntake, (i) => i.apply(commands, TARGET)).pipe(Effect.provide(intake))
  return { h, apply }
})

const tags = (outcomes: ReadonlyArray<Either.Either<{ readonly _tag: string }, { readonly reason: string }>>) =>
  outcomes.map(Either.match({ onLeft: (r) => r.reason, onRight: (r) => r._tag }))

describe("CommandIntake", () => {
  it.scoped("ScheduleTimer makes a timer keyed by tenant and service call that fires at dueAt with its command's origin", () =>
    Effect.gen(function*() {
      const { apply, h } = yield* start
      expect(tags(yield* apply(schedule("cmd-1", "sc/1", T0 + 5 * SECOND, "corr-1")))).toEqual(["Armed"])
      yield* advanceTo(T0 + MINUTE)
      const [call] = h.delivery.calls
      expect(timeline(h.delivery.calls)).toEqual([[commandTimerId("t1", "sc/1"), T0 + 5 * SECOND]])
      expect(call!.timerId).toBe("t1/sc%2F1")
      expect(call!.request.timer).toMatchObject({
        namespace: "default",
        natsSubject: "timer.events",
        origin: { tenantId: "t1", serviceCallId: "sc/1", commandId: "cmd-1", correlationId: "corr-1" }
      })
      expect(call!.request.timer.callbackUrl).toBeUndefined()
    }))

  it.scoped("a second ScheduleTimer moves the pending timer (the latest command is its origin); once fired, one is ignored", () =>
    Effect.gen(function*() {
      const { apply, h } = yield* start
      yield* apply(schedule("cmd-1", "sc1", T0 + 10 * SECOND))
      yield* advanceTo(T0 + SECOND)
      expect(tags(yield* apply(schedule("cmd-2", "sc1", T0 + 3 * SECOND)))).toEqual(["Armed"])
      // The same command again (a redelivery): nothing changes.
      expect(tags(yield* apply(schedule("cmd-2", "sc1", T0 + 3 * SECOND)))).toEqual(["Unchanged"])
      yield* advanceTo(T0 + MINUTE)
      expect(timeline(h.delivery.calls)).toEqual([["t1/sc1", T0 + 3 * SECOND]])
      expect(h.delivery.calls[0]!.request.timer.origin?.commandId).toBe("cmd-2")

      expect(tags(yield* apply(schedule("cmd-3", "sc1", T0 + 2 * MINUTE)))).toEqual(["Unchanged"])
      yield* advanceTo(T0 + HOUR)
      expect(h.delivery.calls).toHaveLength(1)
      expect(yield* h.row("t1/sc1")).toMatchObject({ state: "FIRED", executeAt: T0 + 3 * SECOND })
    }))

  it.scoped("a dueAt in the past fires at once", () =>
    Effect.gen(function*() {
      const { apply, h } = yield* start
      yield* advanceTo(T0 + MINUTE)
      yield* apply(schedule("cmd-1", "late", T0))
      yield* settle
      expect(timeline(h.delivery.calls)).toEqual([["t1/late", T0 + MINUTE]])
    }))

  it.scoped("CancelTimer deletes the pending timer: it never fires", () =>
    Effect.gen(function*() {
      const { apply, h } = yield* start
      expect(tags(yield* apply(schedule("cmd-1", "sc1", T0 + 5 * SECOND), cancel("cmd-2", "sc1"), cancel("cmd-3", "none"))))
        .toEqual(["Armed", "Cancelled", "Unchanged"])
      yield* advanceTo(T0 + HOUR)
      expect(h.delivery.calls).toEqual([])
      expect(yield* h.store.getTimer({ namespace: "default", id: "t1/sc1" })).toEqual(Option.none())
    }))

  it.scoped("a command whose timer id would be too long is refused; the rest of the batch is applied", () =>
    Effect.gen(function*() {
      const { apply } = yield* start
      const outcomes = yield* apply(schedule("cmd-1", "%".repeat(100), T0 + SECOND), schedule("cmd-2", "ok", T0 + SECOND))
      expect(tags(outcomes)).toEqual(["InvalidCommand", "Armed"])
      expect(Either.getLeft(outcomes[0]!).pipe(Option.map((r) => r.message))).toEqual(Option.some(expect.stringContaining("more than 255")))
    }))
})
