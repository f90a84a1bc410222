/**
 * Several firing engines in one test process, on one shared SQLite store (a
 * file in a temp dir, one store layer), all on the TestClock. Each instance
 * has its own EngineConfig (instance id), TimerWakeups, fake delivery and
 * Timers service, and its own views of the store and of the ownership port,
 * wrapped so that a test can watch what it does (claims, heartbeats, firings)
 * and make it misbehave (pause its shard fiber after it read its due timers,
 * cut it off from the ownership port as a partition or a crash would).
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import {
  makeWakeupListeners,
  type DueTimers,
  type WakeupListeners,
  DEFAULT_ENGINE_SETTINGS,
  Engine,
  type EngineSettings,
  EngineConfig,
  type InstanceConflict,
  type ShardLease,
  ShardOwnership,
  type ShardOwnershipLost,
  type ShardRef,
  shardKey,
  type ShardState,
  StoreError,
  type TimerRecord,
  Timers,
  TimerDelivery,
  TimerStore,
  TimerWakeups
} from "@timer/core"
import { Clock, Context, Deferred, Effect, ExecutionStrategy, Exit, FiberId, Layer, Option, Scope, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { layerSqliteStore } from "../../src/index.js"
import { CALLBACK_URL, type RecordedFiring, SECOND, T0 } from "./engineHarness.js"
import { type FakeDelivery, makeFakeDelivery } from "./fakeDelivery.js"

/** Rounds every 500 ms, registrations kept 5 s: the server's defaults. */
export const ROUND_MS = 500
export const TTL_MS = 5 * SECOND
export const NUM_SHARDS = 16

/** Settings of every instance unless a test overrides them. */
export const INSTANCE_SETTINGS: Partial<EngineSettings> = {
  defaultNamespaceShards: NUM_SHARDS,
  // Far longer than any test waits: a timer that fires on time was woken, not polled.
  idlePollMs: 10 * 60 * SECOND,
  shutdownGraceMs: 0,
  rebalanceIntervalMs: ROUND_MS,
  instanceTtlMs: TTL_MS
}

/**
 * Lets every fiber of every instance run until it blocks, without moving the
 * test clock (a round of three engines and the group commit's event-loop
 * turns take more turns than one engine's).
 */
export const settleAll: Effect.Effect<void> = Effect.gen(function*() {
  for (let i = 0; i < 8; i++) yield* TestClock.adjust(0)
})

/**
 * Wake-ups across instances, as PostgreSQL's LISTEN/NOTIFY gives them
 * (adapters' PgWakeups): an instance wakes a shard it holds directly, and
 * otherwise broadcasts the notice to every instance, whose listener for that
 * shard, if any, is woken.
 */
export interface WakeupBus {
  /** The TimerWakeups of one more instance on the bus. */
  readonly join: () => Context.Tag.Service<TimerWakeups>
  /** Notices broadcast so far (notify of a shard the notifying instance did not hold). */
  readonly broadcasts: () => number
}

export const makeWakeupBus = (): WakeupBus => {
  const members = new Set<WakeupListeners>()
  let broadcasts = 0
  return {
    broadcasts: () => broadcasts,
    join: () => {
      const listeners = makeWakeupListeners()
      members.add(listeners)
      return TimerWakeups.of({
        notify: (shard, at) =>
          Effect.sync(() => {
            if (listeners.wake(shardKey(shard), at)) return
            broadcasts++
            for (const member of members) member.wake(shardKey(shard), at)
          }),
        listen: listeners.listen
      })
    }
  }
}

/** The store all instances share. */
export interface SharedStore {
  readonly store: Context.Tag.Service<TimerStore>
  readonly ownership: Context.Tag.Service<ShardOwnership>
  readonly sql: SqliteClient.SqliteClient
  readonly filename: string
  readonly bus: WakeupBus
  /** The shard rows, read with SQL (not through the port under test). */
  readonly shardRows: Effect.Effect<ReadonlyArray<ShardState>, unknown>
  /** The registered instances, read with SQL. */
  readonly instanceRows: Effect.Effect<ReadonlyArray<{ readonly id: string; readonly expiresAt: number }>, unknown>
}

