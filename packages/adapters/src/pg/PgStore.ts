/**
 * The shared store: PostgreSQL, for many instances on one database. The schema
 * is migrated at start; instances starting at once migrate it exactly once.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { type ShardOwnership, StoreError, type TimerStore } from "@timer/core"
import { Effect, Layer, Redacted } from "effect"
import { layerSqlStores } from "../sql/SqlTimerStore.js"
import { pgMigrations } from "./PgMigrations.js"

/** Settings of the PostgreSQL store. */
export interface PgStoreOptions {
  /** postgres://user:password@host:port/database */
  readonly url: string
  /** Connections in the pool (at least 2; default 10). */
  readonly maxConnections?: number
  /** Reported to the server as application_name. */
  readonly applicationName?: string
}

/** An arbitrary constant naming the migration lock among PostgreSQL advisory locks. */
const MIGRATION_LOCK = 7_341_902_215

/** The PostgreSQL client with the schema migrated. */
export const layerPgClient = (options: PgStoreOptions) => {
  const client = PgClient.layer({
    url: Redacted.make(options.url),
    // At least two: at start one holds the migration lock while another migrates.
    maxConnections: Math.max(2, options.maxConnections ?? 10),
    applicationName: options.applicationName ?? "durable-timers"
  })
  // Instances starting at once take turns: a session advisory lock, held on a connection of its
  // own, serialises the migrations (the Migrator's first CREATE TABLE is not safe to race).
  const migrate = Layer.scopedDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const lock = yield* sql.reserve
      yield* lock.executeRaw(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`, [])
      yield* Migrator.make({})({ loader: Migrator.fromRecord(pgMigrations) }).pipe(
        Effect.ensuring(Effect.ignore(lock.executeRaw(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`, [])))
      )
    }).pipe(Effect.scoped)
  )
  return migrate.pipe(Layer.provideMerge(client))
}

/** The timer store and shard ownership on PostgreSQL. */
export const layerPgStore = (
  options: PgStoreOptions
): Layer.Layer<TimerStore | ShardOwnership | PgClient.PgClient | SqlClient.SqlClient, StoreError> =>
  layerSqlStores.pipe(
    Layer.provideMerge(layerPgClient(options)),
    Layer.mapError((cause) => new StoreError({ operation: "open PostgreSQL database", cause }))
  )
