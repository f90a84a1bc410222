/**
 * Every setting of the server, read once from the environment, each with a
 * default and a description (the README's configuration table lists them).
 */
import { DEFAULT_ENGINE_SETTINGS, formatDurationMillis, parseDurationMillis } from "@timer/core"
import { Config, ConfigError, Either, Option } from "effect"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import { BrokerConfig } from "./BrokerConfig.js"

/** Longest timer delay Node supports (2^31 − 1 ms, about 24.8 days); longer sleeps would never wake. */
const MAX_SLEEP_MS = 2 ** 31 - 1

/** A duration setting in milliseconds, from `minMs` up to `maxMs`, defaulting to `fallbackMs`. */
const duration = (name: string, fallbackMs: number, description: string, minMs = 1, maxMs = MAX_SLEEP_MS) =>
  Config.string(name).pipe(
    Config.withDefault(formatDurationMillis(fallbackMs)),
    Config.mapOrFail((text) =>
      Option.match(parseDurationMillis(text), {
        onNone: () =>
          Either.left(ConfigError.InvalidData([name], `must be a duration such as "500ms", "30s", "5m", "1h" or "7d", got ${JSON.stringify(text)}`)),
        onSome: (millis) =>
          millis >= minMs && millis <= maxMs
            ? Either.right(millis)
            : Either.left(
              ConfigError.InvalidData([name], `must be from ${formatDurationMillis(minMs)} to ${formatDurationMillis(maxMs)}, got ${JSON.stringify(text)}`)
            )
      })
    ),
    Config.withDescription(description)
  )

const positiveInt = (name: string, fallback: number, description: string) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }),
    Config.withDescription(description)
  )

/** A database location parsed from TIMER_DB_URL. */
export type DbLocation =
  | { readonly _tag: "Sqlite"; readonly filename: string }
  | { readonly _tag: "Postgres"; readonly url: string }

