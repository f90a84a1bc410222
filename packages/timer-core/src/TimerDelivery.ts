/**
 * The delivery port: carries one firing of a timer to its target (a webhook
 * or a broker subject) and says how it went.
 */
import { Context, Effect, Layer } from "effect"
import type { TimerRecord } from "./Timer.js"
import { formatTimestamp } from "./Timestamp.js"

/** One attempt at delivering one firing. */
export interface DeliveryRequest {
  readonly timer: TimerRecord
  /** 1 for the first attempt of this firing. */
  readonly attempt: number
  /** When this attempt started, epoch milliseconds. */
  readonly firedAt: number
  /** The instance that fires it (the owner of the timer's shard). */
  readonly instanceId: string
}

/**
 * The JSON body of a firing sent to a webhook, or published to a NATS subject
 * by a timer made through the HTTP API.
 */
export const firingBody = (request: DeliveryRequest) => ({
  namespace: request.timer.namespace,
  timerId: request.timer.id,
  executeAt: formatTimestamp(request.timer.executeAt),
  payload: request.timer.payload ?? null,
  attempt: request.attempt,
  firedAt: formatTimestamp(request.firedAt)
})

/**
 * How an attempt went:
 * - Delivered: the target took it.
 * - Reschedule: the target asks for another firing at `nextExecuteAt`.
 * - Retryable: it failed and may succeed later (Retry-After in ms when given).
 * - Permanent: it failed and will not succeed by retrying.
 */
export type DeliveryOutcome =
  | { readonly _tag: "Delivered" }
  | { readonly _tag: "Reschedule"; readonly nextExecuteAt: number }
  | { readonly _tag: "Retryable"; readonly error: string; readonly retryAfterMs?: number | undefined }
  | { readonly _tag: "Permanent"; readonly error: string }

/** Constructors of delivery outcomes. */
export const DeliveryOutcome = {
  delivered: { _tag: "Delivered" } as DeliveryOutcome,
  reschedule: (nextExecuteAt: number): DeliveryOutcome => ({ _tag: "Reschedule", nextExecuteAt }),
  retryable: (error: string, retryAfterMs?: number): DeliveryOutcome => ({ _tag: "Retryable", error, retryAfterMs }),
  permanent: (error: string): DeliveryOutcome => ({ _tag: "Permanent", error })
}

/** Delivers firings. Never fails: every problem is an outcome. */
export class TimerDelivery extends Context.Tag("@timer/TimerDelivery")<TimerDelivery, {
  readonly deliver: (request: DeliveryRequest) => Effect.Effect<DeliveryOutcome>
}>() {}

/**
 * A delivery that sends the timers `handles` picks through the delivery `make`
 * builds, and every other timer through `others` (how broker adapters stand in
 * front of webhooks).
 */
export const layerDeliveryRoute = <E1, R1, E2, R2>(
  handles: (timer: TimerRecord) => boolean,
  make: Effect.Effect<Context.Tag.Service<TimerDelivery>, E1, R1>,
  others: Layer.Layer<TimerDelivery, E2, R2>
): Layer.Layer<TimerDelivery, E1 | E2, Exclude<R1, TimerDelivery> | R2> =>
  Layer.effect(
    TimerDelivery,
    Effect.gen(function*() {
      const routed = yield* make
      const fallback = yield* TimerDelivery
      return TimerDelivery.of({
        deliver: (request) => (handles(request.timer) ? routed.deliver(request) : fallback.deliver(request))
      })
    })
  ).pipe(Layer.provide(others))

