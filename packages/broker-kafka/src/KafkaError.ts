/**
 * A failed call to Kafka, naming what was being done.
 */
import { Effect, Schema } from "effect"

/** A Kafka operation that failed (no broker reachable, a timeout, a refused request). */
export class KafkaError extends Schema.TaggedError<KafkaError>()("KafkaError", {
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message() {
    return `Kafka ${this.operation} failed: ${this.cause instanceof Error ? this.cause.message : String(this.cause)}`
  }
}

/** Runs a promise-returning Kafka call; a rejection becomes a KafkaError naming `operation`. */
export const kafkaCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, KafkaError> =>
  Effect.tryPromise({ try: call, catch: (cause) => new KafkaError({ operation, cause }) })
