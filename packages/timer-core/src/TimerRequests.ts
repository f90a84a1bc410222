/**
 * The requests the timer service takes, whichever way they arrive (HTTP or a broker).
 */
import { Schema } from "effect"
import { NamespaceName, NumShards } from "./Namespace.js"
import { RetryPolicy } from "./RetryPolicy.js"
import { CallbackTimeoutSeconds, CallbackUrl, KafkaTopic, NatsSubject, Payload, TimerId, TimerState } from "./Timer.js"
import { Timestamp } from "./Timestamp.js"

const TARGETS = ["callbackUrl", "natsSubject", "kafkaTopic"] as const

/** A request names at most one target; `required`: exactly one. */
const oneTarget = (required: boolean) =>
(request: { readonly callbackUrl?: string | undefined; readonly natsSubject?: string | undefined; readonly kafkaTopic?: string | undefined }) => {
  const given = TARGETS.filter((target) => request[target] !== undefined)
  if (given.length > 1) {
    return { path: [given[1]!], message: `cannot be given with ${given[0]}: a timer has one target` }
  }
  if (required && given.length === 0) {
    return { path: ["callbackUrl"], message: "is required (or natsSubject, or kafkaTopic: a timer has one target)" }
  }
  return true
}

/** Create a timer, or replace the one with the same id (an upsert); its target is a callbackUrl, a natsSubject or a kafkaTopic. */
export const CreateTimerRequest = Schema.Struct({
  namespace: NamespaceName,
  id: TimerId,
  executeAt: Timestamp,
  callbackUrl: Schema.optional(CallbackUrl),
  natsSubject: Schema.optional(NatsSubject),
  kafkaTopic: Schema.optional(KafkaTopic),
  payload: Schema.optional(Payload),
  retryPolicy: Schema.optional(RetryPolicy),
  callbackTimeoutSeconds: Schema.optional(CallbackTimeoutSeconds)
}).pipe(Schema.filter(oneTarget(true))).annotations({ identifier: "CreateTimerRequest" })

/** A decoded create request. */
export type CreateTimerRequest = typeof CreateTimerRequest.Type

/** Names one timer. */
export const TimerSelection = Schema.Struct({
  namespace: NamespaceName,
  timerId: TimerId
}).annotations({ identifier: "TimerSelection" })

/** A decoded timer selection. */
export type TimerSelection = typeof TimerSelection.Type

/** Change fields of a SCHEDULED timer; fields left out keep their values. A new target replaces the old one. */
export const UpdateTimerRequest = Schema.Struct({
  namespace: NamespaceName,
  timerId: TimerId,
  executeAt: Schema.optional(Timestamp),
  callbackUrl: Schema.optional(CallbackUrl),
  natsSubject: Schema.optional(NatsSubject),
  kafkaTopic: Schema.optional(KafkaTopic),
  payload: Schema.optional(Payload),
  retryPolicy: Schema.optional(RetryPolicy),
  callbackTimeoutSeconds: Schema.optional(CallbackTimeoutSeconds)
}).pipe(Schema.filter(oneTarget(false))).annotations({ identifier: "UpdateTimerRequest" })

/** A decoded update request. */
export type UpdateTimerRequest = typeof UpdateTimerRequest.Type

/** The largest page of a list. */
export const MAX_LIST_LIMIT = 1000

/** The page size of a list that gives none. */
export const DEFAULT_LIST_LIMIT = 100

/** List a namespace's timers, ordered by executeAt then id. */
export const ListTimersRequest = Schema.Struct({
  namespace: NamespaceName,
  state: Schema.optional(TimerState),
  executeAtFrom: Schema.optional(Timestamp.annotations({ description: "Inclusive lower bound on executeAt" })),
  executeAtTo: Schema.optional(Timestamp.annotations({ description: "Exclusive upper bound on executeAt" })),
  limit: Schema.optional(
    Schema.Number.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.between(1, MAX_LIST_LIMIT, { message: () => `must be between 1 and ${MAX_LIST_LIMIT}` })
    )
  ),
  cursor: Schema.optional(Schema.String.annotations({ description: "nextCursor of the previous page" }))
}).annotations({ identifier: "ListTimersRequest" })

/** A decoded list request. */
export type ListTimersRequest = typeof ListTimersRequest.Type

/** Create a namespace; creating one that exists with the same numShards succeeds. */
export const CreateNamespaceRequest = Schema.Struct({
  name: NamespaceName,
  numShards: NumShards
}).annotations({ identifier: "CreateNamespaceRequest" })

/** A decoded namespace creation. */
export type CreateNamespaceRequest = typeof CreateNamespaceRequest.Type

/** Names one namespace. */
export const NamespaceSelection = Schema.Struct({
  name: NamespaceName
}).annotations({ identifier: "NamespaceSelection" })
