/**
 * The HTTP server: the API, its OpenAPI document at /api/v1/openapi.json,
 * interactive docs at /docs, and JSON errors for unknown routes and defects.
 */
import { HttpApiBuilder, HttpApiScalar, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { createServer } from "node:http"
import { TimerApi } from "./Api.js"
import { ApiHandlers, MaxBodyBytes } from "./Handlers.js"

/** Turns unknown routes into 404 and defects into 500, both as JSON error bodies. */
const jsonFallbacks = HttpApiBuilder.middleware((app) =>
  app.pipe(
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some" && (failure.value as { _tag?: string })?._tag === "RouteNotFound") {
        return HttpServerResponse.unsafeJson({ error: "NOT_FOUND", message: "no such route" }, { status: 404 })
      }
      if (Cause.isFailType(cause) || failure._tag === "Some") return Effect.failCause(cause)
      return Effect.logError("request failed", cause).pipe(
        Effect.as(HttpServerResponse.unsafeJson({ error: "INTERNAL_ERROR", message: "internal error" }, { status: 500 }))
      )
    })
  )
)

/** Settings of the HTTP server. */
export interface HttpServerOptions {
  readonly port: number
  readonly host: string
  readonly maxBodyBytes: number
}

/**
 * The API served over Node's HTTP server. The bound server stays in the
 * output, so a caller that asked for port 0 can read the address it got.
 */
export const layerHttpServer = (options: HttpServerOptions) =>
  HttpApiBuilder.serve().pipe(
    Layer.provide(HttpApiScalar.layer({ path: "/docs" })),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
    Layer.provide(jsonFallbacks),
    Layer.provide(HttpApiBuilder.api(TimerApi).pipe(Layer.provide(ApiHandlers))),
    Layer.provide(MaxBodyBytes.layer(options.maxBodyBytes)),
    HttpServer.withLogAddress,
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host }))
  )
