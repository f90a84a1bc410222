/**
 * The shard ownership port: versioned claims. A claim increments the shard's
 * version; the owner keeps the version and every firing-path write checks it.
 */
import { Context, type Effect } from "effect"
import type { ShardRef } from "./ShardId.js"
import type { StoreError } from "./TimerErrors.js"

/** A held claim on one shard, at one version. */
export interface ShardLease extends ShardRef {
  readonly version: number
  readonly ownerId: string
}

/** Shard claims. */
export class ShardOwnership extends Context.Tag("@timer/ShardOwnership")<ShardOwnership, {
  /** Claims a shard for `ownerId`, incrementing its version; returns the lease. */
  readonly claim: (shard: ShardRef, ownerId: string) => Effect.Effect<ShardLease, StoreError>
  /** Gives a shard up, if it is still held at the lease's version. */
  readonly release: (lease: ShardLease) => Effect.Effect<void, StoreError>
}>() {}
