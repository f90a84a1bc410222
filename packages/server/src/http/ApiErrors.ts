/**
 * The API's error bodies {error, message, details?} with their status codes,
 * and the mapping from the service's errors to them.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import type {
  InvalidInput,
  NamespaceExists,
  NamespaceNotFound,
  PayloadTooLarge,
  StoreError,
  TimerNotFound,
  TimerNotPending
} from "@timer/core"

const errorBody = <Code extends string>(code: Code, status: number, description: string) =>
  Schema.Struct({
    error: Schema.Literal(code),
    message: Schema.String,
    details: Schema.optional(Schema.Unknown)
  }).annotations({ identifier: code, description, ...HttpApiSchema.annotations({ status }) })

/** 400: the request is malformed; details list each bad field and why. */
export const InvalidInputBody = errorBody("INVALID_INPUT", 400, "The request is malformed; details name each bad field")
/** 404: the namespace does not exist. */
export const NamespaceNotFoundBody = errorBody("NAMESPACE_NOT_FOUND", 404, "The namespace does not exist")
/** 404: the timer does not exist. */
export const TimerNotFoundBody = errorBody("TIMER_NOT_FOUND", 404, "The timer does not exist")
/** 409: the timer is not SCHEDULED. */
export const TimerNotPendingBody = errorBody("TIMER_NOT_PENDING", 409, "The timer is not SCHEDULED")
/** 409: the namespace exists with another numShards. */
export const NamespaceExistsBody = errorBody("NAMESPACE_EXISTS", 409, "The namespace exists with another numShards")
/** 413: the payload or the body is too large. */
export const PayloadTooLargeBody = errorBody("PAYLOAD_TOO_LARGE", 413, "The payload or the request body is too large")
/** 500: the service failed; the request may not have been applied. */
export const InternalErrorBody = errorBody("INTERNAL_ERROR", 500, "The service failed")

/** Any error body. */
export type ApiErrorBody = {
  readonly error: string
  readonly message: string
  readonly details?: unknown
}

type Known =
  | InvalidInput
  | NamespaceNotFound
  | NamespaceExists
  | TimerNotFound
  | TimerNotPending
  | PayloadTooLarge
  | StoreError

/** The error bodies a handler can fail with. */
export type HandlerError =
  | typeof InvalidInputBody.Type
  | typeof NamespaceNotFoundBody.Type
  | typeof TimerNotFoundBody.Type
  | typeof TimerNotPendingBody.Type
  | typeof NamespaceExistsBody.Type
  | typeof PayloadTooLargeBody.Type
  | typeof InternalErrorBody.Type

/** Maps a service error to its API body. */
export const toApiError = (error: Known): HandlerError => {
  switch (error._tag) {
    case "InvalidInput":
      return { error: "INVALID_INPUT", message: error.message, details: error.details.map((d) => ({ ...d })) }
    case "NamespaceNotFound":
      return { error: "NAMESPACE_NOT_FOUND", message: error.message, details: { namespace: error.namespace } }
    case "NamespaceExists":
      return {
        error: "NAMESPACE_EXISTS",
        message: error.message,
        details: { namespace: error.namespace, numShards: error.numShards, requestedNumShards: error.requestedNumShards }
      }
    case "TimerNotFound":
      return { error: "TIMER_NOT_FOUND", message: error.message, details: { namespace: error.namespace, timerId: error.timerId } }
    case "TimerNotPending":
      return {
        error: "TIMER_NOT_PENDING",
        message: error.message,
        details: { namespace: error.namespace, timerId: error.timerId, state: error.state }
      }
    case "PayloadTooLarge":
      return {
        error: "PAYLOAD_TOO_LARGE",
        message: error.message,
        details: { subject: error.subject, sizeBytes: error.sizeBytes, limitBytes: error.limitBytes }
      }
    case "StoreError":
      return { error: "INTERNAL_ERROR", message: "the store failed; the request may not have been applied" }
  }
}
