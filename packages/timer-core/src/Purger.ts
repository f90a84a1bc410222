/**
 * Retention: FIRED and FAILED timers stay visible for the retention period,
 * then are deleted in batches.
 */
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"
import { EngineConfig } from "./EngineConfig.js"
import type { StoreError } from "./TimerErrors.js"
import { TimerStore } from "./TimerStore.js"

/** The purge of finished timers. */
export class Purger extends Context.Tag("@timer/Purger")<Purger, {
  /** Deletes every finished timer older than the retention period, batch by batch; returns how many. */
  readonly purgeOnce: Effect.Effect<number, StoreError>
}>() {
  /** The purger, running every purge interval in the background while the layer lives. */
  static layer: Layer.Layer<Purger, never, TimerStore | EngineConfig> = Layer.scoped(
    Purger,
    Effect.gen(function*() {
      const store = yield* TimerStore
      const config = yield* EngineConfig
      const purgeOnce = Effect.gen(function*() {
        const before = (yield* Clock.currentTimeMillis) - config.retentionMs
        let total = 0
        while (true) {
          const deleted = yield* store.purgeFinished(before, config.purgeBatchSize)
          total += deleted
          if (deleted < config.purgeBatchSize) return total
        }
      })
      yield* purgeOnce.pipe(
        Effect.tap((count) => count > 0 ? Effect.logInfo("purged finished timers").pipe(Effect.annotateLogs({ count })) : Effect.void),
        Effect.catchAll((error) => Effect.logWarning("purge failed").pipe(Effect.annotateLogs({ error: error.message }))),
        Effect.repeat(Schedule.spaced(Duration.millis(config.purgeIntervalMs))),
        Effect.delay(Duration.millis(config.purgeIntervalMs)),
        Effect.forkScoped
      )
      return Purger.of({ purgeOnce })
    })
  )
}
