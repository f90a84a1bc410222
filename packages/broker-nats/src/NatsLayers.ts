/**
 * The NATS adapter as layers: the delivery of natsSubject timers (in front of
 * another delivery for the rest), and the command consumer.
 */
import { CommandIntake, type EngineConfig, type StoreError, TimerDelivery, type TimerStore, type TimerWakeups } from "@timer/core"
import { Effect, Layer } from "effect"
import { runCommandConsumer } from "./NatsCommandConsumer.js"
import { NatsConnection } from "./NatsConnection.js"
import { makeNatsDelivery } from "./NatsDelivery.js"

/** Delivers natsSubject timers by JetStream, and every other timer by the delivery `others`. */
export const layerNatsDelivery = <E, R>(
  others: Layer.Layer<TimerDelivery, E, R>
): Layer.Layer<TimerDelivery, E, R | NatsConnection> =>
  Layer.effect(
    TimerDelivery,
    Effect.gen(function*() {
      const nats = yield* makeNatsDelivery
      const fallback = yield* TimerDelivery
      return TimerDelivery.of({
        deliver: (request) => (request.timer.natsSubject === undefined ? fallback.deliver(request) : nats.deliver(request))
      })
    })
  ).pipe(Layer.provide(others))

/** Reads commands for the life of the layer, into timers of `namespace`. */
export const layerNatsCommands = (
  namespace: string
): Layer.Layer<never, StoreError, NatsConnection | TimerStore | TimerWakeups | EngineConfig> =>
  Layer.scopedDiscard(Effect.forkScoped(runCommandConsumer)).pipe(Layer.provide(CommandIntake.layer(namespace)))
