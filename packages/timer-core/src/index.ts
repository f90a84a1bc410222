/**
 * @timer/core: the timer model, its schemas, the ports (store, ownership,
 * delivery) and the firing engine, and the broker contract (envelopes, command
 * decoding) that the broker adapters share. It imports no adapter.
 */
export * from "./DurationString.js"
export * from "./Engine.js"
export * from "./EngineConfig.js"
export * from "./Firing.js"
export * from "./Namespace.js"
export * from "./Purger.js"
export * from "./RetryPolicy.js"
export * from "./ShardAssignment.js"
export * from "./ShardId.js"
export * from "./ShardOwnership.js"
export * from "./Timer.js"
export * from "./TimerDelivery.js"
export * from "./TimerErrors.js"
export * from "./TimerRequests.js"
export * from "./Timers.js"
export * from "./TimerStore.js"
export * from "./TimerWakeups.js"
export * from "./Timestamp.js"
export * from "./broker/CommandDecoding.js"
export * from "./broker/Envelope.js"
export * from "./broker/CommandIntake.js"
