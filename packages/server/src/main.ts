#!/usr/bin/env node
/**
 * The server's entry point: reads the settings, composes the layers once
 * (see ServerLayer.ts) and runs until SIGTERM or SIGINT.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Logger } from "effect"
import { ServerConfig } from "./ServerConfig.js"
import { loggerFor, makeServerLayer } from "./ServerLayer.js"

const main = Effect.gen(function*() {
  const settings = yield* ServerConfig
  yield* Effect.logInfo("starting").pipe(
    Effect.annotateLogs({ instanceId: settings.instanceId, db: settings.db.filename, port: settings.port })
  )
  return yield* Layer.launch(makeServerLayer(settings)).pipe(Effect.provide(loggerFor(settings)))
}).pipe(
  Effect.tapErrorCause((cause) => Effect.logError("the server stopped on an error", cause))
)

NodeRuntime.runMain(main.pipe(Effect.provide(Logger.json)), { disablePrettyLogger: true })
