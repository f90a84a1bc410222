/**
 * A fair counting semaphore for many waiters: a release hands its permit to
 * exactly one waiter, first come first served. (Effect 3's Semaphore wakes
 * every waiter on each release, which costs O(waiters) per delivery when
 * hundreds of deliveries wait for a permit.) A waiter interrupted after a
 * permit was handed to it passes the permit on, so none is ever lost.
 */
import { Deferred, Effect } from "effect"

/** Runs effects with at most a fixed number at once. */
export interface Permits {
  /** Runs `use` holding a permit; `waited` says whether it had to wait for one. */
  readonly withPermit: <A, E, R>(use: (waited: boolean) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** Makes `count` permits. */
export const makePermits = (count: number): Effect.Effect<Permits> =>
  Effect.sync(() => {
    let free = count
    const waiters = new Set<Deferred.Deferred<void>>()

    const release = () => {
      const next = waiters.values().next()
      if (next.done === true) {
        free++
      } else {
        waiters.delete(next.value)
        Deferred.unsafeDone(next.value, Effect.void)
      }
    }

    /** Takes a permit; succeeds with true when it had to wait for one. */
    const acquire = Effect.suspend((): Effect.Effect<boolean> => {
      if (free > 0) {
        free--
        return Effect.succeed(false)
      }
      const handoff = Deferred.unsafeMake<void>(undefined as never)
      waiters.add(handoff)
      return Deferred.await(handoff).pipe(
        Effect.as(true),
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            // Still waiting: leave the line. Already handed a permit: pass it on.
            if (!waiters.delete(handoff)) release()
          })
        )
      )
    })

    return {
      withPermit: (use) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(acquire), (waited) => restore(use(waited)).pipe(Effect.ensuring(Effect.sync(release))))
        )
    }
  })
