/**
 * The PostgreSQL schema, as @effect/sql migrations: the same tables as SQLite,
 * timestamps as BIGINT epoch milliseconds, ids compared byte-wise (COLLATE "C",
 * like SQLite's default), payload and retry policy as JSON text (kept exactly
 * as given, unlike jsonb).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Migrations by "id_name", applied in order by the Migrator. */
export const pgMigrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_create_timers": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE namespaces (
      name TEXT COLLATE "C" PRIMARY KEY,
      num_shards INTEGER NOT NULL,
      created_at BIGINT NOT NULL
    )`
    yield* sql`CREATE TABLE shards (
      namespace TEXT COLLATE "C" NOT NULL,
      shard_id INTEGER NOT NULL,
      version BIGINT NOT NULL,
      owner_id TEXT,
      claimed_at BIGINT,
      PRIMARY KEY (namespace, shard_id)
    )`
    yield* sql`CREATE TABLE timers (
      namespace TEXT COLLATE "C" NOT NULL,
      id TEXT COLLATE "C" NOT NULL,
      shard_id INTEGER NOT NULL,
      execute_at BIGINT NOT NULL,
      next_fire_at BIGINT NOT NULL,
      callback_url TEXT NOT NULL,
      payload TEXT,
      retry_policy TEXT,
      callback_timeout_seconds INTEGER NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      firing_id TEXT NOT NULL,
      first_attempt_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      executed_at BIGINT,
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
      id TEXT COLLATE "C" PRIMARY KEY,
      host TEXT NOT NULL,
      pid INTEGER NOT NULL,
      started_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL
    )`
  }),
  // Timers get a NATS subject or a Kafka topic as their target instead of a webhook (exactly one of
  // the three), and the command that armed a command-made timer.
  "3_timer_targets": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE timers
      ALTER COLUMN callback_url DROP NOT NULL,
      ADD COLUMN nats_subject TEXT,
      ADD COLUMN kafka_topic TEXT,
      ADD COLUMN origin TEXT,
      ADD CONSTRAINT timers_one_target CHECK (num_nonnulls(callback_url, nats_subject, kafka_topic) = 1)`
  })
}
