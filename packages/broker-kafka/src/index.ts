/**
 * @timer/broker-kafka: the Kafka adapter — ScheduleTimer and CancelTimer
 * commands in through a consumer group (offsets committed after the store
 * write, bad messages to a dead-letter topic), DueTimeReached events and
 * firings of timers that name a Kafka topic out.
 */
export * from "./KafkaCommandConsumer.js"
export * from "./KafkaConnection.js"
export * from "./KafkaDelivery.js"
export * from "./KafkaError.js"
export * from "./KafkaLayers.js"
export * from "./KafkaSettings.js"
