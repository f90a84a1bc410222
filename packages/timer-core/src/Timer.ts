/**
 * The timer: what to call (a webhook, or a NATS subject or Kafka topic to publish to), when,
 * with what, and where it stands.
 */
import { Schema } from "effect"
import { NamespaceName } from "./Namespace.js"
import { RetryPolicy } from "./RetryPolicy.js"
import { Timestamp } from "./Timestamp.js"

/** A timer id: 1 to 255 characters, unique within its namespace. */
export const TimerId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(255, { message: (issue) => `must be at most 255 characters, got ${String(issue.actual).length}` }),
  Schema.annotations({ identifier: "TimerId", description: "1 to 255 characters, unique within the namespace" })
)

const isHttpUrl = (text: string): boolean => {
  if (!URL.canParse(text)) return false
  const url = new URL(text)
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname.length > 0
}

/** The URL a timer's webhook is POSTed to: http or https, at most 2048 characters. */
export const CallbackUrl = Schema.String.pipe(
  Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
  Schema.filter(isHttpUrl, { message: () => "must be an absolute http:// or https:// URL" }),
  Schema.annotations({ identifier: "CallbackUrl", description: "Absolute http or https URL, at most 2048 characters" })
)

const NATS_SUBJECT = /^[^\s.*>]+(\.[^\s.*>]+)*$/

/** A NATS subject a timer's event is published to: dot-separated tokens, no wildcards or spaces, at most 255 characters. */
export const NatsSubject = Schema.String.pipe(
  Schema.maxLength(255, { message: () => "must be at most 255 characters" }),
  Schema.filter((text) => NATS_SUBJECT.test(text), {
    message: () => "must be a NATS subject: dot-separated tokens without spaces or wildcards (* >), such as \"orders.reminders\""
  }),
  Schema.annotations({ identifier: "NatsSubject", description: "NATS subject to publish the firing to, such as \"orders.reminders\"" })
)

const KAFKA_TOPIC = /^[A-Za-z0-9._-]{1,249}$/

/** A Kafka topic a timer's event is published to: 1 to 249 of a-z A-Z 0-9 . _ - (Kafka's own rule). */
export const KafkaTopic = Schema.String.pipe(
  Schema.filter((text) => KAFKA_TOPIC.test(text) && text !== "." && text !== "..", {
    message: () => "must be a Kafka topic: 1 to 249 characters of a-z A-Z 0-9 . _ -, such as \"orders.reminders\""
  }),
  Schema.annotations({ identifier: "KafkaTopic", description: "Kafka topic to publish the firing to" })
)

/** The command that armed a timer made from a broker command (ScheduleTimer), as the API shows it. */
export const TimerOrigin = Schema.Struct({
  tenantId: Schema.String,
  serviceCallId: Schema.String,
  commandId: Schema.String.annotations({ description: "The id of the ScheduleTimer envelope that armed the timer last" }),
  correlationId: Schema.optional(Schema.String)
}).annotations({ identifier: "TimerOrigin", description: "Set on timers made by a ScheduleTimer command" })

/** Seconds a webhook call may take before it counts as a failed attempt: 1 to 60. */
export const CallbackTimeoutSeconds = Schema.Number.pipe(
  Schema.int({ message: () => "must be an integer" }),
  Schema.between(1, 60, { message: () => "must be between 1 and 60" }),
  Schema.annotations({ identifier: "CallbackTimeoutSeconds", description: "1 to 60 seconds (default 10)" })
)

/** Default callback timeout, in seconds. */
export const DEFAULT_CALLBACK_TIMEOUT_SECONDS = 10

/** SCHEDULED: waiting to fire or between retries. FIRED: delivered. FAILED: gave up. */
export const TimerState = Schema.Literal("SCHEDULED", "FIRED", "FAILED").annotations({ identifier: "TimerState" })

/** One of SCHEDULED, FIRED, FAILED. */
export type TimerState = typeof TimerState.Type

/** Any JSON value, carried to the callback unchanged. */
export const Payload = Schema.Unknown.annotations({ identifier: "Payload", description: "Any JSON value" })

/** A timer as the API returns it: it has one target, a callbackUrl (a webhook), a natsSubject or a kafkaTopic. */
export const Timer = Schema.Struct({
  id: TimerId,
  namespace: NamespaceName,
  executeAt: Timestamp,
  callbackUrl: Schema.optional(CallbackUrl),
  natsSubject: Schema.optional(NatsSubject),
  kafkaTopic: Schema.optional(KafkaTopic),
  origin: Schema.optional(TimerOrigin),
  payload: Schema.optional(Payload),
  retryPolicy: Schema.optional(RetryPolicy),
  callbackTimeoutSeconds: CallbackTimeoutSeconds,
  state: TimerState,
  attempts: Schema.Number,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  executedAt: Schema.optional(Timestamp),
  lastError: Schema.optional(Schema.String)
}).annotations({ identifier: "Timer" })

/** A timer as the API returns it, timestamps in epoch milliseconds. */
export type Timer = typeof Timer.Type

/**
 * A timer as stored: the API view plus what the engine needs.
 * `nextFireAt` is when the engine acts next (executeAt, or a retry's time);
 * `firingId` names one arming of the timer and stays the same over its retries.
 */
export interface TimerRecord extends Timer {
  readonly shardId: number
  readonly nextFireAt: number
  readonly firingId: string
  readonly firstAttemptAt?: number
}

/** The API view of a stored timer. */
export const toTimer = (record: TimerRecord): Timer => {
  const { firingId: _f, firstAttemptAt: _a, nextFireAt: _n, shardId: _s, ...timer } = record
  return timer
}

/** Identifies one timer. */
export interface TimerKey {
  readonly namespace: string
  readonly id: string
}
