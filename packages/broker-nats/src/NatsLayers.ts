/**
 * The NATS adapter as layers: the delivery of natsSubject timers (in front of
 * another delivery for the rest), and the command consumer.
 */
import { CommandIntake, type EngineConfig, layerDeliveryRoute, type StoreError, type TimerDelivery, type TimerStore, type TimerWakeups } from "@timer/core"
import { Effect, Layer } from "effect"
import { runCommandConsumer } from "./NatsCommandConsumer.js"
import type { NatsConnection } from "./NatsConnection.js"
import { makeNatsDelivery } from "./NatsDelivery.js"

/** Delivers natsSubject timers by JetStream, and every other timer by the delivery `others`. */
export const layerNatsDelivery = <E, R>(
  others: Layer.Layer<TimerDelivery, E, R>
): Layer.Layer<TimerDelivery, E, R | NatsConnection> =>
  layerDeliveryRoute((timer) => timer.natsSubject !== undefined, makeNatsDelivery, others)

/** Reads commands for the life of the layer, into timers of `namespace`. */
export const layerNatsCommands = (
  namespace: string
): Layer.Layer<never, StoreError, NatsConnection | TimerStore | TimerWakeups | EngineConfig> =>
  Layer.scopedDiscard(Effect.forkScoped(runCommandConsumer)).pipe(Layer.provide(CommandIntake.layer(namespace)))
