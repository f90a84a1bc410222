import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { DEFAULT_RETRY_POLICY, type ResolvedRetryPolicy, resolveRetryPolicy, retryDelayMillis, RetryPolicy } from "../src/index.js"

const policy = (overrides: Partial<ResolvedRetryPolicy> = {}): ResolvedRetryPolicy => ({
  maxAttempts: 10,
  maxAttemptsDurationMs: 86_400_000,
  initialIntervalMs: 1_000,
  backoffMultiplier: 2,
  maxIntervalMs: 600_000,
  ...overrides
})

describe("resolveRetryPolicy", () => {
  it("fills every missing field with the defaults", () => {
    expect(resolveRetryPolicy(undefined)).toEqual({
      maxAttempts: 10,
      maxAttemptsDurationMs: 24 * 3_600_000,
      initialIntervalMs: 1_000,
      backoffMultiplier: 2,
      maxIntervalMs: 10 * 60_000
    })
    expect(resolveRetryPolicy(new RetryPolicy({}))).toEqual(DEFAULT_RETRY_POLICY)
  })

  it("keeps the fields a policy gives", () => {
    const resolved = resolveRetryPolicy(new RetryPolicy({ maxAttempts: 3, initialInterval: 250, maxInterval: 5_000 }))
    expect(resolved).toEqual({ ...DEFAULT_RETRY_POLICY, maxAttempts: 3, initialIntervalMs: 250, maxIntervalMs: 5_000 })
  })

  it("decodes durations written as strings", () => {
    const decoded = Schema.decodeUnknownSync(RetryPolicy)({
      maxAttempts: 4,
      maxAttemptsDuration: "1h",
      initialInterval: "500ms",
      backoffMultiplier: 3,
      maxInterval: "30s"
    })
    expect(resolveRetryPolicy(decoded)).toEqual({
      maxAttempts: 4,
      maxAttemptsDurationMs: 3_600_000,
      initialIntervalMs: 500,
      backoffMultiplier: 3,
      maxIntervalMs: 30_000
    })
    for (const bad of [{ maxAttempts: 0 }, { initialInterval: "0s" }, { maxInterval: "soon" }, { backoffMultiplier: 0.5 }]) {
      expect(Either.isLeft(Schema.decodeUnknownEither(RetryPolicy)(bad))).toBe(true)
    }
  })
})

describe("retryDelayMillis", () => {
  it("is initialInterval × multiplier^(n−1) at the top of the jitter band and half of it at the bottom", () => {
    const p = policy({ initialIntervalMs: 1_000, backoffMultiplier: 3, maxIntervalMs: 1_000_000 })
    const bases = [1_000, 3_000, 9_000, 27_000, 81_000]
    bases.forEach((base, i) => {
      expect(retryDelayMillis(p, i + 1, 0)).toBe(base / 2)
      expect(retryDelayMillis(p, i + 1, 0.5)).toBe(base * 0.75)
      expect(retryDelayMillis(p, i + 1, 0.999999)).toBe(base)
    })
  })

  it("stays within [base/2, base] for any random number", () => {
    const p = policy({ initialIntervalMs: 700, backoffMultiplier: 1.7, maxIntervalMs: 20_000 })
    for (let failed = 1; failed <= 12; failed++) {
      const base = Math.min(20_000, 700 * Math.pow(1.7, failed - 1))
      for (let k = 0; k < 100; k++) {
        const delay = retryDelayMillis(p, failed, k / 100)
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base / 2))
        expect(delay).toBeLessThanOrEqual(Math.ceil(base))
        expect(Number.isInteger(delay)).toBe(true)
      }
    }
  })

  it("caps the base at maxInterval", () => {
    const p = policy({ initialIntervalMs: 1_000, backoffMultiplier: 10, maxIntervalMs: 5_000 })
    expect(retryDelayMillis(p, 2, 0)).toBe(2_500)
    expect(retryDelayMillis(p, 2, 0.999999)).toBe(5_000)
    expect(retryDelayMillis(p, 50, 0.999999)).toBe(5_000)
    expect(retryDelayMillis(p, 1_000, 0)).toBe(2_500)
  })

  it("treats zero failures like the first", () => {
    expect(retryDelayMillis(policy(), 0, 0)).toBe(retryDelayMillis(policy(), 1, 0))
  })

  it("uses Retry-After instead of the backoff, capped by maxInterval and never negative", () => {
    const p = policy({ initialIntervalMs: 1_000, maxIntervalMs: 60_000 })
    expect(retryDelayMillis(p, 1, 0.3, 100)).toBe(100)
    expect(retryDelayMillis(p, 5, 0.3, 42_000)).toBe(42_000)
    expect(retryDelayMillis(p, 1, 0.3, 3_600_000)).toBe(60_000)
    expect(retryDelayMillis(p, 1, 0.3, 0)).toBe(0)
    expect(retryDelayMillis(p, 1, 0.3, -5_000)).toBe(0)
  })
})
