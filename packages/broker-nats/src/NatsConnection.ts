/**
 * The connection to NATS and its JetStream clients, for the life of a scope.
 * It reconnects by itself for as long as the service runs; the streams of the
 * contract are created when missing.
 */
import { jetstream, type JetStreamClient, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection as Connection } from "@nats-io/nats-core"
import { connect } from "@nats-io/transport-node"
import { Context, Duration, Effect, Layer } from "effect"
import { type NatsError, natsCall } from "./NatsError.js"
import type { NatsSettings } from "./NatsSettings.js"

/** The open connection. */
export class NatsConnection extends Context.Tag("@timer/NatsConnection")<NatsConnection, {
  readonly connection: Connection
  readonly js: JetStreamClient
  readonly jsm: JetStreamManager
  readonly settings: NatsSettings
}>() {
  /** Connects, creates the missing streams, and drains the connection when the scope closes. */
  static layer = (settings: NatsSettings): Layer.Layer<NatsConnection, NatsError> => Layer.scoped(NatsConnection, make(settings))
}

const make = (settings: NatsSettings) =>
  Effect.gen(function*() {
    const connection = yield* Effect.acquireRelease(
      natsCall("connect", () =>
        connect({
          servers: settings.url.split(",").map((server) => server.trim()),
          name: "durable-timers",
          reconnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500
        })),
      (nc) =>
        natsCall("drain", () => nc.drain()).pipe(
          Effect.timeout(Duration.seconds(5)),
          Effect.catchAll((error) => Effect.logWarning("could not drain the NATS connection", error))
        )
    )
    const jsm = yield* natsCall("jetstream manager", () => jetstreamManager(connection))
    const js = jetstream(connection)
    yield* ensureStream(jsm, settings.commandsStream, settings.commandsSubject)
    yield* ensureStream(jsm, settings.dlqStream, settings.dlqSubject)
    yield* ensureStream(jsm, settings.eventsStream, settings.eventsSubject)
    yield* Effect.logInfo("connected to NATS").pipe(Effect.annotateLogs({ server: connection.getServer() }))
    return NatsConnection.of({ connection, js, jsm, settings })
  })

/** Creates the stream when it does not exist (a stream that exists is left as it is). */
const ensureStream = (jsm: JetStreamManager, name: string, subject: string) =>
  natsCall(`stream info ${name}`, () => jsm.streams.info(name)).pipe(
    Effect.asVoid,
    Effect.catchAll(() =>
      natsCall(`create stream ${name}`, () => jsm.streams.add({ name, subjects: [subject] })).pipe(
        Effect.zipRight(Effect.logInfo("created a NATS stream").pipe(Effect.annotateLogs({ stream: name, subject }))),
        // Another instance may have created it meanwhile.
        Effect.catchAll((error) => Effect.orElse(natsCall(`stream info ${name}`, () => jsm.streams.info(name)), () => Effect.fail(error)))
      )
    ),
    Effect.asVoid
  )
