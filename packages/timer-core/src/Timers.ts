/**
 * The timer service: the operations the HTTP API and the broker adapters call.
 * It validates against the namespace, writes through the store and wakes the
 * shard fiber that must fire the timer.
 */
import { randomUUID } from "node:crypto"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { Engine } from "./Engine.js"
import { EngineConfig } from "./EngineConfig.js"
import { Namespace } from "./Namespace.js"
import { shardIdOf } from "./ShardId.js"
import { DEFAULT_CALLBACK_TIMEOUT_SECONDS, type TimerKey, type TimerRecord } from "./Timer.js"
import {
  FieldIssue,
  InvalidInput,
  type NamespaceExists,
  NamespaceNotFound,
  PayloadTooLarge,
  type StoreError,
  TimerNotFound,
  type TimerNotPending
} from "./TimerErrors.js"
import type {
  CreateNamespaceRequest,
  CreateTimerRequest,
  ListTimersRequest,
  TimerSelection,
  UpdateTimerRequest
} from "./TimerRequests.js"
import { DEFAULT_LIST_LIMIT } from "./TimerRequests.js"
import { TimerStore } from "./TimerStore.js"
import { TimerWakeups, wakeShardOf } from "./TimerWakeups.js"

/** A page of a list and the cursor of the next one. */
export interface TimerListPage {
  readonly timers: ReadonlyArray<TimerRecord>
  readonly nextCursor: string | undefined
}

/** The timer service. */
export class Timers extends Context.Tag("@timer/Timers")<Timers, {
  /** Creates a timer or replaces the one with the same id, arming it afresh. */
  readonly create: (
    request: CreateTimerRequest
  ) => Effect.Effect<TimerRecord, NamespaceNotFound | PayloadTooLarge | InvalidInput | StoreError>
  /** Reads a timer. */
  readonly get: (selection: TimerSelection) => Effect.Effect<TimerRecord, NamespaceNotFound | TimerNotFound | StoreError>
  /** Changes fields of a SCHEDULED timer, as a new firing; a new executeAt also resets its attempts. */
  readonly update: (
    request: UpdateTimerRequest
  ) => Effect.Effect<
    TimerRecord,
    NamespaceNotFound | TimerNotFound | TimerNotPending | PayloadTooLarge | InvalidInput | StoreError
  >
  /** Deletes a timer. */
  readonly delete: (selection: TimerSelection) => Effect.Effect<void, NamespaceNotFound | TimerNotFound | StoreError>
  /** One page of a namespace's timers, by executeAt then id. */
  readonly list: (request: ListTimersRequest) => Effect.Effect<TimerListPage, NamespaceNotFound | InvalidInput | StoreError>
  /** Creates a namespace and starts firing its shards; the same request again succeeds. */
  readonly createNamespace: (request: CreateNamespaceRequest) => Effect.Effect<Namespace, NamespaceExists | StoreError>
  /** Reads a namespace. */
  readonly getNamespace: (name: string) => Effect.Effect<Namespace, NamespaceNotFound | StoreError>
  /** Lists the namespaces. */
  readonly listNamespaces: Effect.Effect<ReadonlyArray<Namespace>, StoreError>
}>() {
  /** The service over the store and the engine. */
  static layer: Layer.Layer<Timers, never, TimerStore | TimerWakeups | Engine | EngineConfig> = Layer.effect(
    Timers,
    Effect.suspend(() => make)
  )
}

/** Encodes a list position as an opaque cursor. */
export const encodeCursor = (position: { readonly executeAt: number; readonly id: string }): string =>
  Buffer.from(JSON.stringify([position.executeAt, position.id]), "utf8").toString("base64url")

/** Decodes a cursor made by `encodeCursor`. */
export const decodeCursor = (cursor: string): Option.Option<{ executeAt: number; id: string }> => {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"))
    return Array.isArray(value) && value.length === 2 && Number.isFinite(value[0]) && typeof value[1] === "string"
      ? Option.some({ executeAt: value[0] as number, id: value[1] as string })
      : Option.none()
  } catch {
    return Option.none()
  }
}

