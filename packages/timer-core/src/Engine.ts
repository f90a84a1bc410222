/**
 * The firing engine: registers this instance, holds its even share of the
 * shards of every namespace through versioned claims, runs one fiber per held
 * shard, and follows instances joining, leaving and dying. On shutdown it
 * drains its shards and gives them back.
 */
import { Clock, Context, Duration, Effect, Fiber, FiberMap, FiberSet, Layer, Option, Ref, Schedule } from "effect"
import { readFileSync } from "node:fs"
import { EngineConfig } from "./EngineConfig.js"
import { makePermits } from "./internal/permits.js"
import { superviseShard } from "./internal/superviseShard.js"
import { DEFAULT_NAMESPACE, Namespace } from "./Namespace.js"
import { planAssignment } from "./ShardAssignment.js"
import { shardKey } from "./ShardId.js"
import { type InstanceInfo, type ShardLease, ShardOwnership, type ShardState } from "./ShardOwnership.js"
import { TimerDelivery } from "./TimerDelivery.js"
import { InstanceConflict, type StoreError } from "./TimerErrors.js"
import { TimerStore } from "./TimerStore.js"
import { TimerWakeups } from "./TimerWakeups.js"

/** The firing engine of this instance. */
export class Engine extends Context.Tag("@timer/Engine")<Engine, {
  /** Makes the shards of a namespace (one just created, say) and takes this instance's share now. */
  readonly startNamespace: (namespace: Namespace) => Effect.Effect<void, StoreError>
  /** The leases this instance holds now. */
  readonly ownedShards: Effect.Effect<ReadonlyArray<ShardLease>>
  /** True once this instance has taken its first share of the shards. */
  readonly ready: Effect.Effect<boolean>
}>() {
  /** The engine, started when the layer is built and stopped when it is released. */
  static layer: Layer.Layer<
    Engine,
    StoreError | InstanceConflict,
    TimerStore | ShardOwnership | TimerDelivery | TimerWakeups | EngineConfig
  > = Layer.scoped(Engine, Effect.suspend(() => make))
}

/** Whether a process with this pid runs on this host (a zombie, killed but not yet reaped, does not). */
const processExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
  try {
    // Linux: the state is the field after the parenthesised command name.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return true
  }
}

/**
 * Whether an instance registered as alive really is: one on this host whose
 * process is gone died (killed, say) and need not be waited for until its
 * registration lapses.
 */
const reallyAlive = (instance: InstanceInfo, host: string): boolean => instance.host !== host || processExists(instance.pid)

