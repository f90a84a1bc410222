/**
 * The API's handlers: each decodes its body, calls the timer service and maps
 * the service's errors to API error bodies.
 */
import { HttpApiBuilder, type HttpServerRequest } from "@effect/platform"
import {
  CreateNamespaceRequest,
  CreateTimerRequest,
  Engine,
  ListTimersRequest,
  NamespaceSelection,
  TimerSelection,
  Timers,
  TimerStore,
  toTimer,
  UpdateTimerRequest
} from "@timer/core"
import { Context, Effect, Layer, type Schema } from "effect"
import { namespaceView, TimerApi } from "./Api.js"
import { toApiError } from "./ApiErrors.js"
import { decodeBody } from "./decodeBody.js"

/** The largest request body accepted, in bytes. */
export class MaxBodyBytes extends Context.Tag("@timer/MaxBodyBytes")<MaxBodyBytes, number>() {
  /** The limit as a layer. */
  static layer = (bytes: number): Layer.Layer<MaxBodyBytes> => Layer.succeed(MaxBodyBytes, bytes)
}

/**
 * A handler that decodes its JSON body with `schema` and runs `f`. Its error
 * bodies are typed loosely: each endpoint declares the ones it can return, and
 * the API encodes any of them with its status.
 */
const withBody = <A, I, B, E extends Parameters<typeof toApiError>[0]>(
  maxBytes: number,
  schema: Schema.Schema<A, I>,
  f: (input: A) => Effect.Effect<B, E>
) =>
({ request }: { readonly request: HttpServerRequest.HttpServerRequest }): Effect.Effect<B, any> =>
  decodeBody(request, schema, maxBytes).pipe(Effect.flatMap(f), Effect.mapError(toApiError))

/** The handlers of timer operations. */
export const TimersHandlers = HttpApiBuilder.group(TimerApi, "timers", (handlers) =>
  Effect.gen(function*() {
    const timers = yield* Timers
    const max = yield* MaxBodyBytes
    return handlers
      .handleRaw("create", withBody(max, CreateTimerRequest, (r) => Effect.map(timers.create(r), toTimer)))
      .handleRaw("get", withBody(max, TimerSelection, (r) => Effect.map(timers.get(r), toTimer)))
      .handleRaw("update", withBody(max, UpdateTimerRequest, (r) => Effect.map(timers.update(r), toTimer)))
      .handleRaw("delete", withBody(max, TimerSelection, timers.delete))
      .handleRaw(
        "list",
        withBody(max, ListTimersRequest, (r) =>
          Effect.map(timers.list(r), (page) => ({
            timers: page.timers.map(toTimer),
            ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor })
          })))
      )
  }))

/** The handlers of namespace operations. */
export const NamespacesHandlers = HttpApiBuilder.group(TimerApi, "namespaces", (handlers) =>
  Effect.gen(function*() {
    const timers = yield* Timers
    const max = yield* MaxBodyBytes
    return handlers
      .handleRaw("create", withBody(max, CreateNamespaceRequest, (r) => Effect.map(timers.createNamespace(r), namespaceView)))
      .handleRaw("get", withBody(max, NamespaceSelection, (r) => Effect.map(timers.getNamespace(r.name), namespaceView)))
      .handle("list", () =>
        timers.listNamespaces.pipe(
          Effect.map((namespaces) => ({ namespaces: namespaces.map(namespaceView) })),
          Effect.mapError(() => ({ error: "INTERNAL_ERROR" as const, message: "the store failed" }))
        ))
  }))

/** Liveness and readiness. */
export const HealthHandlers = HttpApiBuilder.group(TimerApi, "health", (handlers) =>
  Effect.gen(function*() {
    const store = yield* TimerStore
    const engine = yield* Engine
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.gen(function*() {
          yield* store.ping.pipe(
            Effect.mapError((error) => ({ status: "not ready" as const, reason: `store unreachable: ${error.message}` }))
          )
          if (!(yield* engine.ready)) return yield* Effect.fail({ status: "not ready" as const, reason: "shards not claimed yet" })
          const shards = (yield* engine.ownedShards).length
          return { status: "ready" as const, shards }
        }))
  }))

/** All handlers. */
export const ApiHandlers = Layer.mergeAll(TimersHandlers, NamespacesHandlers, HealthHandlers)
