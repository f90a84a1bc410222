/**
 * The SQLite schema, as @effect/sql migrations. Timestamps are INTEGER epoch
 * milliseconds; the due index is partial, over SCHEDULED timers only.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Migrations by "id_name", applied in order by the Migrator. */
export const sqliteMigrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_create_timers": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE namespaces (
      name TEXT PRIMARY KEY,
      num_shards INTEGER NOT NULL,
      created_at INTEGER NOT NULL
    )`
    yield* sql`CREATE TABLE shards (
      namespace TEXT NOT NULL,
      shard_id INTEGER NOT NULL,
      version INTEGER NOT NULL,
      owner_id TEXT,
      claimed_at INTEGER,
      PRIMARY KEY (namespace, shard_id)
    )`
    yield* sql`CREATE TABLE timers (
      namespace TEXT NOT NULL,
      id TEXT NOT NULL,
      shard_id INTEGER NOT NULL,
      execute_at INTEGER NOT NULL,
      next_fire_at INTEGER NOT NULL,
      callback_url TEXT NOT NULL,
      payload TEXT,
      retry_policy TEXT,
      callback_timeout_seconds INTEGER NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      firing_id TEXT NOT NULL,
      first_attempt_at INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      executed_at INTEGER,
      last_error TEXT,
      PRIMARY KEY (namespace, id)
    )`
    yield* sql`CREATE INDEX timers_due ON timers (namespace, shard_id, next_fire_at) WHERE state = 'SCHEDULED'`
    yield* sql`CREATE INDEX timers_by_execute_at ON timers (namespace, execute_at, id)`
    yield* sql`CREATE INDEX timers_finished ON timers (updated_at) WHERE state <> 'SCHEDULED'`
  }),
  "2_create_instances": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE instances (
      id TEXT PRIMARY KEY,
      host TEXT NOT NULL,
      pid INTEGER NOT NULL,
      started_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL
    )`
  }),
  // Timers get a NATS subject or a Kafka topic as their target instead of a webhook (callback_url
  // becomes optional; exactly one of the three is set), and the command that armed a command-made
  // timer. SQLite cannot drop a NOT NULL, so the table is rebuilt.
  "3_timer_targets": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE timers_new (
      namespace TEXT NOT NULL,
      id TEXT NOT NULL,
      shard_id INTEGER NOT NULL,
      execute_at INTEGER NOT NULL,
      next_fire_at INTEGER NOT NULL,
      callback_url TEXT,
      nats_subject TEXT,
      kafka_topic TEXT,
      origin TEXT,
      payload TEXT,
      retry_policy TEXT,
      callback_timeout_seconds INTEGER NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      firing_id TEXT NOT NULL,
      first_attempt_at INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      executed_at INTEGER,
      last_error TEXT,
      PRIMARY KEY (namespace, id),
      CONSTRAINT timers_one_target CHECK ((CASE WHEN callback_url IS NULL THEN 0 ELSE 1 END)
        + (CASE WHEN nats_subject IS NULL THEN 0 ELSE 1 END) + (CASE WHEN kafka_topic IS NULL THEN 0 ELSE 1 END) = 1)
    )`
    yield* sql`INSERT INTO timers_new (namespace, id, shard_id, execute_at, next_fire_at, callback_url, payload,
        retry_policy, callback_timeout_seconds, state, attempts, firing_id, first_attempt_at, created_at, updated_at,
        executed_at, last_error)
      SELECT namespace, id, shard_id, execute_at, next_fire_at, callback_url, payload,
        retry_policy, callback_timeout_seconds, state, attempts, firing_id, first_attempt_at, created_at, updated_at,
        executed_at, last_error FROM timers`
    yield* sql`DROP TABLE timers`
    yield* sql`ALTER TABLE timers_new RENAME TO timers`
    yield* sql`CREATE INDEX timers_due ON timers (namespace, shard_id, next_fire_at) WHERE state = 'SCHEDULED'`
    yield* sql`CREATE INDEX timers_by_execute_at ON timers (namespace, execute_at, id)`
    yield* sql`CREATE INDEX timers_finished ON timers (updated_at) WHERE state <> 'SCHEDULED'`
  })
}
