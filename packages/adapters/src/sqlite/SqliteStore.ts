/**
 * The embedded store: one SQLite file in WAL mode, migrated at start.
 */
import { Migrator } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { StoreError, type ShardOwnership, type TimerStore } from "@timer/core"
import { Effect, Layer } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { layerSqlStores } from "../sql/SqlTimerStore.js"
import { sqliteMigrations } from "./SqliteMigrations.js"

/** Settings of the SQLite store. */
export interface SqliteStoreOptions {
  /** The database file; ":memory:" for a throwaway database. */
  readonly filename: string
  /** PRAGMA synchronous: FULL survives power loss; NORMAL survives process crashes and is faster. */
  readonly synchronous?: "FULL" | "NORMAL"
}

/** The SQLite client with the schema migrated and the pragmas set. */
export const layerSqliteClient = (options: SqliteStoreOptions) => {
  const client = SqliteClient.layer({ filename: options.filename })
  const setup = Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqliteClient.SqliteClient
      yield* sql.unsafe(`PRAGMA synchronous = ${options.synchronous ?? "FULL"}`)
      yield* sql.unsafe("PRAGMA busy_timeout = 5000")
    })
  )
  const migrate = Layer.effectDiscard(Migrator.make({})({ loader: Migrator.fromRecord(sqliteMigrations) }))
  const prepareDirectory = Layer.effectDiscard(
    Effect.sync(() => {
      if (options.filename !== ":memory:") mkdirSync(dirname(options.filename), { recursive: true })
    })
  )
  return migrate.pipe(Layer.provideMerge(setup), Layer.provideMerge(client), Layer.provide(prepareDirectory))
}

/** The timer store and shard ownership on a SQLite file. */
export const layerSqliteStore = (
  options: SqliteStoreOptions
): Layer.Layer<TimerStore | ShardOwnership | SqliteClient.SqliteClient, StoreError> =>
  layerSqlStores.pipe(
    Layer.provideMerge(layerSqliteClient(options)),
    Layer.mapError((cause) => new StoreError({ operation: "open SQLite database", cause }))
  )
