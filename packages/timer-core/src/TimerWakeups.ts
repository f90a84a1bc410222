/**
 * Wake-ups: tells a shard's fiber that a timer was created or moved earlier in
 * its shard, so it need not wait for its planned wake time.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { type ShardRef, shardKey } from "./ShardId.js"
import type { TimerRecord } from "./Timer.js"

/** Wake-up signals per shard. */
export class TimerWakeups extends Context.Tag("@timer/TimerWakeups")<TimerWakeups, {
  /** Signals that a timer of `shard` is due at `at` (epoch ms). */
  readonly notify: (shard: ShardRef, at: number) => Effect.Effect<void>
  /** Registers the listener of a shard for the life of the scope. */
  readonly listen: (shard: ShardRef, onWake: (at: number) => void) => Effect.Effect<void, never, Scope.Scope>
}>() {
  /** Wake-ups within this process (one instance). */
  static layer: Layer.Layer<TimerWakeups> = Layer.sync(TimerWakeups, () => {
    const listeners = makeWakeupListeners()
    return TimerWakeups.of({
      notify: (shard, at) => Effect.sync(() => listeners.wake(shardKey(shard), at)),
      listen: listeners.listen
    })
  })
}

/** The shard listeners of this process. */
export interface WakeupListeners {
  /** Wakes the listener of the shard with this key; false when this process has none. */
  readonly wake: (key: string, at: number) => boolean
  /** Registers the listener of a shard for the life of the scope. */
  readonly listen: (shard: ShardRef, onWake: (at: number) => void) => Effect.Effect<void, never, Scope.Scope>
}

/** Makes the registry of this process's shard listeners, for wake-up implementations. */
export const makeWakeupListeners = (): WakeupListeners => {
  const listeners = new Map<string, (at: number) => void>()
  return {
    wake: (key, at) => {
      const listener = listeners.get(key)
      listener?.(at)
      return listener !== undefined
    },
    listen: (shard, onWake) =>
      Effect.acquireRelease(
        Effect.sync(() => listeners.set(shardKey(shard), onWake)),
        () =>
          Effect.sync(() => {
            if (listeners.get(shardKey(shard)) === onWake) listeners.delete(shardKey(shard))
          })
      )
  }
}

/**
 * Wakes the shard of a SCHEDULED timer due within `idlePollMs` of `now`. A shard's
 * fiber looks at the store at least every idlePollMs, so a later one is found
 * without a wake-up (which costs a NOTIFY across instances).
 */
export const wakeShardOf = (
  wakeups: Context.Tag.Service<TimerWakeups>,
  timer: TimerRecord,
  now: number,
  idlePollMs: number
): Effect.Effect<void> =>
  timer.state === "SCHEDULED" && timer.nextFireAt <= now + idlePollMs
    ? wakeups.notify({ namespace: timer.namespace, shardId: timer.shardId }, timer.nextFireAt)
    : Effect.void
