/**
 * Which shards an instance should hold: the shards of every namespace spread
 * evenly over the live instances. Each instance plans for itself from what the
 * store shows; all plans agree once they see the same instances, so the
 * spread converges within a few rounds. A shard held by a live instance is
 * never taken from it: it gives the shard up itself when it holds too many.
 */
import { crc32Of, shardKey } from "./ShardId.js"
import type { ShardState } from "./ShardOwnership.js"

/** What the planning instance knows. */
export interface AssignmentInput {
  /** This instance's id. */
  readonly me: string
  /** The ids of the live instances (this one is counted whether listed or not). */
  readonly live: ReadonlyArray<string>
  /** Every shard, as stored. */
  readonly shards: ReadonlyArray<ShardState>
  /** The keys (shardKey) of the shards this instance holds a lease on. */
  readonly held: ReadonlySet<string>
}

/** What to do: shards to give up, and shards to try to claim at the version seen. */
export interface AssignmentPlan {
  readonly target: number
  readonly release: ReadonlyArray<ShardState>
  readonly claim: ReadonlyArray<ShardState>
}

/** How much `instance` prefers `shard` (rendezvous hashing): instances prefer different shards. */
const preference = (instance: string, shard: ShardState) => crc32Of(`${instance}|${shardKey(shard)}`)

/** The even share of `me`: ⌊S/n⌋, one more for the first S mod n instances by id. */
export const targetShare = (me: string, live: ReadonlyArray<string>, shardCount: number): number => {
  const instances = Array.from(new Set([...live, me])).sort()
  const base = Math.floor(shardCount / instances.length)
  return base + (instances.indexOf(me) < shardCount % instances.length ? 1 : 0)
}

/** Plans this instance's next step towards its even share. */
export const planAssignment = (input: AssignmentInput): AssignmentPlan => {
  const live = new Set([...input.live, input.me])
  const target = targetShare(input.me, input.live, input.shards.length)
  const byPreference = (shards: ReadonlyArray<ShardState>) =>
    [...shards].sort((a, b) => preference(input.me, b) - preference(input.me, a))
  const mine = input.shards.filter((shard) => input.held.has(shardKey(shard)))
  // Shards the store says are this instance's but that it holds no lease on (a claim whose
  // answer was lost, a restart under the same id): no other instance will take them from a
  // live owner, so they are claimed back whatever the target; any excess is given up later.
  const orphans = input.shards.filter((shard) => shard.ownerId === input.me && !input.held.has(shardKey(shard)))
  if (mine.length > target) {
    return { target, release: byPreference(mine).slice(target), claim: orphans }
  }
  const free = input.shards.filter((shard) =>
    !input.held.has(shardKey(shard)) && shard.ownerId !== input.me &&
    (shard.ownerId === undefined || !live.has(shard.ownerId))
  )
  const wanted = Math.max(0, target - mine.length - orphans.length)
  return { target, release: [], claim: [...orphans, ...byPreference(free).slice(0, wanted)] }
}