/** Sets the test clock to T0 and opens the store on a new file in a temp dir, removed when the test's scope closes. */
export const openSharedStore: Effect.Effect<SharedStore, unknown, Scope.Scope> = Effect.gen(function*() {
  yield* TestClock.setTime(T0)
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "timer-instances-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const filename = join(dir, "timers.db")
  const context = yield* Layer.build(layerSqliteStore({ filename }))
  const sql = Context.get(context, SqliteClient.SqliteClient)
  return {
    store: Context.get(context, TimerStore),
    ownership: Context.get(context, ShardOwnership),
    sql,
    filename,
    bus: makeWakeupBus(),
    shardRows: Context.get(context, ShardOwnership).shards,
    instanceRows: sql<{ id: string; expires_at: number }>`SELECT id, expires_at FROM instances ORDER BY id`.pipe(
      Effect.map((rows) => rows.map((row) => ({ id: row.id, expiresAt: Number(row.expires_at) })))
    )
  }
})

/** A successful claim, and the test clock when it was made. */
export interface RecordedClaim {
  readonly lease: ShardLease
  readonly seenVersion: number
  readonly at: number
}

/** One heartbeat call and whether it was written. */
export interface RecordedHeartbeat {
  readonly at: number
  readonly expiresAt: number
  readonly ok: boolean
}

/** One dueTimers call of a shard fiber and how it ended. */
export interface RecordedDueTimers {
  readonly lease: ShardLease
  readonly now: number
  readonly exit: Exit.Exit<DueTimers, ShardOwnershipLost | StoreError>
}

/** A one-shot pause of a shard fiber just after `dueTimers` returned timers. */
export interface DuePause {
  /** Completed with the timers loaded when the fiber is held. */
  readonly reached: Deferred.Deferred<ReadonlyArray<TimerRecord>>
  /** Complete it to let the fiber go on. */
  readonly release: Deferred.Deferred<void>
}

export interface Instance {
  readonly id: string
  readonly settings: EngineSettings
  readonly timers: Context.Tag.Service<Timers>
  readonly engine: Context.Tag.Service<Engine>
  readonly delivery: FakeDelivery
  /** This instance's view of the store (recordFiring recorded, dueTimers pausable). */
  readonly store: Context.Tag.Service<TimerStore>
  /** This instance's view of the ownership port (claims and heartbeats recorded; can be cut off). */
  readonly ownership: Context.Tag.Service<ShardOwnership>
  readonly firings: ReadonlyArray<RecordedFiring>
  /** Every dueTimers call of its shard fibers, in call order. */
  readonly dueCalls: ReadonlyArray<RecordedDueTimers>
  readonly claims: ReadonlyArray<RecordedClaim>
  readonly heartbeats: ReadonlyArray<RecordedHeartbeat>
  /** Stops the engine as a server shutdown does (closes its layers' scope). */
  readonly shutdown: Effect.Effect<void>
  /** False once shut down or cut off. */
  readonly running: () => boolean
  /** From now on every call of this instance to the ownership port fails, as if the store were out of its reach. */
  readonly cutOffOwnership: () => void
  /** Holds the next dueTimers call of the shard (any shard if left out) that returns timers, after it returned. */
  readonly pauseAfterNextDueTimers: (shard?: ShardRef) => DuePause
  /** The shard ids of the default namespace this instance's engine holds, sorted. */
  readonly held: Effect.Effect<ReadonlyArray<number>>
  /** Creates a timer in the default namespace through this instance's Timers.create. */
  readonly create: (id: string, executeAt: number) => Effect.Effect<TimerRecord, unknown>
}

export interface InstanceOptions {
  /** Engine settings besides INSTANCE_SETTINGS. */
  readonly config?: Partial<EngineSettings>
}

/**
 * Starts an engine with instance id `id` over the shared store: its first
 * round has run when this returns. Its scope is forked from the caller's and
 * closed before the store's; `shutdown` closes it earlier.
 */
