import { describe, expect, it } from "@effect/vitest"
import {
  applyFiringUpdate,
  DeliveryOutcome,
  type FiringContext,
  firingUpdate,
  RetryPolicy,
  type TimerRecord
} from "../src/index.js"

const T0 = Date.UTC(2026, 0, 1)

const timer = (overrides: Partial<TimerRecord> = {}): TimerRecord => ({
  namespace: "default",
  id: "t-1",
  shardId: 3,
  executeAt: T0,
  nextFireAt: T0,
  callbackUrl: "http://callback.test/hook",
  callbackTimeoutSeconds: 10,
  state: "SCHEDULED",
  attempts: 0,
  firingId: "firing-1",
  createdAt: T0 - 60_000,
  updatedAt: T0 - 60_000,
  ...overrides
})

const ctx = (overrides: Partial<FiringContext> = {}): FiringContext => ({
  firedAt: T0 + 10,
  now: T0 + 250,
  random: 0,
  newFiringId: "firing-2",
  ...overrides
})

describe("firingUpdate", () => {
  it("Delivered: FIRED, one more attempt, executedAt when the attempt ended", () => {
    expect(firingUpdate(timer(), DeliveryOutcome.delivered, ctx())).toEqual({ _tag: "Fired", attempts: 1, executedAt: T0 + 250 })
    expect(firingUpdate(timer({ attempts: 4 }), DeliveryOutcome.delivered, ctx())).toMatchObject({ attempts: 5 })
  })

  it("Reschedule: re-armed at the asked time under the new firing id", () => {
    expect(firingUpdate(timer({ attempts: 2 }), DeliveryOutcome.reschedule(T0 + 3_600_000), ctx())).toEqual({
      _tag: "Rearmed",
      executeAt: T0 + 3_600_000,
      firingId: "firing-2",
      executedAt: T0 + 250
    })
  })

  it("Reschedule to a time not later than executeAt is a failed attempt, so a callback cannot loop the timer", () => {
    for (const next of [T0, T0 - 1]) {
      const update = firingUpdate(timer(), DeliveryOutcome.reschedule(next), ctx())
      expect(update._tag).toBe("RetryScheduled")
      expect(update).toMatchObject({ attempts: 1, lastError: expect.stringContaining("not later than executeAt") })
    }
    expect(firingUpdate(timer({ attempts: 9 }), DeliveryOutcome.reschedule(T0), ctx())._tag).toBe("Failed")
  })

  it("Permanent: FAILED at once with the error, whatever attempts are left", () => {
    expect(firingUpdate(timer(), DeliveryOutcome.permanent("HTTP 404"), ctx())).toEqual({
      _tag: "Failed",
      attempts: 1,
      lastError: "HTTP 404"
    })
  })

  it("Retryable: retried after the backoff from the end of the attempt, first attempt time recorded", () => {
    const policy = new RetryPolicy({ initialInterval: 2_000, backoffMultiplier: 3 })
    expect(firingUpdate(timer({ retryPolicy: policy }), DeliveryOutcome.retryable("HTTP 503"), ctx())).toEqual({
      _tag: "RetryScheduled",
      attempts: 1,
      nextFireAt: T0 + 250 + 1_000,
      firstAttemptAt: T0 + 10,
      lastError: "HTTP 503"
    })
    // Third failure: base 2s × 3² = 18s, top of the band.
    const third = firingUpdate(
      timer({ retryPolicy: policy, attempts: 2, firstAttemptAt: T0 - 30_000 }),
      DeliveryOutcome.retryable("HTTP 503"),
      ctx({ random: 0.999999 })
    )
    expect(third).toEqual({
      _tag: "RetryScheduled",
      attempts: 3,
      nextFireAt: T0 + 250 + 18_000,
      firstAttemptAt: T0 - 30_000,
      lastError: "HTTP 503"
    })
  })

  it("Retryable with Retry-After: waits that long, capped by maxInterval", () => {
    const policy = new RetryPolicy({ maxInterval: 10_000 })
    expect(firingUpdate(timer({ retryPolicy: policy }), DeliveryOutcome.retryable("HTTP 429", 7_000), ctx())).toMatchObject({
      _tag: "RetryScheduled",
      nextFireAt: T0 + 250 + 7_000
    })
    expect(firingUpdate(timer({ retryPolicy: policy }), DeliveryOutcome.retryable("HTTP 429", 70_000), ctx())).toMatchObject({
      _tag: "RetryScheduled",
      nextFireAt: T0 + 250 + 10_000
    })
  })

  it("Retryable on the last allowed attempt: FAILED, saying it gave up", () => {
    const policy = new RetryPolicy({ maxAttempts: 3 })
    expect(firingUpdate(timer({ retryPolicy: policy, attempts: 1 }), DeliveryOutcome.retryable("boom"), ctx())._tag).toBe(
      "RetryScheduled"
    )
    const last = firingUpdate(timer({ retryPolicy: policy, attempts: 2 }), DeliveryOutcome.retryable("boom"), ctx())
    expect(last).toEqual({ _tag: "Failed", attempts: 3, lastError: "boom (gave up after 3 attempts)" })
    // maxAttempts 1: the first failure is final.
    expect(
      firingUpdate(timer({ retryPolicy: new RetryPolicy({ maxAttempts: 1 }) }), DeliveryOutcome.retryable("boom"), ctx())
    ).toMatchObject({ _tag: "Failed", attempts: 1 })
    // The default policy allows 10 attempts.
    expect(firingUpdate(timer({ attempts: 8 }), DeliveryOutcome.retryable("x"), ctx())._tag).toBe("RetryScheduled")
    expect(firingUpdate(timer({ attempts: 9 }), DeliveryOutcome.retryable("x"), ctx())._tag).toBe("Failed")
  })

  it("Retryable past maxAttemptsDuration: FAILED, even with attempts left", () => {
    const policy = new RetryPolicy({ maxAttemptsDuration: 60_000, initialInterval: 10_000, backoffMultiplier: 1, maxInterval: 10_000 })
    const at = (now: number) =>
      firingUpdate(
        timer({ retryPolicy: policy, attempts: 3, firstAttemptAt: T0 }),
        DeliveryOutcome.retryable("HTTP 500"),
        ctx({ firedAt: now - 100, now, random: 0 })
      )
    // The retry would start exactly at the limit: still allowed.
    expect(at(T0 + 55_000)).toMatchObject({ _tag: "RetryScheduled", nextFireAt: T0 + 60_000, firstAttemptAt: T0 })
    const late = at(T0 + 55_001)
    expect(late._tag).toBe("Failed")
    expect(late).toMatchObject({ attempts: 4 })
    expect(late._tag === "Failed" && late.lastError).toContain("maxAttemptsDuration")
    expect(late._tag === "Failed" && late.lastError).toContain("HTTP 500")
  })
})

