/**
 * Commands from JetStream: a durable pull consumer on the commands stream,
 * read in batches. A batch's commands are written in one store transaction
 * and acknowledged only after it commits; a store failure leaves them to be
 * redelivered. A message that is not a command (not JSON, an unknown type, a
 * failed schema) is republished to the dead-letter subject with its original
 * bytes and the reason in headers, then terminated; the consumer goes on.
 */
import { AckPolicy, type JetStreamManager, type JsMsg } from "@nats-io/jetstream"
import { headers } from "@nats-io/nats-core"
import { CommandIntake, decodeCommandMessage, type Rejection, type TimerCommand } from "@timer/core"
import { Chunk, Deferred, Duration, Effect, Either, Queue, Schedule, Stream } from "effect"
import { NatsConnection } from "./NatsConnection.js"
import { NatsError, natsCall } from "./NatsError.js"
import type { NatsSettings } from "./NatsSettings.js"

/** The headers of a dead-lettered command. */
export const DLQ_HEADERS = {
  reason: "timer-dlq-reason",
  message: "timer-dlq-message",
  subject: "timer-dlq-subject",
  stream: "timer-dlq-stream",
  sequence: "timer-dlq-sequence"
} as const

/** How long a command whose batch could not be written waits before it is redelivered. */
const REDELIVERY_DELAY_MS = 1_000

/** Creates the durable consumer when it does not exist. */
const ensureConsumer = (jsm: JetStreamManager, settings: NatsSettings) =>
  natsCall("consumer info", () => jsm.consumers.info(settings.commandsStream, settings.consumerName)).pipe(
    Effect.catchAll(() =>
      natsCall("create consumer", () =>
        jsm.consumers.add(settings.commandsStream, {
          durable_name: settings.consumerName,
          ack_policy: AckPolicy.Explicit,
          ack_wait: 30_000_000_000,
          max_ack_pending: 10_000
        }))
    ),
    Effect.asVoid
  )

/** Reads and applies commands until the scope closes; restarts itself after a NATS failure. */
export const runCommandConsumer = Effect.gen(function*() {
  const { js, jsm, settings } = yield* NatsConnection
  const intake = yield* CommandIntake

  const deadLetter = (message: JsMsg, rejection: Rejection) => {
    const hdrs = headers()
    hdrs.set(DLQ_HEADERS.reason, rejection.reason)
    hdrs.set(DLQ_HEADERS.message, rejection.message.replace(/[\r\n]+/g, " ").slice(0, 2_000))
    hdrs.set(DLQ_HEADERS.subject, message.subject)
    hdrs.set(DLQ_HEADERS.stream, settings.commandsStream)
    hdrs.set(DLQ_HEADERS.sequence, String(message.seq))
    return natsCall("publish a dead letter", () =>
      js.publish(settings.dlqSubject, message.data, {
        headers: hdrs,
        msgID: `${settings.commandsStream}-${message.seq}`,
        timeout: settings.publishTimeoutMs
      })).pipe(
        Effect.zipRight(Effect.sync(() => message.term(rejection.reason))),
        Effect.zipRight(Effect.logWarning("a command went to the dead-letter subject").pipe(
          Effect.annotateLogs({ reason: rejection.reason, problem: rejection.message, sequence: message.seq })
        )),
        // Not lost: it comes back and is dead-lettered again.
        Effect.catchAll((error) =>
          Effect.logError("could not dead-letter a command; it will be redelivered", error).pipe(
            Effect.zipRight(Effect.sync(() => message.nak(REDELIVERY_DELAY_MS)))
          )
        )
      )
  }

  const handleBatch = (messages: ReadonlyArray<JsMsg>) =>
    Effect.gen(function*() {
      const decoded = messages.map((message) => ({ message, command: decodeCommandMessage(message.data) }))
      const good = decoded.flatMap(({ command, message }) => (Either.isRight(command) ? [{ message, command: command.right }] : []))
      for (const { command, message } of decoded) if (Either.isLeft(command)) yield* deadLetter(message, command.left)
      if (good.length === 0) return
      const applied = yield* Effect.either(
        intake.apply(good.map((g): TimerCommand => g.command), { natsSubject: settings.eventsSubject })
      )
      if (Either.isLeft(applied)) {
        yield* Effect.logError("could not write a batch of commands; they will be redelivered", applied.left)
        for (const { message } of good) message.nak(REDELIVERY_DELAY_MS)
        return
      }
      for (const [i, outcome] of applied.right.entries()) {
        if (Either.isLeft(outcome)) yield* deadLetter(good[i]!.message, outcome.left)
        else good[i]!.message.ack()
      }
    })

  const consumeOnce = Effect.gen(function*() {
    yield* ensureConsumer(jsm, settings)
    const consumer = yield* natsCall("get consumer", () => js.consumers.get(settings.commandsStream, settings.consumerName))
    // Closing the iterator ends the pump below. It is not awaited: its promise settles only once a
    // pending pull does, which would hold up shutdown.
    const messages = yield* Effect.acquireRelease(
      natsCall("consume", () => consumer.consume({ max_messages: settings.batchSize * 2 })),
      (iterator) => Effect.sync(() => void iterator.close().catch(() => undefined))
    )
    // The iterator is pumped by a promise into a queue (the consumer holds at most max_messages),
    // so that stopping never waits for NATS.
    const queue = yield* Effect.acquireRelease(Queue.unbounded<JsMsg>(), Queue.shutdown)
    const ended = yield* Deferred.make<never, NatsError>()
    yield* Effect.sync(() => {
      void (async () => {
        try {
          for await (const message of messages) Queue.unsafeOffer(queue, message)
          Deferred.unsafeDone(ended, Effect.fail(new NatsError({ operation: "consume", cause: "the consumer stopped" })))
        } catch (cause) {
          Deferred.unsafeDone(ended, Effect.fail(new NatsError({ operation: "consume", cause })))
        }
      })()
    })
    return yield* Effect.raceFirst(
      Stream.fromQueue(queue).pipe(
        // What is there now, up to a batch, without waiting for more.
        Stream.groupedWithin(settings.batchSize, Duration.millis(5)),
        Stream.mapEffect((chunk) => handleBatch(Chunk.toReadonlyArray(chunk))),
        Stream.runDrain,
        Effect.zipRight(Effect.fail(new NatsError({ operation: "consume", cause: "the queue closed" })))
      ),
      Deferred.await(ended)
    )
  }).pipe(Effect.scoped)

  yield* Effect.logInfo("reading commands from NATS").pipe(
    Effect.annotateLogs({ stream: settings.commandsStream, consumer: settings.consumerName })
  )
  return yield* consumeOnce.pipe(
    Effect.tapError((error) => Effect.logWarning("the NATS command consumer stopped; starting it again", error)),
    Effect.retry(Schedule.exponential(Duration.millis(200)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(5))))),
    Effect.orDie
  )
})
