/**
 * Settings of the firing engine and the timer service. The server reads them
 * from the environment once; tests build them with `EngineConfig.layer`.
 */
import { Context, Layer } from "effect"
import { hostname } from "node:os"

/** Engine and service settings. */
export interface EngineSettings {
  /** This instance's id, recorded as the owner of the shards it claims. */
  readonly instanceId: string
  /**
   * The host this instance registers under. A registered instance on the same
   * host whose process is gone is known dead at once; on another host, only
   * when its registration lapses.
   */
  readonly instanceHost: string
  /** Largest payload, in bytes of its JSON encoding. */
  readonly maxPayloadBytes: number
  /** Deliveries in flight at once, over all shards. */
  readonly deliveryConcurrency: number
  /** Deliveries in flight at once within one shard. */
  readonly shardConcurrency: number
  /** Longest a shard fiber sleeps without looking at the store, a safety net behind wake-ups. */
  readonly idlePollMs: number
  /** How long FIRED and FAILED timers stay visible before they are purged. */
  readonly retentionMs: number
  /** Time between purge runs. */
  readonly purgeIntervalMs: number
  /** Timers deleted per purge statement. */
  readonly purgeBatchSize: number
  /** How long shutdown waits for in-flight deliveries before cutting them short. */
  readonly shutdownGraceMs: number
  /** Shards of the `default` namespace when it is first made. */
  readonly defaultNamespaceShards: number
  /** How long a heartbeat keeps this instance registered; its shards are taken over once it lapses. */
  readonly instanceTtlMs: number
  /** Time between rounds of heartbeat and rebalancing. */
  readonly rebalanceIntervalMs: number
  /** The store serves one instance only (SQLite): refuse to start while another one is alive. */
  readonly exclusive: boolean
  /** A NATS connection delivers timers that name a natsSubject; without one such timers are refused. */
  readonly natsEnabled: boolean
  /** A Kafka connection delivers timers that name a kafkaTopic; without one such timers are refused. */
  readonly kafkaEnabled: boolean
}

/** The defaults of every setting. */
export const DEFAULT_ENGINE_SETTINGS: EngineSettings = {
  instanceId: "local",
  instanceHost: hostname(),
  maxPayloadBytes: 100 * 1024,
  deliveryConcurrency: 256,
  shardConcurrency: 32,
  idlePollMs: 30_000,
  retentionMs: 7 * 86_400_000,
  purgeIntervalMs: 60_000,
  purgeBatchSize: 1000,
  shutdownGraceMs: 10_000,
  defaultNamespaceShards: 16,
  instanceTtlMs: 5_000,
  rebalanceIntervalMs: 500,
  exclusive: false,
  natsEnabled: false,
  kafkaEnabled: false
}

/** The engine's settings as a service. */
export class EngineConfig extends Context.Tag("@timer/EngineConfig")<EngineConfig, EngineSettings>() {
  /** Settings from the defaults with some replaced. */
  static layer = (overrides: Partial<EngineSettings> = {}): Layer.Layer<EngineConfig> =>
    Layer.succeed(EngineConfig, { ...DEFAULT_ENGINE_SETTINGS, ...overrides })
}