describe("applyFiringUpdate", () => {
  const retrying = timer({ attempts: 2, nextFireAt: T0 + 5_000, firstAttemptAt: T0, lastError: "HTTP 503" })

  it("Fired: FIRED with the attempts and executedAt, the last error kept", () => {
    const next = applyFiringUpdate(retrying, { _tag: "Fired", attempts: 3, executedAt: T0 + 6_000 }, T0 + 6_001)
    const { firstAttemptAt: _dropped, ...rest } = retrying
    expect(next).toStrictEqual({ ...rest, state: "FIRED", attempts: 3, executedAt: T0 + 6_000, updatedAt: T0 + 6_001 })
  })

  it("Rearmed: SCHEDULED at the new time, attempts 0, new firing id, retry state dropped", () => {
    const next = applyFiringUpdate(
      retrying,
      { _tag: "Rearmed", executeAt: T0 + 3_600_000, firingId: "firing-2", executedAt: T0 + 6_000 },
      T0 + 6_001
    )
    expect(next).toMatchObject({
      state: "SCHEDULED",
      attempts: 0,
      executeAt: T0 + 3_600_000,
      nextFireAt: T0 + 3_600_000,
      firingId: "firing-2",
      executedAt: T0 + 6_000,
      updatedAt: T0 + 6_001
    })
    expect("lastError" in next).toBe(false)
    expect("firstAttemptAt" in next).toBe(false)
  })

  it("RetryScheduled: still SCHEDULED under the same firing id, next attempt time and error recorded", () => {
    const next = applyFiringUpdate(
      retrying,
      { _tag: "RetryScheduled", attempts: 3, nextFireAt: T0 + 9_000, firstAttemptAt: T0, lastError: "HTTP 502" },
      T0 + 6_001
    )
    expect(next).toMatchObject({
      state: "SCHEDULED",
      attempts: 3,
      executeAt: T0,
      nextFireAt: T0 + 9_000,
      firstAttemptAt: T0,
      firingId: "firing-1",
      lastError: "HTTP 502",
      updatedAt: T0 + 6_001
    })
  })

  it("Failed: FAILED with the attempts and the error", () => {
    const next = applyFiringUpdate(retrying, { _tag: "Failed", attempts: 3, lastError: "gave up" }, T0 + 6_001)
    expect(next).toMatchObject({ state: "FAILED", attempts: 3, lastError: "gave up", firingId: "firing-1", updatedAt: T0 + 6_001 })
  })

  it("agrees with firingUpdate over a whole retry sequence", () => {
    const policy = new RetryPolicy({ maxAttempts: 3, initialInterval: 1_000 })
    let current = timer({ retryPolicy: policy })
    const outcomes = [DeliveryOutcome.retryable("a"), DeliveryOutcome.retryable("b"), DeliveryOutcome.retryable("c")]
    const seen: Array<string> = []
    for (const outcome of outcomes) {
      const now = current.nextFireAt + 100
      const update = firingUpdate(current, outcome, ctx({ firedAt: current.nextFireAt, now, random: 0 }))
      seen.push(update._tag)
      current = applyFiringUpdate(current, update, now)
    }
    expect(seen).toEqual(["RetryScheduled", "RetryScheduled", "Failed"])
    expect(current).toMatchObject({ state: "FAILED", attempts: 3, firingId: "firing-1", lastError: "c (gave up after 3 attempts)" })
  })
})
