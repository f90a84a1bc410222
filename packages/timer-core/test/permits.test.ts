import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
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

  it.effect("closing a line sends its waiters away at once, keeps other lines' waiters and the permits", () =>
    Effect.gen(function*() {
      const permits = yield* makePermits(1)
      const closing = permits.line()
      const staying = permits.line()
      const gate = Deferred.unsafeMake<void>(undefined as never)
      const holder = yield* Effect.fork(closing.withPermit(() => Deferred.await(gate).pipe(Effect.as("held"))))
      yield* Effect.yieldNow()
      const ran: Array<string> = []
      const left = yield* Effect.fork(closing.withPermit(() => Effect.sync(() => ran.push("left"))))
      const other = yield* Effect.fork(staying.withPermit((waited) => Effect.sync(() => ran.push(`other ${waited}`))))
      yield* Effect.yieldNow()

      yield* closing.close
      // The waiter of the closed line leaves without running; the holder keeps its permit.
      expect(yield* Fiber.join(left)).toEqual(Option.none())
      expect(ran).toEqual([])
      expect(yield* closing.withPermit(() => Effect.succeed("late"))).toEqual(Option.none())
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(holder)).toEqual(Option.some("held"))
      // The permit went to the other line's waiter, and is back afterwards.
      expect(yield* Fiber.join(other)).toEqual(Option.some(1))
      expect(ran).toEqual(["other true"])
      expect(yield* permits.withPermit(() => Effect.succeed("free"))).toBe("free")
    }))
})
