/**
 * The Kafka adapter as layers: the delivery of kafkaTopic timers (in front of
 * another delivery for the rest), and the command consumer.
 */
import { CommandIntake, type EngineConfig, layerDeliveryRoute, type StoreError, type TimerDelivery, type TimerStore, type TimerWakeups } from "@timer/core"
import { Layer } from "effect"
import { runKafkaCommandConsumer } from "./KafkaCommandConsumer.js"
import type { KafkaConnection } from "./KafkaConnection.js"
import { makeKafkaDelivery } from "./KafkaDelivery.js"
import type { KafkaError } from "./KafkaError.js"

/** Delivers kafkaTopic timers by Kafka, and every other timer by the delivery `others`. */
export const layerKafkaDelivery = <E, R>(
  others: Layer.Layer<TimerDelivery, E, R>
): Layer.Layer<TimerDelivery, E, R | KafkaConnection> =>
  layerDeliveryRoute((timer) => timer.kafkaTopic !== undefined, makeKafkaDelivery, others)

/** Reads commands for the life of the layer, into timers of `namespace`. */
export const layerKafkaCommands = (
  namespace: string
): Layer.Layer<never, StoreError | KafkaError, KafkaConnection | TimerStore | TimerWakeups | EngineConfig> =>
  Layer.scopedDiscard(runKafkaCommandConsumer).pipe(Layer.provide(CommandIntake.layer(namespace)))
