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
    // The shard's line for delivery permits; closed when shutdown begins, so that firings still
    // waiting for a permit leave at once and start no call.
    const line = deliveryPermits.line()
    let stopping = false
    yield* Effect.addFinalizer((exit) =>
      Exit.isInterrupted(exit)
        ? Effect.sync(() => (stopping = true)).pipe(
          Effect.zipRight(line.close),
          Effect.zipRight(FiberSet.awaitEmpty(deliveries)),
          Effect.interruptible,
          Effect.timeoutOption(Duration.millis(config.shutdownGraceMs)),
          Effect.asVoid
        )
        : Effect.void
    )

    // True while every slot is taken: then any finished delivery must wake the loop.
    let waitingForSlot = false
    const wakeFor = (at: number) => {
      if (at < plannedWakeAt) Queue.unsafeOffer(wake, undefined)
    }

    /** The timer as stored now, if it is still the arming that was found due (not deleted, updated or re-armed). */
    const stillArmed = (due: TimerRecord) =>
      Effect.map(
        store.getTimer(due),
        Option.filter((timer) => timer.firingId === due.firingId && timer.state === "SCHEDULED")
      )

    /** Delivers one due timer and records the outcome; returns when the shard must look again (a retry's time, say). */
    const deliverAndRecord = (due: TimerRecord) =>
      Effect.gen(function*() {
        // After a wait for the permit, deliver the timer as it stands then, or not at all; without a
        // wait it was read just now.
        const attempted = yield* line.withPermit((waited) =>
          Effect.gen(function*() {
            const current = waited ? yield* stillArmed(due) : Option.some(due)
            if (Option.isNone(current)) return Option.none()
            const timer = current.value
            const firedAt = yield* Clock.currentTimeMillis
            const outcome = yield* delivery.deliver({ timer, attempt: timer.attempts + 1, firedAt, instanceId: lease.ownerId })
            return Option.some({ timer, firedAt, outcome })
          })
        ).pipe(Effect.map(Option.flatten))
        // A timer found changed (updated, replaced, deleted) makes the shard look again: a new arming
        // was left out of its reads while this one was in flight.
        if (Option.isNone(attempted)) return stopping ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY
        const { firedAt, outcome, timer } = attempted.value
        const now = yield* Clock.currentTimeMillis
        const random = yield* Random.next
        const update = firingUpdate(timer, outcome, { firedAt, now, random, newFiringId: randomUUID() })
        const written = yield* store.recordFiring(lease, timer, timer.firingId, update, now)
        yield* Effect.logDebug("timer fired").pipe(
          Effect.annotateLogs({
            namespace: timer.namespace,
            timerId: timer.id,
            attempt: timer.attempts + 1,
            outcome: update._tag,
            lagMs: firedAt - timer.nextFireAt,
            superseded: !written
          })
        )
        if (!written) return Number.NEGATIVE_INFINITY
        return update._tag === "RetryScheduled"
          ? update.nextFireAt
          : update._tag === "Rearmed"
          ? update.executeAt
          : Number.POSITIVE_INFINITY
      })

    const fire = (due: TimerRecord) =>
      deliverAndRecord(due).pipe(
        Effect.catchTags({
          ShardOwnershipLost: (error) => Effect.as(Deferred.fail(lost, error), Number.POSITIVE_INFINITY),
          StoreError: (error) =>
            Effect.logError("could not deliver or record a firing; the timer stays due and fires again").pipe(
              Effect.annotateLogs({ namespace: due.namespace, timerId: due.id, error: error.message }),
              Effect.zipRight(Effect.sleep(Duration.seconds(1))),
              Effect.as(due.nextFireAt)
            )
        }),
        // The delivery port never fails; should it die anyway, the timer stays due and fires again.
        Effect.catchAllDefect((defect) =>
          Effect.logError("a delivery died; the timer stays due and fires again", defect).pipe(
            Effect.annotateLogs({ namespace: due.namespace, timerId: due.id }),
            Effect.zipRight(Effect.sleep(Duration.seconds(1))),
            Effect.as(due.nextFireAt)
          )
        ),
        Effect.flatMap((nextAt) =>
          Effect.sync(() => {
            inFlight.delete(due.id)
            wakeFor(waitingForSlot ? Number.NEGATIVE_INFINITY : nextAt)
          })
        ),
        Effect.ensuring(Effect.sync(() => inFlight.delete(due.id)))
      )

    const step = Effect.gen(function*() {
      plannedWakeAt = Number.POSITIVE_INFINITY
      yield* Queue.takeAll(wake)
      const now = yield* Clock.currentTimeMillis
      const free = capacity - inFlight.size
      let full = free <= 0
      let next = Option.none<number>()
      if (!full) {
        const due = yield* store.dueTimers(lease, now, free, Array.from(inFlight))
        for (const timer of due.timers) {
          inFlight.add(timer.id)
          yield* FiberSet.run(deliveries, fire(timer))
        }
        full = due.timers.length >= free
        next = due.nextFireAt
      }
      if (full) {
        // Every slot is taken and more may be due: a finished delivery wakes us.
        waitingForSlot = true
        yield* Queue.take(wake)
        waitingForSlot = false
        return
      }
      const wakeAt = Option.match(next, {
        onNone: () => now + config.idlePollMs,
        onSome: (at) => Math.min(at, now + config.idlePollMs)
      })
      plannedWakeAt = wakeAt
      const sleepMs = Math.max(0, wakeAt - (yield* Clock.currentTimeMillis))
      yield* Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.millis(sleepMs)))
    })

    yield* Effect.raceFirst(Effect.forever(step), Deferred.await(lost))
  }).pipe(Effect.scoped)
