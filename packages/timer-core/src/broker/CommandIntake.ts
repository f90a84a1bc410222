/**
 * Broker commands into timers, whichever broker they came by: a batch of
 * decoded commands is applied in one store transaction, and the shards of the
 * timers it armed are woken. A command-made timer lives in the configured
 * namespace under the id `<tenantId>/<serviceCallId>` (each part
 * URI-encoded), and publishes DueTimeReached to the target it is given.
 */
import { randomUUID } from "node:crypto"
import { Clock, Context, Effect, Either, Layer, Option } from "effect"
import { EngineConfig } from "../EngineConfig.js"
import { Namespace } from "../Namespace.js"
import { shardIdOf } from "../ShardId.js"
import { DEFAULT_CALLBACK_TIMEOUT_SECONDS, type TimerKey, type TimerRecord } from "../Timer.js"
import type { StoreError } from "../TimerErrors.js"
import { type CommandChange, type CommandResult, TimerStore } from "../TimerStore.js"
import { TimerWakeups, wakeShardOf } from "../TimerWakeups.js"
import type { Rejection } from "./CommandDecoding.js"
import type { TimerCommand } from "./Envelope.js"

/** The longest timer id (TimerId). */
const MAX_ID_LENGTH = 255

/** The id of the timer of a service call: `<tenantId>/<serviceCallId>`, each part URI-encoded. */
export const commandTimerId = (tenantId: string, serviceCallId: string) =>
  `${encodeURIComponent(tenantId)}/${encodeURIComponent(serviceCallId)}`

/** Where the DueTimeReached of command-made timers goes: the events destination of the broker the command came by. */
export type CommandTarget = { readonly natsSubject: string } | { readonly kafkaTopic: string }

/** What became of one command: what the store did, or why the command was refused. */
export type CommandOutcome = Either.Either<CommandResult, Rejection>

/** Applies broker commands. */
export class CommandIntake extends Context.Tag("@timer/CommandIntake")<CommandIntake, {
  /** The namespace of command-made timers. */
  readonly namespace: string
  /** Applies a batch in one transaction; an outcome per command, in order. Nothing is written when it fails. */
  readonly apply: (
    commands: ReadonlyArray<TimerCommand>,
    target: CommandTarget
  ) => Effect.Effect<ReadonlyArray<CommandOutcome>, StoreError>
}>() {
  /** Command-made timers go to `namespace`, made with the default shard count when missing. */
  static layer = (namespace: string): Layer.Layer<CommandIntake, StoreError, TimerStore | TimerWakeups | EngineConfig> =>
    Layer.effect(CommandIntake, make(namespace))
}

const make = (namespaceName: string) =>
  Effect.gen(function*() {
    const store = yield* TimerStore
    const wakeups = yield* TimerWakeups
    const config = yield* EngineConfig
    const namespace = yield* Effect.flatMap(
      store.getNamespace(namespaceName),
      Option.match({
        onSome: Effect.succeed,
        onNone: () =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            store.createNamespace(new Namespace({ name: namespaceName, numShards: config.defaultNamespaceShards, createdAt: now })))
      })
    ).pipe(
      // Made meanwhile by another instance, with another shard count: that one it is.
      Effect.catchTag("NamespaceExists", () =>
        Effect.flatMap(store.getNamespace(namespaceName), Option.match({
          onSome: Effect.succeed,
          onNone: () => Effect.dieMessage(`namespace ${namespaceName} exists and then does not`)
        })))
    )

    /** The change a command asks for, or why it cannot be made. */
    const changeOf = (command: TimerCommand, target: CommandTarget, now: number): Either.Either<CommandChange, Rejection> => {
      const { serviceCallId, tenantId } = command.payload
      const key: TimerKey = { namespace: namespace.name, id: commandTimerId(tenantId, serviceCallId) }
      if (key.id.length > MAX_ID_LENGTH) {
        return Either.left({
          reason: "InvalidCommand",
          message: `tenantId and serviceCallId make a timer id of ${key.id.length} characters (URI-encoded), more than ${MAX_ID_LENGTH}`
        })
      }
      if (command.type === "CancelTimer") return Either.right({ _tag: "Cancel", key })
      const timer: TimerRecord = {
        ...key,
        shardId: shardIdOf(key.id, namespace.numShards),
        executeAt: command.payload.dueAt,
        nextFireAt: command.payload.dueAt,
        ...target,
        origin: {
          tenantId,
          serviceCallId,
          commandId: command.id,
          ...(command.correlationId === undefined ? {} : { correlationId: command.correlationId })
        },
        callbackTimeoutSeconds: DEFAULT_CALLBACK_TIMEOUT_SECONDS,
        state: "SCHEDULED",
        attempts: 0,
        firingId: randomUUID(),
        createdAt: now,
        updatedAt: now
      }
      return Either.right({ _tag: "Schedule", timer })
    }

    const apply = (commands: ReadonlyArray<TimerCommand>, target: CommandTarget) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const changes = commands.map((command) => changeOf(command, target, now))
        const results = yield* store.applyCommands(changes.filter(Either.isRight).map((change) => change.right))
        yield* Effect.forEach(results, (result) =>
          result._tag === "Armed" ? wakeShardOf(wakeups, result.timer, now, config.idlePollMs) : Effect.void, { discard: true })
        let next = 0
        return changes.map((change): CommandOutcome => (Either.isLeft(change) ? Either.left(change.left) : Either.right(results[next++]!)))
      })

    return CommandIntake.of({ namespace: namespace.name, apply })
  })
