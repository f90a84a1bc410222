/**
 * The mapping between stored rows and timer records, shared by the SQL stores.
 * Timestamps are stored as epoch milliseconds; payload, retry policy and origin as JSON text.
 */
import { RetryPolicy, type FiringUpdate, type TimerRecord, type TimerState } from "@timer/core"
import { Schema } from "effect"

/** A row of the `timers` table. */
export interface TimerRow {
  readonly namespace: string
  readonly id: string
  readonly shard_id: number
  readonly execute_at: number | string
  readonly next_fire_at: number | string
  readonly callback_url: string | null
  readonly nats_subject: string | null
  readonly kafka_topic: string | null
  /** JSON of the TimerOrigin of a command-made timer. */
  readonly origin: string | null
  readonly payload: string | null
  readonly retry_policy: string | null
  readonly callback_timeout_seconds: number
  readonly state: string
  readonly attempts: number
  readonly firing_id: string
  readonly first_attempt_at: number | string | null
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly executed_at: number | string | null
  readonly last_error: string | null
}

const decodeRetryPolicy = Schema.decodeUnknownSync(Schema.parseJson(RetryPolicy))
const encodeRetryPolicy = Schema.encodeSync(Schema.parseJson(RetryPolicy))

// PostgreSQL returns BIGINT as a string; SQLite as a number.
const millis = (value: number | string): number => (typeof value === "number" ? value : Number(value))

/** A stored row as a timer record. */
export const fromRow = (row: TimerRow): TimerRecord => ({
  namespace: row.namespace,
  id: row.id,
  shardId: Number(row.shard_id),
  executeAt: millis(row.execute_at),
  nextFireAt: millis(row.next_fire_at),
  ...(row.callback_url === null ? {} : { callbackUrl: row.callback_url }),
  ...(row.nats_subject === null ? {} : { natsSubject: row.nats_subject }),
  ...(row.kafka_topic === null || row.kafka_topic === undefined ? {} : { kafkaTopic: row.kafka_topic }),
  ...(row.origin === null ? {} : { origin: JSON.parse(row.origin) }),
  ...(row.payload === null ? {} : { payload: JSON.parse(row.payload) }),
  ...(row.retry_policy === null ? {} : { retryPolicy: decodeRetryPolicy(row.retry_policy) }),
  callbackTimeoutSeconds: Number(row.callback_timeout_seconds),
  state: row.state as TimerState,
  attempts: Number(row.attempts),
  firingId: row.firing_id,
  ...(row.first_attempt_at === null ? {} : { firstAttemptAt: millis(row.first_attempt_at) }),
  createdAt: millis(row.created_at),
  updatedAt: millis(row.updated_at),
  ...(row.executed_at === null ? {} : { executedAt: millis(row.executed_at) }),
  ...(row.last_error === null ? {} : { lastError: row.last_error })
})

/** A timer record as the columns of a row. */
export const toRow = (timer: TimerRecord): TimerRow => ({
  namespace: timer.namespace,
  id: timer.id,
  shard_id: timer.shardId,
  execute_at: timer.executeAt,
  next_fire_at: timer.nextFireAt,
  callback_url: timer.callbackUrl ?? null,
  nats_subject: timer.natsSubject ?? null,
  kafka_topic: timer.kafkaTopic ?? null,
  origin: timer.origin === undefined ? null : JSON.stringify(timer.origin),
  payload: timer.payload === undefined ? null : JSON.stringify(timer.payload),
  retry_policy: timer.retryPolicy === undefined ? null : encodeRetryPolicy(timer.retryPolicy),
  callback_timeout_seconds: timer.callbackTimeoutSeconds,
  state: timer.state,
  attempts: timer.attempts,
  firing_id: timer.firingId,
  first_attempt_at: timer.firstAttemptAt ?? null,
  created_at: timer.createdAt,
  updated_at: timer.updatedAt,
  executed_at: timer.executedAt ?? null,
  last_error: timer.lastError ?? null
})

/**
 * The columns a firing update sets: the row becomes what `applyFiringUpdate`
 * (Firing.ts) makes of the timer, so every field it drops is set to NULL here.
 */
export const firingColumns = (update: FiringUpdate, now: number): Record<string, string | number | null> => {
  switch (update._tag) {
    case "Fired":
      return {
        state: "FIRED",
        attempts: update.attempts,
        executed_at: update.executedAt,
        first_attempt_at: null,
        updated_at: now
      }
    case "Rearmed":
      return {
        state: "SCHEDULED",
        attempts: 0,
        execute_at: update.executeAt,
        next_fire_at: update.executeAt,
        firing_id: update.firingId,
        first_attempt_at: null,
        last_error: null,
        executed_at: update.executedAt,
        updated_at: now
      }
    case "RetryScheduled":
      return {
        attempts: update.attempts,
        next_fire_at: update.nextFireAt,
        first_attempt_at: update.firstAttemptAt,
        last_error: update.lastError,
        updated_at: now
      }
    case "Failed":
      return {
        state: "FAILED",
        attempts: update.attempts,
        last_error: update.lastError,
        first_attempt_at: null,
        updated_at: now
      }
  }
}
