/**
 * What one delivery attempt does to a timer: the rules of FIRED, re-armed,
 * retried and FAILED, as a pure function of the timer and the outcome.
 */
import { resolveRetryPolicy, retryDelayMillis } from "./RetryPolicy.js"
import type { TimerRecord } from "./Timer.js"
import { DeliveryOutcome } from "./TimerDelivery.js"
import { formatTimestamp } from "./Timestamp.js"
import type { FiringUpdate } from "./TimerStore.js"

/** The inputs of one decision besides the timer and the outcome. */
export interface FiringContext {
  /** When the attempt started. */
  readonly firedAt: number
  /** When it ended. */
  readonly now: number
  /** A number in [0, 1) for jitter. */
  readonly random: number
  /** A fresh firing id, used if the callback re-arms the timer. */
  readonly newFiringId: string
}

/** Decides what a delivery outcome does to the timer that was fired. */
export const firingUpdate = (timer: TimerRecord, outcome: DeliveryOutcome, ctx: FiringContext): FiringUpdate => {
  const attempts = timer.attempts + 1
  switch (outcome._tag) {
    case "Delivered":
      return { _tag: "Fired", attempts, executedAt: ctx.now }
    case "Reschedule":
      // Each re-arming must move the timer forward, or a callback could make it fire in a tight loop.
      return outcome.nextExecuteAt > timer.executeAt
        ? { _tag: "Rearmed", executeAt: outcome.nextExecuteAt, firingId: ctx.newFiringId, executedAt: ctx.now }
        : firingUpdate(
          timer,
          DeliveryOutcome.retryable(
            `callback asked to re-arm at ${formatTimestamp(outcome.nextExecuteAt)}, not later than executeAt ${formatTimestamp(timer.executeAt)}`
          ),
          ctx
        )
    case "Permanent":
      return { _tag: "Failed", attempts, lastError: outcome.error }
    case "Retryable": {
      const policy = resolveRetryPolicy(timer.retryPolicy)
      if (attempts >= policy.maxAttempts) {
        return { _tag: "Failed", attempts, lastError: `${outcome.error} (gave up after ${attempts} attempts)` }
      }
      const firstAttemptAt = timer.firstAttemptAt ?? ctx.firedAt
      const nextFireAt = ctx.now + retryDelayMillis(policy, attempts, ctx.random, outcome.retryAfterMs)
      if (nextFireAt - firstAttemptAt > policy.maxAttemptsDurationMs) {
        return {
          _tag: "Failed",
          attempts,
          lastError: `${outcome.error} (gave up: retries would exceed maxAttemptsDuration after ${attempts} attempts)`
        }
      }
      return { _tag: "RetryScheduled", attempts, nextFireAt, firstAttemptAt, lastError: outcome.error }
    }
  }
}

/** The timer as it stands after an update is written. */
export const applyFiringUpdate = (timer: TimerRecord, update: FiringUpdate, now: number): TimerRecord => {
  const { executedAt: _e, firstAttemptAt: _f, lastError: _l, ...rest } = timer
  switch (update._tag) {
    case "Fired":
      return { ...rest, state: "FIRED", attempts: update.attempts, executedAt: update.executedAt, updatedAt: now, ...keepError(timer) }
    case "Rearmed":
      return {
        ...rest,
        state: "SCHEDULED",
        attempts: 0,
        executeAt: update.executeAt,
        nextFireAt: update.executeAt,
        firingId: update.firingId,
        executedAt: update.executedAt,
        updatedAt: now
      }
    case "RetryScheduled":
      return {
        ...rest,
        state: "SCHEDULED",
        attempts: update.attempts,
        nextFireAt: update.nextFireAt,
        firstAttemptAt: update.firstAttemptAt,
        lastError: update.lastError,
        updatedAt: now,
        ...keepExecutedAt(timer)
      }
    case "Failed":
      return {
        ...rest,
        state: "FAILED",
        attempts: update.attempts,
        lastError: update.lastError,
        updatedAt: now,
        ...keepExecutedAt(timer)
      }
  }
}

const keepError = (timer: TimerRecord) => (timer.lastError === undefined ? {} : { lastError: timer.lastError })

// executedAt is when the timer last fired; a later failed attempt does not erase it.
const keepExecutedAt = (timer: TimerRecord) => (timer.executedAt === undefined ? {} : { executedAt: timer.executedAt })