export const startInstance = (
  shared: SharedStore,
  id: string,
  options: InstanceOptions = {}
): Effect.Effect<Instance, StoreError | InstanceConflict, Scope.Scope> =>
  Effect.gen(function*() {
    const settings: EngineSettings = { ...DEFAULT_ENGINE_SETTINGS, ...INSTANCE_SETTINGS, ...options.config, instanceId: id }
    const delivery = makeFakeDelivery()
    const wakeups = shared.bus.join()

    const firings: Array<RecordedFiring> = []
    const dueCalls: Array<RecordedDueTimers> = []
    let duePause: { readonly shard: ShardRef | undefined; readonly pause: DuePause } | undefined
    const store = TimerStore.of({
      ...shared.store,
      dueTimers: (lease, now, limit, excludeIds) =>
        shared.store.dueTimers(lease, now, limit, excludeIds).pipe(
          Effect.onExit((exit) => Effect.sync(() => dueCalls.push({ lease, now, exit }))),
          Effect.tap((due) => {
            const held = duePause
            if (held === undefined || due.timers.length === 0) return Effect.void
            if (held.shard !== undefined && shardKey(held.shard) !== shardKey(lease)) return Effect.void
            duePause = undefined
            return Deferred.succeed(held.pause.reached, due.timers).pipe(Effect.zipRight(Deferred.await(held.pause.release)))
          })
        ),
      recordFiring: (lease, key, firingId, update, now) =>
        shared.store.recordFiring(lease, key, firingId, update, now).pipe(
          Effect.onExit((exit) => Effect.sync(() => firings.push({ lease, key, firingId, update, now, exit })))
        )
    })

    let cutOff = false
    let stopped = false
    const claims: Array<RecordedClaim> = []
    const heartbeats: Array<RecordedHeartbeat> = []
    const unreachable = (operation: string) =>
      Effect.suspend(() =>
        cutOff ? Effect.fail(new StoreError({ operation, cause: `instance ${id} is cut off from the store` })) : Effect.void
      )
    const raw = shared.ownership
    const ownership = ShardOwnership.of({
      heartbeat: (instance) =>
        Effect.zipRight(unreachable("heartbeat"), raw.heartbeat(instance)).pipe(
          Effect.onExit((exit) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              heartbeats.push({ at, expiresAt: instance.expiresAt, ok: Exit.isSuccess(exit) })
            })
          )
        ),
      deregister: (instanceId) => Effect.zipRight(unreachable("deregister"), raw.deregister(instanceId)),
      liveInstances: (now) => Effect.zipRight(unreachable("liveInstances"), raw.liveInstances(now)),
      ensureShards: (namespace, numShards) => Effect.zipRight(unreachable("ensureShards"), raw.ensureShards(namespace, numShards)),
      shards: Effect.zipRight(unreachable("shards"), raw.shards),
      claim: (shard, ownerId, seenVersion) =>
        Effect.zipRight(unreachable("claim"), raw.claim(shard, ownerId, seenVersion)).pipe(
          Effect.tap(Option.match({
            onNone: () => Effect.void,
            onSome: (lease) => Effect.map(Clock.currentTimeMillis, (at) => void claims.push({ lease, seenVersion, at }))
          }))
        ),
      release: (lease) => Effect.zipRight(unreachable("release"), raw.release(lease))
    })

    const engine = Engine.layer.pipe(Layer.provide(Layer.succeed(TimerDelivery, delivery.service)))
    const core = Timers.layer.pipe(
      Layer.provideMerge(engine),
      Layer.provideMerge(Layer.succeed(TimerWakeups, wakeups)),
      Layer.provideMerge(Layer.succeed(EngineConfig, settings)),
      Layer.provideMerge(Layer.succeedContext(Context.make(TimerStore, store).pipe(Context.add(ShardOwnership, ownership))))
    )
    const engineScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const context = yield* Layer.buildWithScope(core, engineScope).pipe(
      Effect.onError((cause) => Scope.close(engineScope, Exit.failCause(cause)))
    )
    yield* settleAll
    const engineService = Context.get(context, Engine)
    const timers = Context.get(context, Timers)

    return {
      id,
      settings,
      timers,
      engine: engineService,
      delivery,
      store,
      ownership,
      firings,
      dueCalls,
      claims,
      heartbeats,
      shutdown: Effect.suspend(() => {
        stopped = true
        return Scope.close(engineScope, Exit.void)
      }),
      running: () => !stopped && !cutOff,
      cutOffOwnership: () => {
        cutOff = true
      },
      pauseAfterNextDueTimers: (shard) => {
        const pause: DuePause = {
          reached: Deferred.unsafeMake<ReadonlyArray<TimerRecord>>(FiberId.none),
          release: Deferred.unsafeMake<void>(FiberId.none)
        }
        duePause = { shard, pause }
        return pause
      },
      held: Effect.map(
        engineService.ownedShards,
        (leases) => leases.filter((lease) => lease.namespace === "default").map((lease) => lease.shardId).sort((a, b) => a - b)
      ),
      create: (timerId, executeAt) => timers.create({ namespace: "default", id: timerId, executeAt, callbackUrl: CALLBACK_URL })
    }
  })

