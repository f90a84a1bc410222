/**
 * Delivery by publishing to JetStream, for timers whose target is a NATS
 * subject: a command-made timer publishes a DueTimeReached envelope, one made
 * through the HTTP API the same JSON body a webhook gets. The Nats-Msg-Id is
 * the firing id, the same over the firing's attempts and repeats, so JetStream
 * drops a repeat within its duplicate window (a crash between the publish and
 * the store's update). Delivered means JetStream acknowledged the message.
 */
import { headers } from "@nats-io/nats-core"
import { type DeliveryOutcome, DeliveryOutcome as Outcome, type DeliveryRequest, firingBody, makeDueTimeReached } from "@timer/core"
import { Clock, Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { NatsConnection } from "./NatsConnection.js"
import { natsCall } from "./NatsError.js"

/** The message a firing publishes. */
export const natsMessageOf = (request: DeliveryRequest, now: number, eventId: string): unknown =>
  request.timer.origin === undefined
    ? firingBody(request)
    : makeDueTimeReached(request.timer.origin, { id: eventId, reachedAt: request.firedAt, now })

/** Makes the publisher of firings over the connection in context. */
export const makeNatsDelivery = Effect.gen(function*() {
  const { js, settings } = yield* NatsConnection
  const encoder = new TextEncoder()
  const deliver = (request: DeliveryRequest): Effect.Effect<DeliveryOutcome> =>
    Effect.gen(function*() {
      const subject = request.timer.natsSubject
      if (subject === undefined) return Outcome.permanent("the timer has no NATS subject")
      const now = yield* Clock.currentTimeMillis
      const message = natsMessageOf(request, now, uuidv7({ msecs: now }))
      const hdrs = headers()
      hdrs.set("content-type", "application/json")
      hdrs.set("x-timer-firing-id", request.timer.firingId)
      hdrs.set("x-timer-attempt", String(request.attempt))
      hdrs.set("x-timer-instance", request.instanceId)
      return yield* natsCall(`publish to ${subject}`, () =>
        js.publish(subject, encoder.encode(JSON.stringify(message)), {
          msgID: request.timer.firingId,
          headers: hdrs,
          timeout: settings.publishTimeoutMs
        })).pipe(
          Effect.tap((ack) =>
            ack.duplicate
              ? Effect.logInfo("JetStream dropped a repeated firing").pipe(
                Effect.annotateLogs({ namespace: request.timer.namespace, timerId: request.timer.id, firingId: request.timer.firingId })
              )
              : Effect.void
          ),
          Effect.as(Outcome.delivered),
          Effect.catchAll((error) => Effect.succeed(Outcome.retryable(error.message)))
        )
    })
  return { deliver }
})
