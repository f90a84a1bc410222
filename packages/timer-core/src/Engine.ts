/**
 * The firing engine: claims the shards of every namespace, runs one fiber per
 * owned shard, and gives the shards back on shutdown.
 */
import { Cause, Clock, Context, Data, Duration, Effect, Fiber, FiberMap, Layer, Option, Ref, Schedule } from "effect"
import { EngineConfig } from "./EngineConfig.js"
import { makePermits } from "./internal/permits.js"
import { runShard } from "./internal/shardRunner.js"
import { DEFAULT_NAMESPACE, Namespace } from "./Namespace.js"
import { type ShardRef, shardKey } from "./ShardId.js"
import { type ShardLease, ShardOwnership } from "./ShardOwnership.js"
import { TimerDelivery } from "./TimerDelivery.js"
import type { ShardOwnershipLost, StoreError } from "./TimerErrors.js"
import { TimerStore } from "./TimerStore.js"
import { TimerWakeups } from "./TimerWakeups.js"

/** The firing engine of this instance. */
export class Engine extends Context.Tag("@timer/Engine")<Engine, {
  /** Claims and starts the shards of a namespace (one just created, say). */
  readonly startNamespace: (namespace: Namespace) => Effect.Effect<void, StoreError>
  /** The leases this instance holds now. */
  readonly ownedShards: Effect.Effect<ReadonlyArray<ShardLease>>
  /** True once the shards of every namespace known at start are claimed. */
  readonly ready: Effect.Effect<boolean>
}>() {
  /** The engine, started when the layer is built and stopped when it is released. */
  static layer: Layer.Layer<
    Engine,
    StoreError,
    TimerStore | ShardOwnership | TimerDelivery | TimerWakeups | EngineConfig
  > = Layer.scoped(Engine, Effect.suspend(() => make))
}

/** A shard fiber that stopped on a store error or a defect, to be restarted. */
class Restart extends Data.TaggedError("Restart")<{ readonly cause: Cause.Cause<unknown> }> {}

/** Sorts why a shard fiber stopped: lost ownership ends it, interruption is passed on, anything else restarts it. */
const classifyStop = (cause: Cause.Cause<StoreError | ShardOwnershipLost>): Effect.Effect<never, ShardOwnershipLost | Restart> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const failure = Cause.failureOption(cause)
  return failure._tag === "Some" && failure.value._tag === "ShardOwnershipLost"
    ? Effect.fail(failure.value)
    : Effect.fail(new Restart({ cause }))
}

const make = Effect.gen(function*() {
  const store = yield* TimerStore
  const ownership = yield* ShardOwnership
  const config = yield* EngineConfig
  const context = yield* Effect.context<TimerStore | TimerDelivery | TimerWakeups | EngineConfig>()
  const deliveryPermits = yield* makePermits(config.deliveryConcurrency)
  const leases = new Map<string, ShardLease>()
  const runners = yield* FiberMap.make<string>()
  const ready = yield* Ref.make(false)

  const startLock = yield* Effect.makeSemaphore(1)

  /**
   * Runs one shard until shutdown or lost ownership. A store failure or a
   * defect restarts it after a backoff (200 ms doubling to 30 s, reset after a
   * minute of health), so no shard is dropped silently.
   */
  const supervise = (lease: ShardLease) =>
    runShard(lease, deliveryPermits).pipe(
      Effect.catchAllCause(classifyStop),
      Effect.tapErrorTag("Restart", ({ cause }) =>
        Effect.logWarning("shard fiber stopped on an error; restarting", cause).pipe(
          Effect.annotateLogs({ shard: shardKey(lease) })
        )),
      Effect.retry({
        while: (error) => error._tag === "Restart",
        schedule: Schedule.exponential(Duration.millis(200)).pipe(
          Schedule.union(Schedule.spaced(Duration.seconds(30))),
          Schedule.resetAfter(Duration.minutes(1))
        )
      }),
      Effect.catchTag("ShardOwnershipLost", (error) =>
        Effect.logWarning("shard ownership lost; its fiber stopped before writing anything more").pipe(
          Effect.annotateLogs({ shard: shardKey(lease), heldVersion: error.heldVersion }),
          Effect.zipRight(Effect.sync(() => {
            if (leases.get(shardKey(lease)) === lease) leases.delete(shardKey(lease))
          }))
        )),
      Effect.catchTag("Restart", () => Effect.void),
      Effect.provide(context)
    )

  // Claim and start are one step, never cut in half and never run twice at once for a shard.
  const startShard = (shard: ShardRef) =>
    Effect.gen(function*() {
      const key = shardKey(shard)
      if (leases.has(key)) return
      const lease = yield* ownership.claim(shard, config.instanceId)
      leases.set(key, lease)
      yield* FiberMap.run(runners, key, supervise(lease))
    })

  const startNamespace = (namespace: Namespace) =>
    Effect.forEach(
      Array.from({ length: namespace.numShards }, (_, shardId) => ({ namespace: namespace.name, shardId })),
      startShard,
      { discard: true }
    ).pipe(startLock.withPermits(1), Effect.uninterruptible)

  // On shutdown: stop every shard fiber at once (each lets its deliveries
  // finish within the grace period), then give the shards back.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* Effect.forEach(runners, ([, fiber]) => Fiber.interrupt(fiber), { concurrency: "unbounded", discard: true })
      yield* Effect.forEach(leases.values(), (lease) => Effect.ignore(ownership.release(lease)), {
        concurrency: 16,
        discard: true
      })
      yield* Effect.logInfo("released shards").pipe(Effect.annotateLogs({ count: leases.size }))
      leases.clear()
    })
  )

  const now = yield* Clock.currentTimeMillis
  const existing = yield* store.getNamespace(DEFAULT_NAMESPACE)
  if (Option.isNone(existing)) {
    yield* store.createNamespace(
      new Namespace({ name: DEFAULT_NAMESPACE, numShards: config.defaultNamespaceShards, createdAt: now })
    ).pipe(Effect.catchTag("NamespaceExists", () => Effect.void))
  }
  const namespaces = yield* store.listNamespaces
  yield* Effect.forEach(namespaces, startNamespace, { discard: true })
  yield* Ref.set(ready, true)
  yield* Effect.logInfo("engine started").pipe(
    Effect.annotateLogs({ instanceId: config.instanceId, namespaces: namespaces.length, shards: leases.size })
  )

  return Engine.of({
    startNamespace,
    ownedShards: Effect.sync(() => Array.from(leases.values())),
    ready: Ref.get(ready)
  })
})
