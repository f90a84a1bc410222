/**
 * How a failed delivery is retried: exponential backoff with jitter, capped
 * by a maximum interval, bounded by a number of attempts and a total duration.
 */
import { Schema } from "effect"
import { DurationMillis } from "./DurationString.js"

/** A retry policy as a caller gives it: every field optional, defaults fill the rest. */
export class RetryPolicy extends Schema.Class<RetryPolicy>("RetryPolicy")({
  maxAttempts: Schema.optional(
    Schema.Number.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.between(1, 1000, { message: () => "must be between 1 and 1000" })
    ).annotations({ description: "Total attempts, the first included (default 10)" })
  ),
  maxAttemptsDuration: Schema.optional(
    DurationMillis.annotations({ description: "No retry starts later than this after the first attempt (default \"24h\")" })
  ),
  initialInterval: Schema.optional(DurationMillis.annotations({ description: "Delay before the first retry (default \"1s\")" })),
  backoffMultiplier: Schema.optional(
    Schema.Number.pipe(Schema.between(1, 100, { message: () => "must be between 1 and 100" })).annotations({
      description: "Growth of the delay per attempt (default 2)"
    })
  ),
  maxInterval: Schema.optional(DurationMillis.annotations({ description: "Largest delay between attempts (default \"10m\")" }))
}) {}

/** A retry policy with every field resolved, durations in milliseconds. */
export interface ResolvedRetryPolicy {
  readonly maxAttempts: number
  readonly maxAttemptsDurationMs: number
  readonly initialIntervalMs: number
  readonly backoffMultiplier: number
  readonly maxIntervalMs: number
}

/** The defaults used for any field a timer's retry policy leaves out. */
export const DEFAULT_RETRY_POLICY: ResolvedRetryPolicy = {
  maxAttempts: 10,
  maxAttemptsDurationMs: 24 * 3_600_000,
  initialIntervalMs: 1_000,
  backoffMultiplier: 2,
  maxIntervalMs: 10 * 60_000
}

/** Fills the fields a policy leaves out with the defaults. */
export const resolveRetryPolicy = (policy: RetryPolicy | undefined): ResolvedRetryPolicy => ({
  maxAttempts: policy?.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
  maxAttemptsDurationMs: policy?.maxAttemptsDuration ?? DEFAULT_RETRY_POLICY.maxAttemptsDurationMs,
  initialIntervalMs: policy?.initialInterval ?? DEFAULT_RETRY_POLICY.initialIntervalMs,
  backoffMultiplier: policy?.backoffMultiplier ?? DEFAULT_RETRY_POLICY.backoffMultiplier,
  maxIntervalMs: policy?.maxInterval ?? DEFAULT_RETRY_POLICY.maxIntervalMs
})

/**
 * The delay before the next attempt after `failedAttempts` failures.
 * The base delay is initialInterval × multiplier^(failedAttempts − 1), capped by
 * maxInterval; "equal jitter" then picks a delay in [base/2, base]. A
 * Retry-After given by the receiver replaces the backoff, capped by maxInterval.
 * `random` is a number in [0, 1).
 */
export const retryDelayMillis = (
  policy: ResolvedRetryPolicy,
  failedAttempts: number,
  random: number,
  retryAfterMs?: number
): number => {
  if (retryAfterMs !== undefined) return Math.min(Math.max(0, retryAfterMs), policy.maxIntervalMs)
  const exponent = Math.max(0, failedAttempts - 1)
  const base = Math.min(policy.maxIntervalMs, policy.initialIntervalMs * Math.pow(policy.backoffMultiplier, exponent))
  return Math.round(base / 2 + (base / 2) * random)
}
