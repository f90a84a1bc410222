/**
 * The HTTP API, compatible with the Go seed's: base path /api/v1, every call a
 * POST with a JSON body. The OpenAPI document is generated from this definition.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import {
  CreateNamespaceRequest,
  CreateTimerRequest,
  ListTimersRequest,
  Namespace,
  NamespaceSelection,
  Timer,
  TimerSelection,
  UpdateTimerRequest
} from "@timer/core"
import { Schema } from "effect"
import {
  InternalErrorBody,
  InvalidInputBody,
  NamespaceExistsBody,
  NamespaceNotFoundBody,
  PayloadTooLargeBody,
  TimerNotFoundBody,
  TimerNotPendingBody
} from "./ApiErrors.js"

/** A namespace as returned. */
export const NamespaceView = Schema.Struct({
  name: Schema.String,
  numShards: Schema.Number,
  createdAt: Schema.String
}).annotations({ identifier: "NamespaceView" })

/** The view of a namespace. */
export const namespaceView = (namespace: Namespace) => ({
  name: namespace.name,
  numShards: namespace.numShards,
  createdAt: new Date(namespace.createdAt).toISOString()
})

/** A page of timers. */
export const TimerPageView = Schema.Struct({
  timers: Schema.Array(Timer),
  nextCursor: Schema.optional(Schema.String)
}).annotations({ identifier: "TimerPage" })

/** Timer operations. */
export class TimersGroup extends HttpApiGroup.make("timers")
  .add(
    HttpApiEndpoint.post("create", "/timers/create")
      .setPayload(CreateTimerRequest)
      .addSuccess(Timer)
      .addError(NamespaceNotFoundBody)
      .addError(PayloadTooLargeBody)
      .annotate(OpenApi.Summary, "Create a timer, or replace the one with the same id")
  )
  .add(
    HttpApiEndpoint.post("get", "/timers/get")
      .setPayload(TimerSelection)
      .addSuccess(Timer)
      .addError(NamespaceNotFoundBody)
      .addError(TimerNotFoundBody)
      .annotate(OpenApi.Summary, "Read a timer")
  )
  .add(
    HttpApiEndpoint.post("update", "/timers/update")
      .setPayload(UpdateTimerRequest)
      .addSuccess(Timer)
      .addError(NamespaceNotFoundBody)
      .addError(TimerNotFoundBody)
      .addError(TimerNotPendingBody)
      .addError(PayloadTooLargeBody)
      .annotate(OpenApi.Summary, "Change a SCHEDULED timer")
  )
  .add(
    HttpApiEndpoint.post("delete", "/timers/delete")
      .setPayload(TimerSelection)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(NamespaceNotFoundBody)
      .addError(TimerNotFoundBody)
      .annotate(OpenApi.Summary, "Delete a timer")
  )
  .add(
    HttpApiEndpoint.post("list", "/timers/list")
      .setPayload(ListTimersRequest)
      .addSuccess(TimerPageView)
      .addError(NamespaceNotFoundBody)
      .annotate(OpenApi.Summary, "List a namespace's timers by executeAt then id")
  )
  .addError(InvalidInputBody)
  .addError(PayloadTooLargeBody)
  .addError(InternalErrorBody)
  .prefix("/api/v1")
{}

/** Namespace operations. */
export class NamespacesGroup extends HttpApiGroup.make("namespaces")
  .add(
    HttpApiEndpoint.post("create", "/namespaces/create")
      .setPayload(CreateNamespaceRequest)
      .addSuccess(NamespaceView)
      .addError(NamespaceExistsBody)
      .annotate(OpenApi.Summary, "Create a namespace; numShards is fixed once created")
  )
  .add(
    HttpApiEndpoint.post("get", "/namespaces/get")
      .setPayload(NamespaceSelection)
      .addSuccess(NamespaceView)
      .addError(NamespaceNotFoundBody)
      .annotate(OpenApi.Summary, "Read a namespace")
  )
  .add(
    HttpApiEndpoint.post("list", "/namespaces/list")
      .addSuccess(Schema.Struct({ namespaces: Schema.Array(NamespaceView) }))
      .annotate(OpenApi.Summary, "List the namespaces")
  )
  .addError(InvalidInputBody)
  .addError(PayloadTooLargeBody)
  .addError(InternalErrorBody)
  .prefix("/api/v1")
{}

/** Liveness and readiness. */
export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .annotate(OpenApi.Summary, "The process is alive")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready"), shards: Schema.Number }))
      .addError(
        Schema.Struct({ status: Schema.Literal("not ready"), reason: Schema.String }).annotations(
          HttpApiSchema.annotations({ status: 503 })
        )
      )
      .annotate(OpenApi.Summary, "The store answers and this instance's shards are claimed")
  )
{}

/** The whole API. */
export class TimerApi extends HttpApi.make("timer-api")
  .add(TimersGroup)
  .add(NamespacesGroup)
  .add(HealthGroup)
  .annotateContext(OpenApi.annotations({
    title: "Durable Timer Service",
    version: "0.1.0",
    description: "Timers that survive crashes: stored durably, fired at least once to a webhook."
  }))
{}