/** Parses TIMER_DB_URL: "sqlite:PATH" (also "sqlite://PATH" and "sqlite::memory:") or "postgres://...". */
export const parseDbUrl = (url: string): Either.Either<DbLocation, string> => {
  if (url.startsWith("sqlite:")) {
    const filename = url.slice("sqlite:".length).replace(/^\/\//, "")
    return filename === "" ? Either.left("sqlite: needs a file path, as in sqlite:./data/timers.db") : Either.right({ _tag: "Sqlite", filename })
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    return URL.canParse(url) ? Either.right({ _tag: "Postgres", url }) : Either.left("not a valid postgres:// URL")
  }
  return Either.left(`unknown database URL; use sqlite:PATH or postgres://user@host:port/database`)
}

/** The database location as logged: a PostgreSQL URL without its password. */
export const describeDb = (db: DbLocation): string => {
  if (db._tag === "Sqlite") return `sqlite:${db.filename}`
  return hidePassword(db.url)
}

/** The settings as printed by --print-config: passwords hidden, a broker "off" when not configured. */
export const describeSettings = (settings: ServerSettings) => ({
  ...settings,
  db: describeDb(settings.db),
  brokers: {
    commandNamespace: settings.brokers.commandNamespace,
    nats: Option.match(settings.brokers.nats, {
      onNone: () => "off (TIMER_NATS_URL is not set)",
      onSome: (nats) => ({ ...nats, url: nats.url.split(",").map((server) => hidePassword(server.trim())).join(",") })
    }),
    kafka: Option.getOrElse(settings.brokers.kafka, () => "off (TIMER_KAFKA_BROKERS is not set)")
  }
})

/** A URL with its password replaced by ***. */
const hidePassword = (text: string) => {
  if (!URL.canParse(text)) return text
  const url = new URL(text)
  if (url.password !== "") url.password = "***"
  return url.toString()
}

/** A generated instance id: host name, process id and a random suffix. */
export const generatedInstanceId = () => `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`

/** The server's settings. */
export const ServerConfig = Config.all({
  port: Config.port("TIMER_HTTP_PORT").pipe(Config.withDefault(8080), Config.withDescription("HTTP port")),
  host: Config.string("TIMER_HTTP_HOST").pipe(Config.withDefault("0.0.0.0"), Config.withDescription("HTTP listen address")),
  db: Config.string("TIMER_DB_URL").pipe(
    Config.withDefault("sqlite:./data/timers.db"),
    Config.mapOrFail((url) => Either.mapLeft(parseDbUrl(url), (reason) => ConfigError.InvalidData(["TIMER_DB_URL"], reason))),
    Config.withDescription("Database: sqlite:PATH or postgres://user:password@host:port/database")
  ),
  pgMaxConnections: positiveInt("TIMER_PG_MAX_CONNECTIONS", 10, "PostgreSQL connections per instance (at least 2)"),
  sqliteSynchronous: Config.literal("FULL", "NORMAL")("TIMER_SQLITE_SYNCHRONOUS").pipe(
    Config.withDefault("FULL" as const),
    Config.withDescription("SQLite PRAGMA synchronous: FULL survives power loss, NORMAL only process crashes")
  ),
  instanceId: Config.string("TIMER_INSTANCE_ID").pipe(
    Config.option,
    Config.map(Option.getOrElse(generatedInstanceId)),
    Config.withDescription("This instance's id (generated when not set)")
  ),
  instanceHost: Config.string("TIMER_INSTANCE_HOST").pipe(
    Config.withDefault(hostname()),
    Config.withDescription("The host this instance registers under (default: this machine's host name)")
  ),
  maxPayloadBytes: positiveInt("TIMER_MAX_PAYLOAD_BYTES", DEFAULT_ENGINE_SETTINGS.maxPayloadBytes, "Largest payload, JSON-encoded bytes"),
  deliveryConcurrency: positiveInt("TIMER_DELIVERY_CONCURRENCY", DEFAULT_ENGINE_SETTINGS.deliveryConcurrency, "Deliveries in flight, all shards"),
  shardConcurrency: positiveInt("TIMER_SHARD_CONCURRENCY", DEFAULT_ENGINE_SETTINGS.shardConcurrency, "Deliveries in flight per shard"),
  defaultNamespaceShards: Config.integer("TIMER_DEFAULT_NAMESPACE_SHARDS").pipe(
    Config.withDefault(DEFAULT_ENGINE_SETTINGS.defaultNamespaceShards),
    Config.validate({ message: "TIMER_DEFAULT_NAMESPACE_SHARDS must be 1 to 4096", validation: (n) => n >= 1 && n <= 4096 }),
    Config.withDescription("Shards of the default namespace when it is first made")
  ),
  retentionMs: duration("TIMER_RETENTION", DEFAULT_ENGINE_SETTINGS.retentionMs, "How long FIRED and FAILED timers stay visible", 1, Number.MAX_SAFE_INTEGER),
  purgeIntervalMs: duration("TIMER_PURGE_INTERVAL", DEFAULT_ENGINE_SETTINGS.purgeIntervalMs, "Time between purges of finished timers", 1_000),
  idlePollMs: duration("TIMER_IDLE_POLL", DEFAULT_ENGINE_SETTINGS.idlePollMs, "Longest an idle shard sleeps without looking at the store", 100),
  instanceTtlMs: duration("TIMER_INSTANCE_TTL", DEFAULT_ENGINE_SETTINGS.instanceTtlMs, "How long a heartbeat keeps an instance registered; a dead one's shards move after this", 1_000),
  rebalanceIntervalMs: duration("TIMER_REBALANCE_INTERVAL", DEFAULT_ENGINE_SETTINGS.rebalanceIntervalMs, "Time between heartbeats and shard rebalancing rounds", 50),
  shutdownGraceMs: duration("TIMER_SHUTDOWN_GRACE", DEFAULT_ENGINE_SETTINGS.shutdownGraceMs, "How long shutdown waits for in-flight deliveries", 0),
  logLevel: Config.literal("trace", "debug", "info", "warning", "error")("TIMER_LOG_LEVEL").pipe(
    Config.withDefault("info" as const),
    Config.withDescription("Log level")
  ),
  logFormat: Config.literal("json", "logfmt", "pretty")("TIMER_LOG_FORMAT").pipe(
    Config.withDefault("json" as const),
    Config.withDescription("Log format")
  ),
  brokers: BrokerConfig
})

/** The server's settings, decoded. */
export type ServerSettings = Config.Config.Success<typeof ServerConfig>