/**
 * Checks that no shard is held by two instances, and that every shard held is
 * recorded in the store as held by that instance at that lease's version; a
 * shard recorded as held by a running instance is held by it. Returns which
 * instance holds each shard ("namespace/shardId" → instance id).
 */
export const checkOwnership = (shared: SharedStore, instances: ReadonlyArray<Instance>) =>
  Effect.gen(function*() {
    const holders = new Map<string, { readonly instance: string; readonly lease: ShardLease }>()
    const problems: Array<string> = []
    for (const instance of instances) {
      for (const lease of yield* instance.engine.ownedShards) {
        const key = shardKey(lease)
        const other = holders.get(key)
        if (other !== undefined) problems.push(`${key} held by ${other.instance} and ${instance.id}`)
        holders.set(key, { instance: instance.id, lease })
      }
    }
    const rows = yield* shared.shardRows
    const running = new Set(instances.filter((instance) => instance.running()).map((instance) => instance.id))
    for (const row of rows) {
      const key = shardKey(row)
      const holder = holders.get(key)
      if (holder !== undefined) {
        if (row.ownerId !== holder.instance || row.version !== holder.lease.version) {
          problems.push(
            `${key} held by ${holder.instance} at v${holder.lease.version}, stored as ${row.ownerId ?? "free"} at v${row.version}`
          )
        }
      } else if (row.ownerId !== undefined && running.has(row.ownerId)) {
        problems.push(`${key} stored as held by running ${row.ownerId}, which holds no lease on it`)
      }
    }
    const clock = yield* Clock.currentTimeMillis
    if (problems.length > 0) {
      return yield* Effect.dieMessage(`ownership broken at T0+${clock - T0}ms: ${problems.join("; ")}`)
    }
    return new Map(Array.from(holders, ([key, holder]) => [key, holder.instance] as const))
  })

/** How many shards of the default namespace each instance holds, by instance id. */
export const spread = (instances: ReadonlyArray<Instance>) =>
  Effect.gen(function*() {
    const counts: Record<string, number> = {}
    for (const instance of instances) counts[instance.id] = (yield* instance.held).length
    return counts
  })

/**
 * Moves the test clock to `until` in steps of `stepMs`, letting every instance
 * settle and running `check` after each step (and once before the first).
 */
export const stepTo = <E = never, R = never>(
  until: number,
  stepMs: number,
  check: (now: number) => Effect.Effect<void, E, R> = () => Effect.void
) =>
  Effect.gen(function*() {
    let now = yield* Clock.currentTimeMillis
    yield* check(now)
    while (now < until) {
      now = Math.min(until, now + stepMs)
      yield* TestClock.setTime(now)
      yield* settleAll
      yield* check(now)
    }
  })

/** Every delivery call of a timer over all instances, with the instance that made it. */
export const deliveriesOf = (instances: ReadonlyArray<Instance>, timerId: string) =>
  instances.flatMap((instance) => instance.delivery.callsOf(timerId).map((call) => ({ by: instance.id, at: call.at })))

/** The shard ids of the default namespace. */
export const ALL_SHARDS = Array.from({ length: NUM_SHARDS }, (_, shardId) => shardId)
