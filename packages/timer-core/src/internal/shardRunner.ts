/**
 * The fiber of one owned shard: fires its due timers oldest first with bounded
 * concurrency, then sleeps until the shard's next due time or a wake-up.
 */
import { randomUUID } from "node:crypto"
import { Clock, Deferred, Duration, Effect, Exit, FiberSet, Option, Queue, Random } from "effect"
import { EngineConfig } from "../EngineConfig.js"
import { firingUpdate } from "../Firing.js"
import type { ShardLease } from "../ShardOwnership.js"
import type { TimerRecord } from "../Timer.js"
import { TimerDelivery } from "../TimerDelivery.js"
import type { ShardOwnershipLost } from "../TimerErrors.js"
import type { Permits } from "./permits.js"
import { TimerStore } from "../TimerStore.js"
import { TimerWakeups } from "../TimerWakeups.js"

/**
 * Runs the shard until it is interrupted (shutdown: in-flight deliveries get
 * the grace period), its ownership is lost (ShardOwnershipLost: everything
 * stops at once, nothing more is written) or the store fails (StoreError).
 * `deliveryPermits` bounds deliveries over all shards.
 */
export const runShard = (lease: ShardLease, deliveryPermits: Permits) =>
  Effect.gen(function*() {
    const store = yield* TimerStore
    const delivery = yield* TimerDelivery
    const wakeups = yield* TimerWakeups
    const config = yield* EngineConfig
    const capacity = config.shardConcurrency

    const wake = yield* Queue.sliding<void>(1)
    // When the fiber plans to wake up next; +Infinity while it is busy, so any notice (at < +Infinity) is kept and wakes it.
    let plannedWakeAt = Number.POSITIVE_INFINITY
    yield* wakeups.listen(lease, (at) => {
      if (at < plannedWakeAt) Queue.unsafeOffer(wake, undefined)
    })

    const lost = yield* Deferred.make<never, ShardOwnershipLost>()
    const inFlight = new Set<string>()
    const deliveries = yield* FiberSet.make<void, never>()
    // On shutdown let in-flight deliveries finish within the grace period; on a lost shard, stop at once.
    // Finalizers run uninterruptibly, and a timeout cannot cut an uninterruptible wait short: the wait is made interruptible.
    yield* Effect.addFinalizer((exit) =>
      Exit.isInterrupted(exit)
        ? FiberSet.awaitEmpty(deliveries).pipe(
          Effect.interruptible,
          Effect.timeoutOption(Duration.millis(config.shutdownGraceMs)),
          Effect.asVoid
        )
        : Effect.void
    )

    const fire = (timer: TimerRecord) =>
      Effect.gen(function*() {
        const firedAt = yield* Clock.currentTimeMillis
        const attempt = timer.attempts + 1
        const outcome = yield* deliveryPermits.withPermit(delivery.deliver({ timer, attempt, firedAt }))
        const now = yield* Clock.currentTimeMillis
        const random = yield* Random.next
        const update = firingUpdate(timer, outcome, { firedAt, now, random, newFiringId: randomUUID() })
        const written = yield* store.recordFiring(lease, timer, timer.firingId, update, now)
        yield* Effect.logDebug("timer fired").pipe(
          Effect.annotateLogs({
            namespace: timer.namespace,
            timerId: timer.id,
            attempt,
            outcome: update._tag,
            lagMs: firedAt - timer.nextFireAt,
            superseded: !written
          })
        )
      }).pipe(
        Effect.catchTags({
          ShardOwnershipLost: (error) => Deferred.fail(lost, error),
          StoreError: (error) =>
            Effect.logError("could not record a firing; the timer stays due and fires again").pipe(
              Effect.annotateLogs({ namespace: timer.namespace, timerId: timer.id, error: error.message }),
              Effect.zipRight(Effect.sleep(Duration.seconds(1)))
            )
        }),
        Effect.ensuring(Effect.sync(() => {
          inFlight.delete(timer.id)
          Queue.unsafeOffer(wake, undefined)
        }))
      )

    const step = Effect.gen(function*() {
      plannedWakeAt = Number.POSITIVE_INFINITY
      yield* Queue.takeAll(wake)
      const now = yield* Clock.currentTimeMillis
      const free = capacity - inFlight.size
      let full = free <= 0
      if (!full) {
        const due = yield* store.dueTimers(lease, now, free, Array.from(inFlight))
        for (const timer of due) {
          inFlight.add(timer.id)
          yield* FiberSet.run(deliveries, fire(timer))
        }
        full = due.length >= free
      }
      if (full) {
        // Every slot is taken and more may be due: a finished delivery wakes us.
        return yield* Queue.take(wake)
      }
      const next = yield* store.nextFireAfter(lease, now)
      const wakeAt = Option.match(next, {
        onNone: () => now + config.idlePollMs,
        onSome: (at) => Math.min(at, now + config.idlePollMs)
      })
      plannedWakeAt = wakeAt
      yield* Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.millis(Math.max(0, wakeAt - now))))
    })

    yield* Effect.raceFirst(Effect.forever(step), Deferred.await(lost))
  }).pipe(Effect.scoped)
