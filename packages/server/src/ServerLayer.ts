/**
 * The composition of the whole service for given settings: store → engine →
 * timer service → HTTP, and NATS and Kafka (commands in, firings out) when configured. main.ts launches it; tests build it in-process.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { layerPgStore, layerPgWakeups, layerSqliteStore, layerWebhookDelivery } from "@timer/adapters"
import {
  Engine,
  EngineConfig,
  Purger,
  type ShardOwnership,
  type StoreError,
  Timers,
  type TimerStore,
  TimerWakeups
} from "@timer/core"
import { KafkaConnection, layerKafkaCommands, layerKafkaDelivery } from "@timer/broker-kafka"
import { layerNatsCommands, layerNatsDelivery, NatsConnection } from "@timer/broker-nats"
import { Effect, FiberRef, HashSet, Layer, Logger, LogLevel, Option } from "effect"
import { layerHttpServer } from "./http/HttpServer.js"
import type { ServerSettings } from "./ServerConfig.js"

/** HTTP request bytes allowed beyond the payload limit, for the other fields. */
export const BODY_OVERHEAD_BYTES = 64 * 1024

const levels = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error
} as const

/**
 * The whole service for the given settings. Its output is the bound HTTP
 * server, so a caller that listens on port 0 can read the address it got.
 */
export const makeServerLayer = (settings: ServerSettings) => {
  // The store, and the wake-ups that reach the shard fibers: in-process with SQLite (one
  // instance), through LISTEN/NOTIFY with PostgreSQL (many).
  const storage: Layer.Layer<TimerStore | ShardOwnership | TimerWakeups, StoreError> = settings.db._tag === "Sqlite"
    ? Layer.merge(
      layerSqliteStore({ filename: settings.db.filename, synchronous: settings.sqliteSynchronous }),
      TimerWakeups.layer
    )
    : layerPgWakeups(settings.db.url).pipe(
      Layer.provideMerge(
        layerPgStore({
          url: settings.db.url,
          maxConnections: settings.pgMaxConnections,
          applicationName: `durable-timers ${settings.instanceId}`
        })
      )
    )
  const engineConfig = EngineConfig.layer({
    instanceId: settings.instanceId,
    instanceHost: settings.instanceHost,
    maxPayloadBytes: settings.maxPayloadBytes,
    deliveryConcurrency: settings.deliveryConcurrency,
    shardConcurrency: settings.shardConcurrency,
    defaultNamespaceShards: settings.defaultNamespaceShards,
    retentionMs: settings.retentionMs,
    purgeIntervalMs: settings.purgeIntervalMs,
    idlePollMs: settings.idlePollMs,
    shutdownGraceMs: settings.shutdownGraceMs,
    instanceTtlMs: settings.instanceTtlMs,
    exclusive: settings.db._tag === "Sqlite",
    rebalanceIntervalMs: settings.rebalanceIntervalMs,
    natsEnabled: Option.isSome(settings.brokers.nats),
    kafkaEnabled: Option.isSome(settings.brokers.kafka)
  })
  // Webhooks always; with NATS or Kafka, timers that name a natsSubject or kafkaTopic are published
  // there, and ScheduleTimer/CancelTimer commands are read from the broker.
  const webhooks = layerWebhookDelivery.pipe(Layer.provide(NodeHttpClient.layerUndici))
  const nats = Option.map(settings.brokers.nats, NatsConnection.layer)
  const kafka = Option.map(settings.brokers.kafka, KafkaConnection.layer)
  const withNats = Option.match(nats, {
    onNone: () => webhooks,
    onSome: (connection) => layerNatsDelivery(webhooks).pipe(Layer.provide(connection))
  })
  const delivery = Option.match(kafka, {
    onNone: () => withNats,
    onSome: (connection) => layerKafkaDelivery(withNats).pipe(Layer.provide(connection))
  })
  const commands = Layer.mergeAll(
    Option.match(nats, {
      onNone: () => Layer.empty,
      onSome: (connection) => layerNatsCommands(settings.brokers.commandNamespace).pipe(Layer.provide(connection))
    }),
    Option.match(kafka, {
      onNone: () => Layer.empty,
      onSome: (connection) => layerKafkaCommands(settings.brokers.commandNamespace).pipe(Layer.provide(connection))
    })
  )
  const engine = Engine.layer.pipe(Layer.provide(delivery))
  const core = Timers.layer.pipe(
    Layer.provideMerge(engine),
    Layer.provideMerge(Purger.layer),
    Layer.provideMerge(engineConfig),
    Layer.provideMerge(storage)
  )
  const http = layerHttpServer({
    port: settings.port,
    host: settings.host,
    maxBodyBytes: settings.maxPayloadBytes + BODY_OVERHEAD_BYTES
  })
  return Layer.merge(http, commands).pipe(Layer.provide(core))
}

const loggers = {
  json: Logger.withConsoleLog(Logger.jsonLogger),
  logfmt: Logger.withConsoleLog(Logger.logfmtLogger),
  pretty: Logger.prettyLoggerDefault
} as const

/** The logger the settings ask for. */
export const loggerFor = (settings: ServerSettings) =>
  Layer.mergeAll(
    // The one logger: main.ts logs in JSON until the settings are read, and this replaces it.
    Layer.scopedDiscard(Effect.locallyScoped(FiberRef.currentLoggers, HashSet.make(loggers[settings.logFormat]))),
    Logger.minimumLogLevel(levels[settings.logLevel])
  )
