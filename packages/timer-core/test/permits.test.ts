import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { makePermits } from "../src/internal/permits.js"

describe("permits", () => {
  it.effect("never runs more than the count at once, and serves waiters first come first served", () =>
    Effect.gen(function*() {
      const permits = yield* makePermits(2)
      const gates = Array.from({ length: 5 }, () => Deferred.unsafeMake<void>(undefined as never))
      const started: Array<number> = []
      const waits: Array<boolean> = []
      let running = 0
      let peak = 0
      const fibers = yield* Effect.forEach(gates, (gate, i) =>
        Effect.fork(permits.withPermit((waited) => Effect.gen(function*() {
          started.push(i)
          waits.push(waited)
          running++
          peak = Math.max(peak, running)
          yield* Deferred.await(gate)
          running--
        }))))
      yield* Effect.yieldNow()
      expect(started).toEqual([0, 1])
      for (const gate of gates) {
        yield* Deferred.succeed(gate, undefined)
        yield* Effect.yieldNow()
      }
      yield* Fiber.joinAll(fibers)
      expect(started).toEqual([0, 1, 2, 3, 4])
      expect(waits).toEqual([false, false, true, true, true])
      expect(peak).toBe(2)
    }))

  it.effect("an interrupted waiter or holder gives no permit away for good", () =>
    Effect.gen(function*() {
      const permits = yield* makePermits(1)
      const holder = yield* Effect.fork(permits.withPermit(() => Effect.never))
      yield* Effect.yieldNow()
      const waiter = yield* Effect.fork(permits.withPermit(() => Effect.succeed("never ran")))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(waiter)
      yield* Fiber.interrupt(holder)
      // The single permit is back: this would hang if either fiber had kept it.
      expect(yield* permits.withPermit(() => Effect.succeed("ran"))).toBe("ran")
      expect(yield* permits.withPermit(() => Effect.succeed("again"))).toBe("again")
    }))
})
