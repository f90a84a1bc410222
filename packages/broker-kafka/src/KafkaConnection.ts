/**
 * The Kafka client and its producer, for the life of a scope. Topics are not
 * created here: Kafka creates them on first use where the cluster allows it,
 * and production clusters usually have them made by their operators.
 */
import { Context, Duration, Effect, Layer, Runtime } from "effect"
import { Kafka, logLevel, Partitioners, type Producer } from "kafkajs"
import { type KafkaError, kafkaCall } from "./KafkaError.js"
import type { KafkaSettings } from "./KafkaSettings.js"

/** The connected client and producer. */
export class KafkaConnection extends Context.Tag("@timer/KafkaConnection")<KafkaConnection, {
  readonly kafka: Kafka
  readonly producer: Producer
  readonly settings: KafkaSettings
}>() {
  /** Connects the producer; disconnects it when the scope closes. */
  static layer = (settings: KafkaSettings): Layer.Layer<KafkaConnection, KafkaError> => Layer.scoped(KafkaConnection, make(settings))
}

/** kafkajs logs through the service's logger (its format and level), warnings and errors only. */
const logCreatorFor = (runtime: Runtime.Runtime<never>) => () =>
({ namespace, label, log }: { namespace: string; label: string; log: { message: string } }) => {
  const line = `kafkajs ${namespace}: ${log.message}`
  Runtime.runFork(runtime)(label === "ERROR" ? Effect.logError(line) : Effect.logWarning(line))
}

const make = (settings: KafkaSettings) =>
  Effect.gen(function*() {
    const logCreator = logCreatorFor(yield* Effect.runtime<never>())
    const kafka = new Kafka({
      clientId: settings.clientId,
      brokers: [...settings.brokers],
      logLevel: logLevel.WARN,
      logCreator,
      retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 5_000 }
    })
    const producer = kafka.producer({
      idempotent: settings.idempotent,
      ...(settings.idempotent ? { maxInFlightRequests: 1 } : {}),
      createPartitioner: Partitioners.DefaultPartitioner,
      allowAutoTopicCreation: true
    })
    yield* Effect.acquireRelease(
      kafkaCall("connect the producer", () => producer.connect()),
      () =>
        kafkaCall("disconnect the producer", () => producer.disconnect()).pipe(
          Effect.timeout(Duration.seconds(5)),
          Effect.catchAll((error) => Effect.logWarning("could not disconnect from Kafka", error))
        )
    )
    yield* Effect.logInfo("connected to Kafka").pipe(Effect.annotateLogs({ brokers: settings.brokers.join(",") }))
    return KafkaConnection.of({ kafka, producer, settings })
  })
