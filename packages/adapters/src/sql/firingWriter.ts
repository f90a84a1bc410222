/**
 * Group commit of firing outcomes: every outcome waiting to be written goes
 * into one transaction, so a burst of firings costs one commit (one fsync),
 * not one each, and outcomes of one kind are written by one statement. Each
 * outcome is still fenced by its own lease's version, read under a share lock
 * in the same transaction: a stale lease fails only the outcomes written under it.
 */
import { type FiringUpdate, type ShardLease, shardKey, ShardOwnershipLost, type ShardRef, StoreError, type TimerKey } from "@timer/core"
import { Deferred, Effect, Exit, Queue, type Scope } from "effect"

/** One outcome to write. */
export interface PendingFiring {
  readonly lease: ShardLease
  readonly key: TimerKey
  readonly firingId: string
  readonly update: FiringUpdate
  readonly now: number
}

/** What the writer needs from the database; all of it runs in one transaction. */
export interface FiringWriterOps<E> {
  /** The current versions of these shards, locked until the transaction ends (by shardKey). */
  readonly shardVersions: (shards: ReadonlyArray<ShardRef>) => Effect.Effect<ReadonlyMap<string, number>, E>
  /** Writes outcomes of one kind on distinct timers; returns the keys (timerKeyOf) of those whose arming was still there. */
  readonly write: (firings: ReadonlyArray<PendingFiring>) => Effect.Effect<ReadonlySet<string>, E>
  /** Runs the batch in one transaction. */
  readonly transaction: <A, E2>(effect: Effect.Effect<A, E2>) => Effect.Effect<A, E2 | E>
}

/** A timer's key as one string. */
export const timerKeyOf = (key: TimerKey) => `${key.namespace}\u0000${key.id}`

/** The largest number of outcomes written in one transaction. */
const MAX_BATCH = 256

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
        const shards = new Map(entries.map(({ firing: { lease } }) => [shardKey(lease), lease as ShardRef]))
        const versions = yield* ops.shardVersions(Array.from(shards.values()))
        const lost = (lease: ShardLease) =>
          versions.get(shardKey(lease)) === lease.version
            ? undefined
            : new ShardOwnershipLost({ namespace: lease.namespace, shardId: lease.shardId, heldVersion: lease.version })
        const results = new Array<Exit.Exit<boolean, ShardOwnershipLost>>(entries.length)
        // One statement per kind of outcome and round: a timer twice in a batch waits for the next round.
        let pending = entries.map((entry, index) => ({ firing: entry.firing, index }))
        while (pending.length > 0) {
          const round = new Map<string, { firing: PendingFiring; index: number }>()
          const later: typeof pending = []
          for (const item of pending) {
            const error = lost(item.firing.lease)
            if (error !== undefined) results[item.index] = Exit.fail(error)
            else if (round.has(timerKeyOf(item.firing.key))) later.push(item)
            else round.set(timerKeyOf(item.firing.key), item)
          }
          const byKind = new Map<string, Array<{ firing: PendingFiring; index: number }>>()
          for (const item of round.values()) {
            const kind = byKind.get(item.firing.update._tag)
            if (kind === undefined) byKind.set(item.firing.update._tag, [item])
            else kind.push(item)
          }
          for (const items of byKind.values()) {
            const written = yield* ops.write(items.map((item) => item.firing))
            for (const item of items) results[item.index] = Exit.succeed(written.has(timerKeyOf(item.firing.key)))
          }
          pending = later
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
