/**
 * Where the Kafka adapter reads commands and writes events and dead letters.
 */

/** The Kafka adapter's settings. */
export interface KafkaSettings {
  /** Bootstrap brokers, host:port each. */
  readonly brokers: ReadonlyArray<string>
  readonly clientId: string
  /** The topic of commands and the consumer group that reads it (instances share the group). */
  readonly commandsTopic: string
  readonly groupId: string
  /** Where malformed commands go, with the reason. */
  readonly dlqTopic: string
  /** Where DueTimeReached goes, keyed by `${tenantId}.${serviceCallId}`. */
  readonly eventsTopic: string
  /** An idempotent producer (acks from all in-sync replicas, no duplicates from the producer's own retries). */
  readonly idempotent: boolean
  /** How long the group waits for a silent member (a killed instance) before its partitions move. */
  readonly sessionTimeoutMs: number
}

/** The defaults of the contract. */
export const DEFAULT_KAFKA_SETTINGS: Omit<KafkaSettings, "brokers"> = {
  clientId: "durable-timers",
  commandsTopic: "timer.commands",
  groupId: "timer-service",
  dlqTopic: "timer.commands.dlq",
  eventsTopic: "timer.events",
  idempotent: true,
  sessionTimeoutMs: 30_000
}