const make = Effect.gen(function*() {
  const store = yield* TimerStore
  const wakeups = yield* TimerWakeups
  const engine = yield* Engine
  const config = yield* EngineConfig
  // Namespaces never change once made, so a found one is cached for good.
  const namespaces = new Map<string, Namespace>()

  const namespaceOf = (name: string) =>
    Effect.suspend(() => {
      const cached = namespaces.get(name)
      if (cached !== undefined) return Effect.succeed(cached)
      return store.getNamespace(name).pipe(
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new NamespaceNotFound({ namespace: name })),
          onSome: (namespace) => Effect.sync(() => (namespaces.set(name, namespace), namespace))
        }))
      )
    })

  /** A natsSubject needs a NATS connection to be delivered, a kafkaTopic a Kafka one. */
  const checkTarget = (request: { readonly natsSubject?: string | undefined; readonly kafkaTopic?: string | undefined }) => {
    const missing = request.natsSubject !== undefined && !config.natsEnabled
      ? { field: "natsSubject", what: "NATS connection (TIMER_NATS_URL is not set)" }
      : request.kafkaTopic !== undefined && !config.kafkaEnabled
      ? { field: "kafkaTopic", what: "Kafka connection (TIMER_KAFKA_BROKERS is not set)" }
      : undefined
    return missing === undefined
      ? Effect.void
      : Effect.fail(
        new InvalidInput({
          message: `${missing.field} cannot be used: this service has no ${missing.what}`,
          details: [new FieldIssue({ field: missing.field, message: `cannot be used: this service has no ${missing.what}` })]
        })
      )
  }

  const checkPayload = (payload: unknown) =>
    Effect.suspend((): Effect.Effect<void, InvalidInput | PayloadTooLarge> => {
      if (payload === undefined) return Effect.void
      let encoded: string
      try {
        encoded = JSON.stringify(payload)
      } catch {
        return Effect.fail(
          new InvalidInput({
            message: "payload cannot be encoded as JSON (nested too deeply?)",
            details: [new FieldIssue({ field: "payload", message: "cannot be encoded as JSON (nested too deeply?)" })]
          })
        )
      }
      const sizeBytes = Buffer.byteLength(encoded, "utf8")
      return sizeBytes > config.maxPayloadBytes
        ? Effect.fail(new PayloadTooLarge({ subject: "payload", sizeBytes, limitBytes: config.maxPayloadBytes }))
        : Effect.void
    })

  const wake = (timer: TimerRecord, now: number) => wakeShardOf(wakeups, timer, now, config.idlePollMs)

  const getRecord = (key: TimerKey) =>
    store.getTimer(key).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new TimerNotFound({ namespace: key.namespace, timerId: key.id })),
        onSome: Effect.succeed
      }))
    )

  const create = Effect.fn("Timers.create")(function*(request: CreateTimerRequest) {
    const namespace = yield* namespaceOf(request.namespace)
    yield* checkTarget(request)
    yield* checkPayload(request.payload)
    const now = yield* Clock.currentTimeMillis
    const record: TimerRecord = {
      namespace: namespace.name,
      id: request.id,
      shardId: shardIdOf(request.id, namespace.numShards),
      executeAt: request.executeAt,
      nextFireAt: request.executeAt,
      ...(request.callbackUrl === undefined ? {} : { callbackUrl: request.callbackUrl }),
      ...(request.natsSubject === undefined ? {} : { natsSubject: request.natsSubject }),
      ...(request.kafkaTopic === undefined ? {} : { kafkaTopic: request.kafkaTopic }),
      ...(request.payload === undefined ? {} : { payload: request.payload }),
      ...(request.retryPolicy === undefined ? {} : { retryPolicy: request.retryPolicy }),
      callbackTimeoutSeconds: request.callbackTimeoutSeconds ?? DEFAULT_CALLBACK_TIMEOUT_SECONDS,
      state: "SCHEDULED",
      attempts: 0,
      firingId: randomUUID(),
      createdAt: now,
      updatedAt: now
    }
    const stored = yield* store.upsertTimer(record)
    yield* wake(stored, now)
    return stored
  })

  const update = Effect.fn("Timers.update")(function*(request: UpdateTimerRequest) {
    yield* namespaceOf(request.namespace)
    yield* checkTarget(request)
    yield* checkPayload(request.payload)
    const now = yield* Clock.currentTimeMillis
    const stored = yield* store.updateScheduled({ namespace: request.namespace, id: request.timerId }, (timer) => {
      // Any change makes a new firing (a firing in flight for the old one then writes nothing);
      // a new executeAt also starts its attempts afresh.
      const rearm = request.executeAt !== undefined && request.executeAt !== timer.executeAt
      const { firstAttemptAt: _f, lastError: _l, ...kept } = timer
      const armed: TimerRecord = rearm ? { ...kept, attempts: 0, firingId: randomUUID() } : { ...timer, firingId: randomUUID() }
      // A new target replaces the old one, whichever kind it was.
      const { callbackUrl: _u, kafkaTopic: _k, natsSubject: _s, ...base } = armed
      const given = request.callbackUrl !== undefined || request.natsSubject !== undefined || request.kafkaTopic !== undefined
      const source = given ? request : armed
      const target = {
        ...(source.callbackUrl === undefined ? {} : { callbackUrl: source.callbackUrl }),
        ...(source.natsSubject === undefined ? {} : { natsSubject: source.natsSubject }),
        ...(source.kafkaTopic === undefined ? {} : { kafkaTopic: source.kafkaTopic })
      }
      return {
        ...base,
        ...target,
        ...(request.executeAt === undefined ? {} : { executeAt: request.executeAt }),
        ...(rearm ? { nextFireAt: request.executeAt! } : {}),
        ...(request.payload === undefined ? {} : { payload: request.payload }),
        ...(request.retryPolicy === undefined ? {} : { retryPolicy: request.retryPolicy }),
        ...(request.callbackTimeoutSeconds === undefined ? {} : { callbackTimeoutSeconds: request.callbackTimeoutSeconds }),
        updatedAt: now
      }
    })
    yield* wake(stored, now)
    return stored
  })

  const list = Effect.fn("Timers.list")(function*(request: ListTimersRequest) {
    yield* namespaceOf(request.namespace)
    let after: { executeAt: number; id: string } | undefined
    if (request.cursor !== undefined) {
      const decoded = decodeCursor(request.cursor)
      if (Option.isNone(decoded)) {
        return yield* new InvalidInput({
          message: "invalid cursor",
          details: [new FieldIssue({ field: "cursor", message: "must be a nextCursor returned by a previous list call" })]
        })
      }
      after = decoded.value
    }
    const page = yield* store.listTimers({
      namespace: request.namespace,
      state: request.state,
      executeAtFrom: request.executeAtFrom,
      executeAtTo: request.executeAtTo,
      after,
      limit: request.limit ?? DEFAULT_LIST_LIMIT
    })
    return { timers: page.timers, nextCursor: Option.getOrUndefined(Option.map(page.next, encodeCursor)) }
  })

  const createNamespace = Effect.fn("Timers.createNamespace")(function*(request: CreateNamespaceRequest) {
    const now = yield* Clock.currentTimeMillis
    const namespace = yield* store.createNamespace(
      new Namespace({ name: request.name, numShards: request.numShards, createdAt: now })
    )
    namespaces.set(namespace.name, namespace)
    yield* engine.startNamespace(namespace)
    return namespace
  })

  return Timers.of({
    create,
    get: (selection) =>
      Effect.zipRight(namespaceOf(selection.namespace), getRecord({ namespace: selection.namespace, id: selection.timerId })),
    update,
    delete: (selection) =>
      namespaceOf(selection.namespace).pipe(
        Effect.zipRight(store.deleteTimer({ namespace: selection.namespace, id: selection.timerId })),
        Effect.flatMap((deleted) =>
          deleted ? Effect.void : Effect.fail(new TimerNotFound({ namespace: selection.namespace, timerId: selection.timerId }))
        )
      ),
    list,
    createNamespace,
    getNamespace: namespaceOf,
    listNamespaces: store.listNamespaces
  })
})
