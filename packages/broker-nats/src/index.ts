/**
 * @timer/broker-nats: the NATS JetStream adapter — ScheduleTimer and
 * CancelTimer commands in (a durable pull consumer, bad messages to a
 * dead-letter stream), DueTimeReached events and firings of timers that name a
 * NATS subject out, deduplicated by JetStream.
 */
export * from "./NatsCommandConsumer.js"
export * from "./NatsConnection.js"
export * from "./NatsDelivery.js"
export * from "./NatsError.js"
export * from "./NatsLayers.js"
export * from "./NatsSettings.js"
