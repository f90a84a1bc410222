/**
 * Supervision of one shard's fiber: a store error or a defect restarts it
 * after a backoff (200 ms doubling to 30 s, reset after a minute of health);
 * lost ownership ends it; interruption is passed on.
 */
import { Cause, Data, Duration, Effect, Schedule } from "effect"
import type { EngineConfig } from "../EngineConfig.js"
import { shardKey } from "../ShardId.js"
import type { ShardLease } from "../ShardOwnership.js"
import type { TimerDelivery } from "../TimerDelivery.js"
import type { ShardOwnershipLost, StoreError } from "../TimerErrors.js"
import type { TimerStore } from "../TimerStore.js"
import type { TimerWakeups } from "../TimerWakeups.js"
import type { Permits } from "./permits.js"
import { runShard } from "./shardRunner.js"

/** A shard fiber that stopped on a store error or a defect, to be restarted. */
export class Restart extends Data.TaggedError("Restart")<{ readonly cause: Cause.Cause<unknown> }> {}

/** Sorts why a shard fiber stopped: lost ownership ends it, interruption is passed on, anything else restarts it. */
export const classifyStop = (cause: Cause.Cause<StoreError | ShardOwnershipLost>): Effect.Effect<never, ShardOwnershipLost | Restart> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const failure = Cause.failureOption(cause)
  return failure._tag === "Some" && failure.value._tag === "ShardOwnershipLost"
    ? Effect.fail(failure.value)
    : Effect.fail(new Restart({ cause }))
}

/** Runs a shard until shutdown or lost ownership; `onLost` is told when another owner took it. */
export const superviseShard = (
  lease: ShardLease,
  permits: Permits,
  onLost: (error: ShardOwnershipLost) => Effect.Effect<void>
): Effect.Effect<void, never, TimerStore | TimerDelivery | TimerWakeups | EngineConfig> =>
  runShard(lease, permits).pipe(
    Effect.catchAllCause(classifyStop),
    Effect.tapErrorTag("Restart", ({ cause }) =>
      Effect.logWarning("shard fiber stopped on an error; restarting", cause).pipe(
        Effect.annotateLogs({ shard: shardKey(lease) })
      )),
    Effect.retry({
      while: (error) => error._tag === "Restart",
      schedule: Schedule.exponential(Duration.millis(200)).pipe(
        Schedule.union(Schedule.spaced(Duration.seconds(30))),
        Schedule.resetAfter(Duration.minutes(1))
      )
    }),
    Effect.catchTag("ShardOwnershipLost", (error) =>
      Effect.logWarning("shard ownership lost; its fiber stopped before writing anything more").pipe(
        Effect.annotateLogs({ shard: shardKey(lease), heldVersion: error.heldVersion }),
        Effect.zipRight(onLost(error))
      )),
    Effect.catchTag("Restart", () => Effect.void)
  )
