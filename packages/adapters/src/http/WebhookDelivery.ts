/**
 * Delivery by webhook: POSTs the firing to the timer's callbackUrl and reads
 * the answer. The X-Timer-Firing-Id header stays the same over every attempt
 * of one firing, so a receiver can drop repeats.
 */
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { firingBody, TimerDelivery, DeliveryOutcome, type DeliveryRequest } from "@timer/core"
import { Clock, Duration, Effect, Layer, Stream } from "effect"
import { classifyResponse } from "./callbackResponse.js"

/** The header that names a firing; the same over all its attempts. */
export const FIRING_ID_HEADER = "x-timer-firing-id"

/** The header that names the instance that fired the timer. */
export const INSTANCE_HEADER = "x-timer-instance"

/** The header that numbers the attempt, from 1. */
export const ATTEMPT_HEADER = "x-timer-attempt"

/** The most of a callback's answer that is read; a longer body counts as no CallbackResponse. */
export const MAX_RESPONSE_BODY_BYTES = 64 * 1024

/** Reads a body as text up to MAX_RESPONSE_BODY_BYTES; a longer one reads as "" and the rest is not read. */
const readCapped = <E>(body: Stream.Stream<Uint8Array, E>): Effect.Effect<string, E> =>
  Stream.runFoldWhile(
    body,
    { chunks: [] as Array<Uint8Array>, size: 0 },
    (acc) => acc.size <= MAX_RESPONSE_BODY_BYTES,
    (acc, chunk) => ({ chunks: [...acc.chunks, chunk], size: acc.size + chunk.length })
  ).pipe(
    Effect.map((acc) => (acc.size > MAX_RESPONSE_BODY_BYTES ? "" : Buffer.concat(acc.chunks).toString("utf8")))
  )

/** The answer's body, or "" when it is longer than MAX_RESPONSE_BODY_BYTES (read whole only when its length shows it fits). */
const readAnswer = (response: HttpClientResponse.HttpClientResponse) => {
  const length = Number(response.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(length)) return length > MAX_RESPONSE_BODY_BYTES ? Effect.succeed("") : response.text
  return readCapped(response.stream)
}

/** The JSON body of a webhook call. */
export const webhookBody = firingBody

const describe = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const e = error as { _tag?: string; message?: string; cause?: { message?: string; code?: string; cause?: { code?: string } } }
    const code = e.cause?.code ?? e.cause?.cause?.code
    return [e._tag, e.message, code].filter((part) => part !== undefined && part !== "").join(": ")
  }
  return String(error)
}

const make = Effect.gen(function*() {
  const client = (yield* HttpClient.HttpClient).pipe(HttpClient.followRedirects(5))
  const deliver = (request: DeliveryRequest) =>
    request.timer.callbackUrl === undefined
      ? Effect.succeed(DeliveryOutcome.retryable(
        request.timer.kafkaTopic !== undefined
          ? `the timer publishes to Kafka topic ${JSON.stringify(request.timer.kafkaTopic)}, and this service has no Kafka connection (TIMER_KAFKA_BROKERS)`
          : `the timer publishes to NATS subject ${JSON.stringify(request.timer.natsSubject)}, and this service has no NATS connection (TIMER_NATS_URL)`
      ))
      : post(request, request.timer.callbackUrl)
  const post = (request: DeliveryRequest, callbackUrl: string) =>
    HttpClientRequest.post(callbackUrl).pipe(
      HttpClientRequest.setHeaders({
        [FIRING_ID_HEADER]: request.timer.firingId,
        [ATTEMPT_HEADER]: String(request.attempt),
        [INSTANCE_HEADER]: request.instanceId,
        "user-agent": "durable-timers/0.1"
      }),
      HttpClientRequest.bodyUnsafeJson(webhookBody(request)),
      client.execute,
      Effect.flatMap((response) =>
        Effect.zipWith(
          readAnswer(response).pipe(Effect.orElseSucceed(() => "")),
          Clock.currentTimeMillis,
          (body, now) => classifyResponse(response.status, body, response.headers["retry-after"], now)
        )
      ),
      Effect.scoped,
      Effect.timeoutFail({
        duration: Duration.seconds(request.timer.callbackTimeoutSeconds),
        onTimeout: () => `callback timed out after ${request.timer.callbackTimeoutSeconds}s`
      }),
      Effect.catchAll((error) =>
        Effect.succeed(DeliveryOutcome.retryable(typeof error === "string" ? error : describe(error)))
      )
    )
  return TimerDelivery.of({ deliver })
})

/** Webhook delivery over the HttpClient in context. */
export const layerWebhookDelivery: Layer.Layer<TimerDelivery, never, HttpClient.HttpClient> = Layer.effect(
  TimerDelivery,
  make
)
