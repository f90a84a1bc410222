/**
 * The shard ownership port: instances and versioned claims. Every instance
 * registers itself and heartbeats; a claim increments the shard's version and
 * succeeds only if the shard is still at the version the claimer saw (a
 * compare-and-set), so two instances never both believe they won. The owner
 * keeps its version and every firing-path write checks it.
 */
import { Context, type Effect, type Option } from "effect"
import type { ShardRef } from "./ShardId.js"
import type { StoreError } from "./TimerErrors.js"

/** A held claim on one shard, at one version. */
export interface ShardLease extends ShardRef {
  readonly version: number
  readonly ownerId: string
}

/** A shard as stored: its version and owner (none when released or never claimed). */
export interface ShardState extends ShardRef {
  readonly version: number
  readonly ownerId: string | undefined
}

/** A registered instance and until when its last heartbeat keeps it alive. */
export interface InstanceInfo {
  readonly id: string
  readonly host: string
  readonly pid: number
  readonly startedAt: number
  readonly expiresAt: number
}

/** Instances and shard claims. */
export class ShardOwnership extends Context.Tag("@timer/ShardOwnership")<ShardOwnership, {
  /** Registers the instance or renews it: it counts as alive until `expiresAt`. */
  readonly heartbeat: (instance: InstanceInfo) => Effect.Effect<void, StoreError>
  /** Removes the instance: the others stop counting it at once. */
  readonly deregister: (instanceId: string) => Effect.Effect<void, StoreError>
  /** The instances alive at `now`, by id. */
  readonly liveInstances: (now: number) => Effect.Effect<ReadonlyArray<InstanceInfo>, StoreError>
  /** Makes sure every shard of the namespace has a row (version 0, no owner, for new ones). */
  readonly ensureShards: (namespace: string, numShards: number) => Effect.Effect<void, StoreError>
  /** Every shard row, by namespace then shard id. */
  readonly shards: Effect.Effect<ReadonlyArray<ShardState>, StoreError>
  /**
   * Claims a shard for `ownerId` if it is still at `seenVersion`, incrementing
   * the version; None when another claim came first.
   */
  readonly claim: (
    shard: ShardRef,
    ownerId: string,
    seenVersion: number
  ) => Effect.Effect<Option.Option<ShardLease>, StoreError>
  /** Gives a shard up, if it is still held at the lease's version (the version is kept). */
  readonly release: (lease: ShardLease) => Effect.Effect<void, StoreError>
}>() {}
