/**
 * The NATS command consumer against the real nats-server (127.0.0.1:4222, or
 * TIMER_TEST_NATS_URL), with streams of each test's own and a scripted
 * CommandIntake in place of the store: a command is acknowledged only after
 * its batch was written, a batch that could not be written comes back, and
 * batches hold what has arrived.
 */
import { describe, expect, it } from "@effect/vitest"
import { jetstream } from "@nats-io/jetstream"
import { CommandIntake, type CommandOutcome, StoreError, type TimerCommand } from "@timer/core"
import { Deferred, Duration, Effect, Either, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { DEFAULT_NATS_SETTINGS, NatsConnection, type NatsSettings, runCommandConsumer } from "../src/index.js"

const URL = process.env.TIMER_TEST_NATS_URL ?? "nats://127.0.0.1:4222"

const freshSettings = (): NatsSettings => {
  const tag = `UNIT_${randomBytes(4).toString("hex")}`.toUpperCase()
  return {
    ...DEFAULT_NATS_SETTINGS,
    url: URL,
    commandsStream: `${tag}_COMMANDS`,
    commandsSubject: `${tag.toLowerCase()}.commands`,
    dlqStream: `${tag}_DLQ`,
    dlqSubject: `${tag.toLowerCase()}.dlq`,
    eventsStream: `${tag}_EVENTS`,
    eventsSubject: `${tag.toLowerCase()}.events`
  }
}

const command = (serviceCallId: string) =>
  JSON.stringify({
    id: `cmd-${serviceCallId}`,
    type: "ScheduleTimer",
    tenantId: "t1",
    timestampMs: 1,
    payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId, dueAt: "2030-01-01T00:00:00Z" }
  })

/** The connection (its streams deleted at the end) and a scripted intake that records every batch. */
const setUp = (apply: (commands: ReadonlyArray<TimerCommand>) => Effect.Effect<ReadonlyArray<CommandOutcome>, StoreError>) =>
  Effect.gen(function*() {
    const settings = freshSettings()
    const connection = yield* Layer.build(NatsConnection.layer(settings))
    const nats = yield* Effect.provide(NatsConnection, connection)
    yield* Effect.addFinalizer(() =>
      Effect.forEach([settings.commandsStream, settings.dlqStream, settings.eventsStream], (stream) =>
        Effect.promise(() => nats.jsm.streams.delete(stream).catch(() => false)), { discard: true })
    )
    const batches: Array<ReadonlyArray<string>> = []
    const intake = CommandIntake.of({
      namespace: "default",
      apply: (commands) =>
        Effect.suspend(() => {
          batches.push(commands.map((c) => c.payload.serviceCallId))
          return apply(commands)
        })
    })
    yield* Effect.forkScoped(runCommandConsumer).pipe(
      Effect.provide(Layer.merge(Layer.succeedContext(connection), Layer.succeed(CommandIntake, intake)))
    )
    const js = jetstream(nats.connection)
    const publish = (...serviceCallIds: Array<string>) =>
      Effect.promise(() => Promise.all(serviceCallIds.map((id) => js.publish(settings.commandsSubject, command(id)))))
    const consumerState = Effect.promise(() => nats.jsm.consumers.info(settings.commandsStream, settings.consumerName))
    /** Waits (bounded by 10 s) until `check` holds. */
    const eventually = (check: () => Effect.Effect<boolean>) =>
      Effect.gen(function*() {
        for (let i = 0; i < 500; i++) {
          if (yield* check()) return true
          yield* Effect.sleep(Duration.millis(20))
        }
        return false
      })
    return { batches, publish, consumerState, eventually }
  })

const armedAll = (commands: ReadonlyArray<TimerCommand>) =>
  Effect.succeed(commands.map((): CommandOutcome => Either.right({ _tag: "Unchanged" })))

describe("NATS command consumer", () => {
  it.scopedLive("acknowledges a command only after its batch was written", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { batches, consumerState, eventually, publish } = yield* setUp((commands) =>
        Effect.zipRight(Deferred.await(gate), armedAll(commands))
      )
      yield* publish("a", "b", "c")
      expect(yield* eventually(() => Effect.sync(() => batches.flat().length === 3))).toBe(true)
      // Read and being written, not acknowledged.
      const held = yield* consumerState
      expect(held.ack_floor.stream_seq).toBe(0)
      expect(held.num_ack_pending).toBe(3)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* eventually(() => Effect.map(consumerState, (info) => info.ack_floor.stream_seq === 3))).toBe(true)
    }))

  it.scopedLive("a batch that could not be written comes back and is written later; nothing is lost", () =>
    Effect.gen(function*() {
      let failures = 1
      const { batches, consumerState, eventually, publish } = yield* setUp((commands) =>
        failures-- > 0
          ? Effect.fail(new StoreError({ operation: "applyCommands", cause: "the disk is full" }))
          : armedAll(commands)
      )
      yield* publish("x", "y")
      expect(yield* eventually(() => Effect.map(consumerState, (info) => info.ack_floor.stream_seq === 2))).toBe(true)
      expect(batches.length).toBeGreaterThanOrEqual(2)
      expect(batches[0]).toEqual(["x", "y"])
      expect(new Set(batches.slice(1).flat())).toEqual(new Set(["x", "y"]))
    }))

  it.scopedLive("commands that arrive together are written as one batch, up to the batch size", () =>
    Effect.gen(function*() {
      const { batches, consumerState, eventually, publish } = yield* setUp(armedAll)
      const ids = Array.from({ length: 250 }, (_, i) => `c${i}`)
      yield* publish(...ids)
      expect(yield* eventually(() => Effect.map(consumerState, (info) => info.ack_floor.stream_seq === 250))).toBe(true)
      expect(batches.flat().sort()).toEqual([...ids].sort())
      expect(Math.max(...batches.map((b) => b.length))).toBeLessThanOrEqual(DEFAULT_NATS_SETTINGS.batchSize)
      // Far fewer batches than commands: they were grouped.
      expect(batches.length).toBeLessThan(50)
    }))
})
