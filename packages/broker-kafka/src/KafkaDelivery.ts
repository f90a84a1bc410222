/**
 * Delivery by producing to Kafka, for timers whose target is a Kafka topic: a
 * command-made timer produces a DueTimeReached envelope keyed by
 * `${tenantId}.${serviceCallId}` (events of one aggregate stay in one
 * partition, in order), one made through the HTTP API the webhook's JSON body
 * keyed by its namespace and id. Delivered means the brokers acknowledged it
 * (acks from all in-sync replicas).
 */
import { type DeliveryOutcome, DeliveryOutcome as Outcome, type DeliveryRequest, firingBody, makeDueTimeReached } from "@timer/core"
import { Clock, Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { KafkaConnection } from "./KafkaConnection.js"
import { kafkaCall } from "./KafkaError.js"

/** The key and value a firing produces. */
export const kafkaMessageOf = (request: DeliveryRequest, now: number, eventId: string) => {
  const { origin } = request.timer
  return origin === undefined
    ? { key: `${request.timer.namespace}/${request.timer.id}`, value: firingBody(request) }
    : {
      key: `${origin.tenantId}.${origin.serviceCallId}`,
      value: makeDueTimeReached(origin, { id: eventId, reachedAt: request.firedAt, now })
    }
}

/** Makes the producer of firings over the connection in context. */
export const makeKafkaDelivery = Effect.gen(function*() {
  const { producer } = yield* KafkaConnection
  const deliver = (request: DeliveryRequest): Effect.Effect<DeliveryOutcome> =>
    Effect.gen(function*() {
      const topic = request.timer.kafkaTopic
      if (topic === undefined) return Outcome.permanent("the timer has no Kafka topic")
      const now = yield* Clock.currentTimeMillis
      const { key, value } = kafkaMessageOf(request, now, uuidv7({ msecs: now }))
      return yield* kafkaCall(`produce to ${topic}`, () =>
        producer.send({
          topic,
          acks: -1,
          messages: [{
            key,
            value: JSON.stringify(value),
            headers: {
              "content-type": "application/json",
              "x-timer-firing-id": request.timer.firingId,
              "x-timer-attempt": String(request.attempt),
              "x-timer-instance": request.instanceId
            }
          }]
        })).pipe(
          Effect.as(Outcome.delivered),
          Effect.catchAll((error) => Effect.succeed(Outcome.retryable(error.message)))
        )
    })
  return { deliver }
})
