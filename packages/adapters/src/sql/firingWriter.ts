/**
 * Group commit of firing outcomes: every outcome waiting to be written goes
 * into one transaction, so a burst of firings costs one commit (one fsync),
 * not one each. Each outcome is still fenced by its own lease's version: a
 * stale lease fails only the outcomes written under it.
 */
import { type FiringUpdate, type ShardLease, ShardOwnershipLost, StoreError, type TimerKey } from "@timer/core"
import { Deferred, Effect, Exit, Queue, type Scope } from "effect"

/** One outcome to write. */
export interface PendingFiring {
  readonly lease: ShardLease
  readonly key: TimerKey
  readonly firingId: string
  readonly update: FiringUpdate
  readonly now: number
}

/** What the writer needs from the database. */
export interface FiringWriterOps<E> {
  /** Fails when the shard is no longer at the lease's version. */
  readonly checkLease: (lease: ShardLease) => Effect.Effect<void, ShardOwnershipLost | E>
  /** Writes one outcome; true when the arming that fired was still there. */
  readonly write: (firing: PendingFiring) => Effect.Effect<boolean, E>
  /** Runs the batch in one transaction. */
  readonly transaction: <A, E2>(effect: Effect.Effect<A, E2>) => Effect.Effect<A, E2 | E>
}

/** The largest number of outcomes written in one transaction. */
const MAX_BATCH = 256

const leaseKey = (lease: ShardLease) => `${lease.namespace}/${lease.shardId}@${lease.version}`

/** Resumes after one turn of Node's event loop (real time, whatever the Clock service). */
const nextEventLoopTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

interface Entry {
  readonly firing: PendingFiring
  readonly done: Deferred.Deferred<boolean, ShardOwnershipLost | StoreError>
}

/** Starts the writer for the life of the scope; returns the function that queues an outcome and waits for its commit. */
export const makeFiringWriter = <E>(ops: FiringWriterOps<E>): Effect.Effect<
  (firing: PendingFiring) => Effect.Effect<boolean, ShardOwnershipLost | StoreError>,
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Entry>()
    const closing = new StoreError({ operation: "recordFiring", cause: "the store is closing" })
    // Nobody waits forever: entries still queued when the store closes fail.
    yield* Effect.addFinalizer(() =>
      Queue.takeAll(queue).pipe(
        Effect.flatMap((entries) => Effect.forEach(entries, (entry) => Deferred.fail(entry.done, closing), { discard: true })),
        Effect.zipRight(Queue.shutdown(queue))
      )
    )

    const writeBatch = (entries: ReadonlyArray<Entry>) =>
      Effect.gen(function*() {
        const lost = new Map<string, ShardOwnershipLost>()
        for (const { firing } of entries) {
          const key = leaseKey(firing.lease)
          if (lost.has(key)) continue
          const checked = yield* Effect.either(ops.checkLease(firing.lease))
          if (checked._tag === "Left") {
            if (!(checked.left instanceof ShardOwnershipLost)) return yield* Effect.fail(checked.left)
            lost.set(key, checked.left)
          }
        }
        const results: Array<Exit.Exit<boolean, ShardOwnershipLost>> = []
        for (const { firing } of entries) {
          const error = lost.get(leaseKey(firing.lease))
          results.push(error === undefined ? Exit.succeed(yield* ops.write(firing)) : Exit.fail(error))
        }
        return results
      }).pipe(ops.transaction)

    const loop = Effect.gen(function*() {
      const first = Array.from(yield* Queue.takeBetween(queue, 1, MAX_BATCH))
      const entries = yield* Effect.gen(function*() {
        // One turn of the event loop lets the deliveries whose answers arrived meanwhile join the batch.
        yield* nextEventLoopTurn
        return [...first, ...(yield* Queue.takeUpTo(queue, MAX_BATCH - first.length))]
      }).pipe(Effect.onInterrupt(() => Effect.forEach(first, (entry) => Deferred.fail(entry.done, closing), { discard: true })))
      // A batch once taken is written and answered whole, even during shutdown.
      yield* Effect.uninterruptible(Effect.gen(function*() {
        const outcome = yield* Effect.exit(writeBatch(entries))
        yield* Effect.forEach(entries, (entry, i) =>
          Exit.isSuccess(outcome)
            ? Deferred.done(entry.done, outcome.value[i]!)
            : Deferred.fail(entry.done, new StoreError({ operation: "recordFiring", cause: outcome.cause })), { discard: true })
      }))
    })
    yield* Effect.forkScoped(Effect.forever(loop))

    return (firing: PendingFiring) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<boolean, ShardOwnershipLost | StoreError>()
        yield* Queue.offer(queue, { firing, done })
        return yield* Deferred.await(done)
      })
  })
