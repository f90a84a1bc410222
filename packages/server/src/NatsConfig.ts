/**
 * The NATS settings: the adapter runs when TIMER_NATS_URL is set; every name
 * has the contract's default.
 */
import { DEFAULT_NATS_SETTINGS, type NatsSettings } from "@timer/broker-nats"
import { Config, Option } from "effect"

const name = (key: string, fallback: string, description: string) =>
  Config.string(key).pipe(
    Config.validate({ message: `${key} must not be empty or contain spaces`, validation: (value) => /^\S+$/.test(value) }),
    Config.withDefault(fallback),
    Config.withDescription(description)
  )

/** The NATS settings, or None when TIMER_NATS_URL is not set. */
export const NatsConfig = Config.all({
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
  )
}).pipe(
  Config.map(({ commandNamespace, url, ...names }) => ({
    commandNamespace,
    nats: Option.map(url, (url): NatsSettings => ({ ...DEFAULT_NATS_SETTINGS, ...names, url }))
  }))
)
