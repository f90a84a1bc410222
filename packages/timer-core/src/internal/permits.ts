/**
 * A fair counting semaphore for many waiters: a release hands its permit to
 * exactly one waiter, first come first served. (Effect 3's Semaphore wakes
 * every waiter on each release, which costs O(waiters) per delivery when
 * hundreds of deliveries wait for a permit.) A waiter interrupted after a
 * permit was handed to it passes the permit on, so none is ever lost.
 *
 * Waiters queue in lines (one per shard): closing a line sends its waiters
 * away at once, without a fiber racing each wait.
 */
import { Deferred, Effect, Option } from "effect"

/** The waiters of one group, all leaving at once when it closes. */
export interface PermitLine {
  /**
   * Runs `use` holding a permit (`waited` says whether it had to wait for one);
   * None, without running it, when the line was closed before a permit came.
   */
  readonly withPermit: <A, E, R>(use: (waited: boolean) => Effect.Effect<A, E, R>) => Effect.Effect<Option.Option<A>, E, R>
  /** Closes the line: its waiters leave with None, and later arrivals get None at once. */
  readonly close: Effect.Effect<void>
}

/** Runs effects with at most a fixed number at once. */
export interface Permits {
  /** Runs `use` holding a permit; `waited` says whether it had to wait for one. */
  readonly withPermit: <A, E, R>(use: (waited: boolean) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** A new line of waiters. */
  readonly line: () => PermitLine
}

interface Waiter {
  /** true: a permit was handed over; false: the line closed. */
  readonly handoff: Deferred.Deferred<boolean>
  readonly line: Set<Waiter>
  /** Set when a permit is handed over. */
  granted: boolean
}

/** Makes `count` permits. */
export const makePermits = (count: number): Effect.Effect<Permits> =>
  Effect.sync(() => {
    let free = count
    const waiters = new Set<Waiter>()

    const release = () => {
      const next = waiters.values().next()
      if (next.done === true) {
        free++
      } else {
        const waiter = next.value
        waiters.delete(waiter)
        waiter.line.delete(waiter)
        waiter.granted = true
        Deferred.unsafeDone(waiter.handoff, Effect.succeed(true))
      }
    }

    /** Takes a permit: Some(waited) once it has one, None when the line closed first. */
    const acquire = (line: Set<Waiter>, isClosed: () => boolean) =>
      Effect.suspend((): Effect.Effect<Option.Option<boolean>> => {
        if (isClosed()) return Effect.succeed(Option.none())
        if (free > 0) {
          free--
          return Effect.succeed(Option.some(false))
        }
        const waiter: Waiter = { handoff: Deferred.unsafeMake<boolean>(undefined as never), line, granted: false }
        waiters.add(waiter)
        line.add(waiter)
        return Deferred.await(waiter.handoff).pipe(
          Effect.map((granted) => (granted ? Option.some(true) : Option.none())),
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              // Still waiting: leave the line. Already handed a permit: pass it on.
              if (waiters.delete(waiter)) line.delete(waiter)
              else if (waiter.granted) release()
            })
          )
        )
      })

    const run = <A, E, R>(line: Set<Waiter>, isClosed: () => boolean, use: (waited: boolean) => Effect.Effect<A, E, R>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(acquire(line, isClosed)), (waited) =>
          Option.isNone(waited)
            ? Effect.succeed(Option.none<A>())
            : restore(use(waited.value)).pipe(Effect.map(Option.some), Effect.ensuring(Effect.sync(release))))
      )

    const unlined = new Set<Waiter>()
    return {
      withPermit: (use) => Effect.map(run(unlined, () => false, use), Option.getOrThrow),
      line: () => {
        const line = new Set<Waiter>()
        let closed = false
        return {
          withPermit: (use) => run(line, () => closed, use),
          close: Effect.sync(() => {
            closed = true
            for (const waiter of line) {
              waiters.delete(waiter)
              Deferred.unsafeDone(waiter.handoff, Effect.succeed(false))
            }
            line.clear()
          })
        }
      }
    }
  })