const make = Effect.gen(function*() {
  const store = yield* TimerStore
  const ownership = yield* ShardOwnership
  const config = yield* EngineConfig
  const context = yield* Effect.context<TimerStore | TimerDelivery | TimerWakeups | EngineConfig>()
  const permits = yield* makePermits(config.deliveryConcurrency)

  const leases = new Map<string, ShardLease>()
  const runners = yield* FiberMap.make<string>()
  const ready = yield* Ref.make(false)
  const roundLock = yield* Effect.makeSemaphore(1)
  const ensured = new Set<string>()
  const startedAt = yield* Clock.currentTimeMillis
  let aliveUntil = 0
  // How long before its registration lapses an instance stops its shards (and stops planning).
  const fenceMargin = Math.min(2 * config.rebalanceIntervalMs, config.instanceTtlMs / 2)

  const dropLease = (lease: ShardLease) =>
    Effect.sync(() => {
      if (leases.get(shardKey(lease)) === lease) leases.delete(shardKey(lease))
    })

  const startShard = (lease: ShardLease) =>
    Effect.gen(function*() {
      leases.set(shardKey(lease), lease)
      yield* FiberMap.run(runners, shardKey(lease), superviseShard(lease, permits, () => dropLease(lease)).pipe(Effect.provide(context)))
    })

  // Shards being given up: still held until their drain ends, but no longer planned for.
  const releasing = new Set<string>()
  const drains = yield* FiberSet.make<void>()

  /** Stops a shard's fiber (its deliveries get the grace period), then gives the shard back. */
  const stopShard = (lease: ShardLease) =>
    Effect.gen(function*() {
      releasing.add(shardKey(lease))
      yield* FiberMap.remove(runners, shardKey(lease))
      yield* dropLease(lease)
      yield* Effect.ignore(ownership.release(lease))
    }).pipe(Effect.ensuring(Effect.sync(() => releasing.delete(shardKey(lease)))))

  const stopAll = Effect.suspend(() =>
    Effect.forEach(Array.from(leases.values()), stopShard, { concurrency: "unbounded", discard: true })
  )

  /** Renews this instance's registration; returns false when it could not. */
  const heartbeat = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const expiresAt = now + config.instanceTtlMs
    const renewed = yield* ownership.heartbeat({
      id: config.instanceId,
      host: config.instanceHost,
      pid: process.pid,
      startedAt,
      expiresAt
    }).pipe(
      Effect.as(true),
      Effect.catchAll((error) => Effect.as(Effect.logWarning("heartbeat failed").pipe(Effect.annotateLogs({ error: error.message })), false))
    )
    if (renewed) aliveUntil = expiresAt
    return renewed
  })

  /** The other instances alive now; dead ones found on this host are removed at once. */
  const otherLiveInstances = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const registered = (yield* ownership.liveInstances(now)).filter((instance) => instance.id !== config.instanceId)
    const dead = registered.filter((instance) => !reallyAlive(instance, config.instanceHost))
    yield* Effect.forEach(dead, (instance) => Effect.ignore(ownership.deregister(instance.id)), { discard: true })
    return registered.filter((instance) => reallyAlive(instance, config.instanceHost))
  })

  /**
   * Keeps the registration alive, on a fiber of its own so that nothing else can delay it.
   * When it cannot be renewed, every shard is stopped shortly before the registration lapses
   * (two rounds, or half the TTL if less), before the others may claim them.
   */
  const keepAlive = Effect.gen(function*() {
    if (yield* heartbeat) return
    if ((yield* Clock.currentTimeMillis) >= aliveUntil - fenceMargin && leases.size > 0) {
      yield* Effect.logWarning("registration about to lapse; stopping every shard").pipe(
        Effect.annotateLogs({ count: leases.size })
      )
      yield* stopAll
    }
  })

  /** One round: learn new namespaces, then move towards this instance's even share. */
  const round = Effect.gen(function*() {
    // Planning needs a registration that will outlive the round.
    if ((yield* Clock.currentTimeMillis) >= aliveUntil - fenceMargin) return
    for (const namespace of yield* store.listNamespaces) {
      if (ensured.has(namespace.name)) continue
      yield* ownership.ensureShards(namespace.name, namespace.numShards)
      ensured.add(namespace.name)
    }
    const live = (yield* otherLiveInstances).map((instance) => instance.id)
    const shards: ReadonlyArray<ShardState> = (yield* ownership.shards).filter((shard) => ensured.has(shard.namespace))
    const planned = shards.filter((shard) => !releasing.has(shardKey(shard)))
    const held = new Set(Array.from(leases.keys()).filter((key) => !releasing.has(key)))
    const plan = planAssignment({ me: config.instanceId, live, shards: planned, held })
    // Drains can take up to the grace period: they run on fibers of their own, not in the round.
    for (const shard of plan.release) {
      const lease = leases.get(shardKey(shard))
      if (lease !== undefined && !releasing.has(shardKey(shard))) {
        releasing.add(shardKey(shard))
        yield* FiberSet.run(drains, stopShard(lease))
      }
    }
    for (const shard of plan.claim) {
      const claimed = yield* ownership.claim(shard, config.instanceId, shard.version)
      if (Option.isSome(claimed)) yield* startShard(claimed.value)
    }
    if (plan.release.length > 0 || plan.claim.length > 0) {
      yield* Effect.logInfo("shards rebalanced").pipe(
        Effect.annotateLogs({ released: plan.release.length, tried: plan.claim.length, held: leases.size, target: plan.target, live: live.length })
      )
    }
  }).pipe(roundLock.withPermits(1), Effect.uninterruptible)

  // On shutdown: stop the rounds, stop every shard at once (each drains within the grace
  // period) while still renewing the registration, give the shards back, then leave, so the
  // others take over at their next round.
  let roundsFiber: Fiber.RuntimeFiber<unknown> | undefined
  let heartbeatsFiber: Fiber.RuntimeFiber<unknown> | undefined
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      if (roundsFiber !== undefined) yield* Fiber.interrupt(roundsFiber)
      yield* stopAll
      if (heartbeatsFiber !== undefined) yield* Fiber.interrupt(heartbeatsFiber)
      yield* Effect.ignore(ownership.deregister(config.instanceId))
      yield* Effect.logInfo("released shards and left")
    })
  )

  yield* heartbeat
  if (config.exclusive) {
    // The earliest started instance keeps the store; a later one refuses to start.
    const me = { startedAt, id: config.instanceId }
    const earlier = (yield* otherLiveInstances).find((other) =>
      other.startedAt < me.startedAt || (other.startedAt === me.startedAt && other.id < me.id)
    )
    if (earlier !== undefined) {
      yield* Effect.ignore(ownership.deregister(config.instanceId))
      return yield* new InstanceConflict({ otherId: earlier.id, otherHost: earlier.host, otherPid: earlier.pid })
    }
  }
  const now = yield* Clock.currentTimeMillis
  if (Option.isNone(yield* store.getNamespace(DEFAULT_NAMESPACE))) {
    yield* store.createNamespace(
      new Namespace({ name: DEFAULT_NAMESPACE, numShards: config.defaultNamespaceShards, createdAt: now })
    ).pipe(Effect.catchTag("NamespaceExists", () => Effect.void))
  }
  yield* round
  yield* Ref.set(ready, true)
  const every = Schedule.spaced(Duration.millis(config.rebalanceIntervalMs))
  heartbeatsFiber = yield* keepAlive.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("heartbeat failed", cause)),
    Effect.repeat(every),
    Effect.fork
  )
  roundsFiber = yield* round.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("shard round failed", cause)),
    Effect.repeat(every),
    Effect.fork
  )
  yield* Effect.logInfo("engine started").pipe(
    Effect.annotateLogs({ instanceId: config.instanceId, shards: leases.size })
  )

  return Engine.of({
    startNamespace: (namespace) =>
      ownership.ensureShards(namespace.name, namespace.numShards).pipe(Effect.zipRight(round)),
    ownedShards: Effect.sync(() => Array.from(leases.values())),
    ready: Ref.get(ready)
  })
})
