/**
 * The firing engine over the real SQLite store, with a scripted delivery, on
 * the TestClock: what each delivery outcome does (reschedule, retries with
 * backoff and Retry-After, permanent failure, maxAttemptsDuration).
 */
import { describe, expect, it } from "@effect/vitest"
import { DeliveryOutcome, RetryPolicy } from "@timer/core"
import { Effect, Random } from "effect"
import { timeline } from "./support/fakeDelivery.js"
import { advanceTo, HOUR, MINUTE, SECOND, startEngine, T0 } from "./support/engineHarness.js"

const { delivered, permanent, reschedule, retryable } = DeliveryOutcome

describe("outcomes", () => {
  it.scoped("Reschedule re-arms the timer at the time the callback asked for, under a new firing id", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        script: (delivery) => delivery.script("again", reschedule(T0 + 10 * MINUTE), delivered)
      })
      yield* h.create("again", T0 + 5 * SECOND)
      yield* advanceTo(T0 + 5 * SECOND)
      const first = h.delivery.callsOf("again")
      expect(timeline(first)).toEqual([["again", T0 + 5 * SECOND]])

      const rearmed = yield* h.row("again")
      expect(rearmed).toMatchObject({
        state: "SCHEDULED",
        executeAt: T0 + 10 * MINUTE,
        nextFireAt: T0 + 10 * MINUTE,
        attempts: 0,
        executedAt: T0 + 5 * SECOND
      })
      expect(rearmed.firingId).not.toBe(first[0]!.firingId)

      yield* advanceTo(T0 + 10 * MINUTE - 1)
      expect(h.delivery.callsOf("again")).toHaveLength(1)
      yield* advanceTo(T0 + HOUR)
      const calls = h.delivery.callsOf("again")
      expect(timeline(calls)).toEqual([["again", T0 + 5 * SECOND], ["again", T0 + 10 * MINUTE]])
      expect(calls[1]!.attempt).toBe(1)
      expect(calls[1]!.firingId).toBe(rearmed.firingId)
      expect(calls[1]!.firingId).not.toBe(calls[0]!.firingId)
      expect(yield* h.row("again")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 10 * MINUTE })
    }))

  it.scoped("Reschedule after failed attempts starts the new arming afresh: attempts 0, retry state cleared", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        random: Random.fixed([0]),
        script: (delivery) =>
          delivery.script("recover", retryable("HTTP 500"), retryable("HTTP 502"), reschedule(T0 + 10 * MINUTE), delivered)
      })
      yield* h.create("recover", T0 + 5 * SECOND)
      // Jitter 0: retries after 500ms, then 1s.
      yield* advanceTo(T0 + 5 * SECOND + 1_500)
      const calls = h.delivery.callsOf("recover")
      expect(timeline(calls)).toEqual([
        ["recover", T0 + 5 * SECOND],
        ["recover", T0 + 5 * SECOND + 500],
        ["recover", T0 + 5 * SECOND + 1_500]
      ])
      expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3])

      const rearmed = yield* h.row("recover")
      expect(rearmed).toMatchObject({
        state: "SCHEDULED",
        attempts: 0,
        executeAt: T0 + 10 * MINUTE,
        nextFireAt: T0 + 10 * MINUTE,
        executedAt: T0 + 5 * SECOND + 1_500
      })
      expect(rearmed.lastError).toBeUndefined()
      expect(rearmed.firstAttemptAt).toBeUndefined()
      expect(rearmed.firingId).not.toBe(calls[0]!.firingId)

      yield* advanceTo(T0 + HOUR)
      const after = h.delivery.callsOf("recover")
      expect(after).toHaveLength(4)
      expect(after[3]).toMatchObject({ at: T0 + 10 * MINUTE, attempt: 1, firingId: rearmed.firingId })
      expect(yield* h.row("recover")).toMatchObject({ state: "FIRED", attempts: 1, executedAt: T0 + 10 * MINUTE })
    }))

  const jitters: ReadonlyArray<readonly [string, number | undefined]> = [
    ["random jitter", undefined],
    ["jitter 0: the band's lower edge", 0],
    ["jitter ~1: the band's upper edge", 0.999999]
  ]
  for (const [label, jitter] of jitters) {
    it.scoped(`Retryable failures back off exponentially within the jitter band, then the timer FAILS after maxAttempts (${label})`, () =>
      Effect.gen(function*() {
        // Bases: 1s, 5s, then 25s and 125s capped at 10s. An uncapped base would give a delay of at least 12.5s.
        const policy = new RetryPolicy({ maxAttempts: 5, initialInterval: SECOND, backoffMultiplier: 5, maxInterval: 10 * SECOND })
        const bases = [SECOND, 5 * SECOND, 10 * SECOND, 10 * SECOND]
        const h = yield* startEngine({
          script: (delivery) =>
            delivery.script("flaky", ...[1, 2, 3, 4, 5].map((n) => retryable(`HTTP 503 #${n}`))),
          ...(jitter === undefined ? {} : { random: Random.fixed([jitter]) })
        })
        const start = T0 + SECOND
        yield* h.create("flaky", start, { retryPolicy: policy })
        yield* advanceTo(start)
        expect(timeline(h.delivery.callsOf("flaky"))).toEqual([["flaky", start]])
        const firingId = h.delivery.callsOf("flaky")[0]!.firingId

        for (const [i, base] of bases.entries()) {
          const failures = i + 1
          const last = h.delivery.callsOf("flaky")[i]!
          const row = yield* h.row("flaky")
          expect(row).toMatchObject({
            state: "SCHEDULED",
            attempts: failures,
            lastError: `HTTP 503 #${failures}`,
            firstAttemptAt: start,
            firingId
          })
          const delay = row.nextFireAt - last.at
          expect(delay).toBeGreaterThanOrEqual(base / 2)
          expect(delay).toBeLessThanOrEqual(base)
          if (jitter !== undefined) expect(delay).toBe(Math.round(base / 2 + (base / 2) * jitter))

          yield* advanceTo(last.at + base / 2 - 1)
          expect(h.delivery.callsOf("flaky")).toHaveLength(failures)
          yield* advanceTo(row.nextFireAt - 1)
          expect(h.delivery.callsOf("flaky")).toHaveLength(failures)
          yield* advanceTo(row.nextFireAt)
          const calls = h.delivery.callsOf("flaky")
          expect(calls).toHaveLength(failures + 1)
          expect(calls[failures]!.at).toBe(row.nextFireAt)
          expect(calls[failures]!.attempt).toBe(failures + 1)
          expect(calls[failures]!.firingId).toBe(firingId)
        }

        const final = yield* h.row("flaky")
        expect(final.state).toBe("FAILED")
        expect(final.attempts).toBe(5)
        expect(final.lastError).toContain("HTTP 503 #5")
        expect(final.lastError).toContain("gave up after 5 attempts")

        yield* advanceTo(T0 + 24 * HOUR)
        expect(h.delivery.callsOf("flaky")).toHaveLength(5)
      }))
  }

  it.scoped("Retry-After replaces the backoff and is capped by maxInterval", () =>
    Effect.gen(function*() {
      const policy = new RetryPolicy({ maxAttempts: 5, initialInterval: SECOND, maxInterval: 5 * SECOND })
      const h = yield* startEngine({
        script: (delivery) =>
          delivery.script("busy", retryable("HTTP 429", 2_500), retryable("HTTP 503", 60 * SECOND), delivered)
      })
      yield* h.create("busy", T0 + SECOND, { retryPolicy: policy })
      yield* advanceTo(T0 + SECOND)
      expect(yield* h.row("busy")).toMatchObject({ attempts: 1, nextFireAt: T0 + 3_500, lastError: "HTTP 429" })

      yield* advanceTo(T0 + 3_499)
      expect(h.delivery.callsOf("busy")).toHaveLength(1)
      yield* advanceTo(T0 + 3_500)
      expect(h.delivery.callsOf("busy")).toHaveLength(2)
      // Asked for 60s, capped at maxInterval 5s.
      expect(yield* h.row("busy")).toMatchObject({ attempts: 2, nextFireAt: T0 + 8_500, lastError: "HTTP 503" })

      yield* advanceTo(T0 + HOUR)
      const calls = h.delivery.callsOf("busy")
      expect(timeline(calls)).toEqual([["busy", T0 + SECOND], ["busy", T0 + 3_500], ["busy", T0 + 8_500]])
      expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3])
      expect(new Set(calls.map((call) => call.firingId)).size).toBe(1)
      expect(yield* h.row("busy")).toMatchObject({ state: "FIRED", attempts: 3, executedAt: T0 + 8_500 })
    }))

  it.scoped("Permanent fails the timer at once after one attempt", () =>
    Effect.gen(function*() {
      const h = yield* startEngine({
        script: (delivery) => delivery.script("gone", permanent("HTTP 404 (not retried)"))
      })
      yield* h.create("gone", T0 + SECOND)
      yield* advanceTo(T0 + SECOND)
      expect(yield* h.row("gone")).toMatchObject({ state: "FAILED", attempts: 1, lastError: "HTTP 404 (not retried)" })
      yield* advanceTo(T0 + 24 * HOUR)
      expect(timeline(h.delivery.callsOf("gone"))).toEqual([["gone", T0 + SECOND]])
    }))

  it.scoped("maxAttemptsDuration stops the retries even though attempts are left", () =>
    Effect.gen(function*() {
      // Every delay is in [2s, 4s]; no retry may start more than 10s after the first attempt.
      const policy = new RetryPolicy({
        maxAttempts: 1000,
        maxAttemptsDuration: 10 * SECOND,
        initialInterval: 4 * SECOND,
        backoffMultiplier: 1,
        maxInterval: 4 * SECOND
      })
      const h = yield* startEngine({
        script: (delivery) => delivery.script("slow", ...Array.from({ length: 50 }, () => retryable("HTTP 500")))
      })
      const start = T0 + SECOND
      yield* h.create("slow", start, { retryPolicy: policy })
      yield* advanceTo(T0 + HOUR)

      const calls = h.delivery.callsOf("slow")
      const last = calls[calls.length - 1]!
      expect(calls[0]!.at).toBe(start)
      expect(calls.length).toBeGreaterThanOrEqual(3)
      expect(calls.length).toBeLessThanOrEqual(6)
      // The last attempt started within the window, and its retry (at least 2s later) would have left it.
      expect(last.at - start).toBeLessThanOrEqual(10 * SECOND)
      expect(last.at - start).toBeGreaterThan(6 * SECOND)
      for (let i = 1; i < calls.length; i++) {
        expect(calls[i]!.at - calls[i - 1]!.at).toBeGreaterThanOrEqual(2 * SECOND)
        expect(calls[i]!.at - calls[i - 1]!.at).toBeLessThanOrEqual(4 * SECOND)
      }
      const final = yield* h.row("slow")
      expect(final).toMatchObject({ state: "FAILED", attempts: calls.length, updatedAt: last.at })
      expect(final.lastError).toContain("HTTP 500")
      expect(final.lastError).toContain("maxAttemptsDuration")
    }))
})
