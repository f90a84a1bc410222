/**
 * Commands from Kafka: a consumer group on the commands topic (instances
 * share the group, so partitions spread over them). Each fetched batch of a
 * partition is written in one store transaction, and its offsets are
 * committed only after that commits; a store failure is retried, holding the
 * partition, so nothing is skipped. A message that is not a command goes to
 * the dead-letter topic with its original bytes and the reason in headers.
 */
import { CommandIntake, decodeCommandMessage, type Rejection, type TimerCommand } from "@timer/core"
import { Duration, Effect, Either, Runtime, Schedule } from "effect"
import type { EachBatchPayload, KafkaMessage } from "kafkajs"
import { KafkaConnection } from "./KafkaConnection.js"
import { kafkaCall } from "./KafkaError.js"

/** The headers of a dead-lettered command. */
export const KAFKA_DLQ_HEADERS = {
  reason: "timer-dlq-reason",
  message: "timer-dlq-message",
  topic: "timer-dlq-topic",
  partition: "timer-dlq-partition",
  offset: "timer-dlq-offset"
} as const

const empty = new Uint8Array(0)

/** Reads and applies commands for the life of the scope. */
export const runKafkaCommandConsumer = Effect.gen(function*() {
  const { kafka, producer, settings } = yield* KafkaConnection
  const intake = yield* CommandIntake
  const runtime = yield* Effect.runtime<never>()

  const deadLetter = (topic: string, partition: number, message: KafkaMessage, rejection: Rejection) =>
    kafkaCall("produce a dead letter", () =>
      producer.send({
        topic: settings.dlqTopic,
        acks: -1,
        messages: [{
          key: message.key,
          value: message.value,
          headers: {
            [KAFKA_DLQ_HEADERS.reason]: rejection.reason,
            [KAFKA_DLQ_HEADERS.message]: rejection.message.slice(0, 2_000),
            [KAFKA_DLQ_HEADERS.topic]: topic,
            [KAFKA_DLQ_HEADERS.partition]: String(partition),
            [KAFKA_DLQ_HEADERS.offset]: message.offset
          }
        }]
      })).pipe(
        Effect.zipRight(Effect.logWarning("a command went to the dead-letter topic").pipe(
          Effect.annotateLogs({ reason: rejection.reason, problem: rejection.message, partition, offset: message.offset })
        ))
      )

  /** Applies one partition's batch; retried (holding the partition) until it is written. */
  const handleBatch = ({ batch, heartbeat, isRunning, isStale, resolveOffset }: EachBatchPayload) =>
    Effect.gen(function*() {
      const decoded = batch.messages.map((message) => ({ message, command: decodeCommandMessage(message.value ?? empty) }))
      const good = decoded.flatMap(({ command, message }) => (Either.isRight(command) ? [{ message, command: command.right }] : []))
      const outcomes = good.length === 0 ? [] : yield* intake.apply(good.map((g): TimerCommand => g.command), { kafkaTopic: settings.eventsTopic })
      const rejected = [
        ...decoded.flatMap(({ command, message }) => (Either.isLeft(command) ? [{ message, rejection: command.left }] : [])),
        ...outcomes.flatMap((outcome, i) => (Either.isLeft(outcome) ? [{ message: good[i]!.message, rejection: outcome.left }] : []))
      ]
      for (const { message, rejection } of rejected) yield* deadLetter(batch.topic, batch.partition, message, rejection)
      if (isStale() || !isRunning()) return
      // Written: the consumer moves past the batch, and the group's offset records it.
      resolveOffset(batch.lastOffset())
      const next = String(BigInt(batch.lastOffset()) + 1n)
      yield* kafkaCall("commit offsets", () => consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }]))
      yield* kafkaCall("heartbeat", () => heartbeat())
    }).pipe(
      Effect.tapError((error) => Effect.logError("could not take a batch of commands; trying it again", error)),
      Effect.retry({
        schedule: Schedule.exponential(Duration.millis(200)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(5)))),
        while: () => isRunning() && !isStale()
      })
    )

  const consumer = kafka.consumer({
    groupId: settings.groupId,
    allowAutoTopicCreation: true,
    sessionTimeout: settings.sessionTimeoutMs,
    heartbeatInterval: Math.max(100, Math.floor(settings.sessionTimeoutMs / 10))
  })
  // Which partitions this instance reads, after every rebalance.
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const partitions = Object.values(payload.memberAssignment).reduce((n, list) => n + list.length, 0)
    Runtime.runFork(runtime)(Effect.logInfo("joined the Kafka consumer group").pipe(
      Effect.annotateLogs({ group: settings.groupId, partitions, assignment: JSON.stringify(payload.memberAssignment) })
    ))
  })
  yield* Effect.acquireRelease(
    kafkaCall("connect the consumer", () => consumer.connect()),
    () =>
      kafkaCall("disconnect the consumer", () => consumer.disconnect()).pipe(
        Effect.timeout(Duration.seconds(10)),
        Effect.catchAll((error) => Effect.logWarning("could not leave the Kafka consumer group", error))
      )
  )
  yield* kafkaCall("subscribe", () => consumer.subscribe({ topic: settings.commandsTopic, fromBeginning: true }))
  yield* kafkaCall("run the consumer", () =>
    consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => Runtime.runPromise(runtime)(Effect.orDie(handleBatch(payload)))
    }))
  yield* Effect.logInfo("reading commands from Kafka").pipe(
    Effect.annotateLogs({ topic: settings.commandsTopic, group: settings.groupId })
  )
})
