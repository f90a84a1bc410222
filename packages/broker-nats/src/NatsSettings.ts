/**
 * Where the NATS adapter reads commands and writes events and dead letters.
 */

/** The NATS adapter's settings. */
export interface NatsSettings {
  /** Server URL(s), comma-separated ("nats://127.0.0.1:4222"). */
  readonly url: string
  /** The stream of commands (created when missing) and its subject. */
  readonly commandsStream: string
  readonly commandsSubject: string
  /** The durable pull consumer that reads the commands. */
  readonly consumerName: string
  /** The stream of dead-lettered commands (created when missing) and its subject. */
  readonly dlqStream: string
  readonly dlqSubject: string
  /** The stream of DueTimeReached events (created when missing) and its subject. */
  readonly eventsStream: string
  readonly eventsSubject: string
  /** Commands read (and written in one transaction) at most at once. */
  readonly batchSize: number
  /** How long a publish waits for JetStream's acknowledgement. */
  readonly publishTimeoutMs: number
}

/** The defaults of the contract. */
export const DEFAULT_NATS_SETTINGS: Omit<NatsSettings, "url"> = {
  commandsStream: "TIMER_COMMANDS",
  commandsSubject: "timer.commands",
  consumerName: "timer-service",
  dlqStream: "TIMER_DLQ",
  dlqSubject: "timer.commands.dlq",
  eventsStream: "TIMER_EVENTS",
  eventsSubject: "timer.events",
  batchSize: 100,
  publishTimeoutMs: 5_000
}
