/**
 * A failed call to NATS, naming what was being done.
 */
import { Effect, Schema } from "effect"

/** A NATS operation that failed (the connection is down, a stream is missing, a timeout). */
export class NatsError extends Schema.TaggedError<NatsError>()("NatsError", {
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message() {
    return `NATS ${this.operation} failed: ${this.cause instanceof Error ? this.cause.message : String(this.cause)}`
  }
}

/** Runs a promise-returning NATS call; a rejection becomes a NatsError naming `operation`. */
export const natsCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, NatsError> =>
  Effect.tryPromise({ try: call, catch: (cause) => new NatsError({ operation, cause }) })
