#!/usr/bin/env node
/**
 * The server's entry point and CLI: reads the settings, composes the layers
 * once (see ServerLayer.ts) and runs until SIGTERM or SIGINT.
 *
 *   timer-server                 start the service
 *   timer-server --print-config  print the resolved settings as JSON and exit
 *   timer-server --help          print this usage and exit
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Logger } from "effect"
import { describeDb, describeSettings, ServerConfig } from "./ServerConfig.js"
import { loggerFor, makeServerLayer } from "./ServerLayer.js"

const USAGE = `Usage: timer-server [--print-config | --help]

Starts the durable timer service. Every setting comes from a TIMER_* environment
variable with a default (TIMER_HTTP_PORT=8080, TIMER_DB_URL=sqlite:./data/timers.db, ...);
the README's "Configuration" table lists them all.

  --print-config   print the resolved settings as JSON and exit
  --help           print this text and exit`

const serve = Effect.gen(function*() {
  const settings = yield* ServerConfig
  return yield* Effect.logInfo("starting").pipe(
    Effect.annotateLogs({ instanceId: settings.instanceId, db: describeDb(settings.db), port: settings.port }),
    Effect.zipRight(Layer.launch(makeServerLayer(settings))),
    Effect.provide(loggerFor(settings)),
    // No tracer is exported, so spans (one per SQL statement and per webhook call, with
    // propagation headers) are pure cost: about a tenth of the CPU of a firing (ADR 0007).
    Effect.withTracerEnabled(false)
  )
})

const main = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  if (args.includes("--help") || args.includes("-h")) return Console.log(USAGE)
  if (args.includes("--print-config")) {
    return Effect.flatMap(ServerConfig, (settings) =>
      Console.log(JSON.stringify(describeSettings(settings), null, 2)))
  }
  const unknown = args.filter((arg) => arg.startsWith("-"))
  if (unknown.length > 0) return Effect.zipRight(Console.error(USAGE), Effect.fail(`unknown option ${unknown[0]}`))
  return serve
}

NodeRuntime.runMain(
  main(process.argv.slice(2)).pipe(
    Effect.tapErrorCause((cause) => Effect.logError("the server stopped on an error", cause)),
    Effect.provide(Logger.json)
  ),
  { disablePrettyLogger: true, disableErrorReporting: true }
)
