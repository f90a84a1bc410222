/**
 * The broker settings: the NATS adapter runs when TIMER_NATS_URL is set, the
 * Kafka adapter when TIMER_KAFKA_BROKERS is set (either, both or neither);
 * every name has the contract's default.
 */
import { DEFAULT_KAFKA_SETTINGS, type KafkaSettings } from "@timer/broker-kafka"
import { DEFAULT_NATS_SETTINGS, type NatsSettings } from "@timer/broker-nats"
import { Config, Option } from "effect"

const name = (key: string, fallback: string, description: string) =>
  Config.string(key).pipe(
    Config.validate({ message: `${key} must not be empty or contain spaces`, validation: (value) => /^\S+$/.test(value) }),
    Config.withDefault(fallback),
    Config.withDescription(description)
  )

/** The broker settings: the command namespace, and NATS and Kafka, each None when not configured. */
export const BrokerConfig = Config.all({
  url: Config.string("TIMER_NATS_URL").pipe(
    Config.option,
    Config.withDescription("NATS server URL(s), comma-separated; enables ScheduleTimer/CancelTimer over JetStream and natsSubject timers")
  ),
  commandsStream: name("TIMER_NATS_COMMANDS_STREAM", DEFAULT_NATS_SETTINGS.commandsStream, "JetStream stream of commands (created when missing)"),
  commandsSubject: name("TIMER_NATS_COMMANDS_SUBJECT", DEFAULT_NATS_SETTINGS.commandsSubject, "Subject of commands"),
  consumerName: name("TIMER_NATS_CONSUMER", DEFAULT_NATS_SETTINGS.consumerName, "Durable consumer that reads the commands"),
  dlqStream: name("TIMER_NATS_DLQ_STREAM", DEFAULT_NATS_SETTINGS.dlqStream, "JetStream stream of dead-lettered commands"),
  dlqSubject: name("TIMER_NATS_DLQ_SUBJECT", DEFAULT_NATS_SETTINGS.dlqSubject, "Subject of dead-lettered commands"),
  eventsStream: name("TIMER_NATS_EVENTS_STREAM", DEFAULT_NATS_SETTINGS.eventsStream, "JetStream stream of DueTimeReached events"),
  eventsSubject: name("TIMER_NATS_EVENTS_SUBJECT", DEFAULT_NATS_SETTINGS.eventsSubject, "Subject of DueTimeReached events"),
  batchSize: Config.integer("TIMER_NATS_BATCH_SIZE").pipe(
    Config.validate({ message: "TIMER_NATS_BATCH_SIZE must be 1 to 1000", validation: (n) => n >= 1 && n <= 1000 }),
    Config.withDefault(DEFAULT_NATS_SETTINGS.batchSize),
    Config.withDescription("Commands written in one transaction at most")
  ),
  commandNamespace: Config.string("TIMER_COMMAND_NAMESPACE").pipe(
    Config.withDefault("default"),
    Config.withDescription("Namespace of the timers made by broker commands")
  ),
  kafka: Config.all({
    brokers: Config.string("TIMER_KAFKA_BROKERS").pipe(
      Config.option,
      Config.withDescription("Kafka bootstrap brokers, host:port, comma-separated; enables commands over Kafka and kafkaTopic timers")
    ),
    clientId: name("TIMER_KAFKA_CLIENT_ID", DEFAULT_KAFKA_SETTINGS.clientId, "Kafka client id"),
    commandsTopic: name("TIMER_KAFKA_COMMANDS_TOPIC", DEFAULT_KAFKA_SETTINGS.commandsTopic, "Topic of commands"),
    groupId: name("TIMER_KAFKA_GROUP", DEFAULT_KAFKA_SETTINGS.groupId, "Consumer group of the commands (instances share it)"),
    dlqTopic: name("TIMER_KAFKA_DLQ_TOPIC", DEFAULT_KAFKA_SETTINGS.dlqTopic, "Topic of dead-lettered commands"),
    eventsTopic: name("TIMER_KAFKA_EVENTS_TOPIC", DEFAULT_KAFKA_SETTINGS.eventsTopic, "Topic of DueTimeReached events"),
    sessionTimeoutMs: Config.integer("TIMER_KAFKA_SESSION_TIMEOUT_MS").pipe(
      Config.validate({ message: "TIMER_KAFKA_SESSION_TIMEOUT_MS must be 1000 to 300000", validation: (n) => n >= 1_000 && n <= 300_000 }),
      Config.withDefault(DEFAULT_KAFKA_SETTINGS.sessionTimeoutMs),
      Config.withDescription("How long the consumer group waits for a silent instance before its partitions move")
    ),
    idempotent: Config.boolean("TIMER_KAFKA_IDEMPOTENT").pipe(
      Config.withDefault(DEFAULT_KAFKA_SETTINGS.idempotent),
      Config.withDescription("Idempotent producer (needs a cluster that names its controller)")
    )
  })
}).pipe(
  Config.map(({ commandNamespace, kafka: { brokers, ...kafka }, url, ...names }) => ({
    commandNamespace,
    nats: Option.map(url, (url): NatsSettings => ({ ...DEFAULT_NATS_SETTINGS, ...names, url })),
    kafka: Option.map(brokers, (brokers): KafkaSettings => ({
      ...kafka,
      brokers: brokers.split(",").map((broker) => broker.trim()).filter((broker) => broker !== "")
    }))
  }))
)
