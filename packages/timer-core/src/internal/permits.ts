/**
 * A fair counting semaphore for many waiters: permits are tokens in a queue,
 * so a release hands its token to exactly one waiter, first come first served.
 * (Effect 3's Semaphore wakes every waiter on each release, which costs
 * O(waiters) per delivery when hundreds of deliveries wait for a permit.)
 */
import { Effect, Queue } from "effect"

/** Runs effects with at most a fixed number at once. */
export interface Permits {
  readonly withPermit: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** Makes `count` permits. */
export const makePermits = (count: number): Effect.Effect<Permits> =>
  Effect.gen(function*() {
    const tokens = yield* Queue.bounded<void>(count)
    yield* Queue.offerAll(tokens, Array.from({ length: count }, () => undefined))
    return {
      withPermit: (effect) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.zipRight(
            restore(Queue.take(tokens)),
            restore(effect).pipe(Effect.ensuring(Queue.offer(tokens, undefined)))
          )
        )
    }
  })
