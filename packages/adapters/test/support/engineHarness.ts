/**
 * The firing engine over the real SQLite store (in memory) and a scripted
 * delivery, composed as the server composes it, for tests on the TestClock.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import {
  DEFAULT_ENGINE_SETTINGS,
  Engine,
  type EngineSettings,
  EngineConfig,
  type FiringUpdate,
  Namespace,
  type ShardLease,
  type ShardRef,
  type ShardOwnershipLost,
  shardIdOf,
  type StoreError,
  type TimerKey,
  type TimerRecord,
  Timers,
  TimerDelivery,
  TimerStore,
  TimerWakeups
} from "@timer/core"
import { Context, Deferred, Effect, ExecutionStrategy, Exit, FiberId, Layer, Option, type Random, Scope, TestClock } from "effect"
import { layerSqliteStore } from "../../src/index.js"
import { type FakeDelivery, makeFakeDelivery } from "./fakeDelivery.js"

/** 2026-01-01T00:00:00Z: the test clock is set here before the engine starts. */
export const T0 = Date.UTC(2026, 0, 1)

export const SECOND = 1_000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE

export const CALLBACK_URL = "http://callback.test/hook"

/** Lets every fiber run until it blocks, without moving the test clock. */
export const settle: Effect.Effect<void> = Effect.gen(function*() {
  for (let i = 0; i < 3; i++) yield* TestClock.adjust(0)
})

/** Moves the test clock to `at` (running every sleep due on the way, in order), then settles. */
export const advanceTo = (at: number) => Effect.zipRight(TestClock.setTime(at), settle)

/** Moves the test clock by `millis`, then settles. */
export const advanceBy = (millis: number) => Effect.zipRight(TestClock.adjust(millis), settle)

/** One recordFiring call as the engine made it, and how it ended. */
export interface RecordedFiring {
  readonly lease: ShardLease
  readonly key: TimerKey
  readonly firingId: string
  readonly update: FiringUpdate
  readonly now: number
  readonly exit: Exit.Exit<boolean, ShardOwnershipLost | StoreError>
}

/** A one-shot pause of a shard fiber just after it has read `dueTimers` (the due timers and its next due time). */
export interface Pause {
  /** Completed when the fiber has read the store and is held. */
  readonly reached: Deferred.Deferred<void>
  /** Complete it to let the fiber go on. */
  readonly release: Deferred.Deferred<void>
}

export interface EngineHarness {
  readonly timers: Context.Tag.Service<Timers>
  readonly engine: Context.Tag.Service<Engine>
  readonly wakeups: Context.Tag.Service<TimerWakeups>
  /** Every wake-up notice sent, in order. */
  readonly notified: ReadonlyArray<{ readonly shard: ShardRef; readonly at: number }>
  /** The store the engine uses: the SQLite store with recordFiring recorded. */
  readonly store: Context.Tag.Service<TimerStore>
  /** The SQLite database underneath, for direct statements. */
  readonly sql: SqliteClient.SqliteClient
  readonly delivery: FakeDelivery
  readonly firings: ReadonlyArray<RecordedFiring>
  readonly settings: EngineSettings
  /** Stops the engine as a server shutdown does (closes its layers' scope); the store stays open. */
  readonly shutdown: Effect.Effect<void>
  /** Holds the next `dueTimers` call of any shard fiber after it has read the store. */
  readonly pauseAfterNextRead: () => Pause
  /** Reads a timer of the default namespace from the store. */
  readonly row: (id: string) => Effect.Effect<TimerRecord, StoreError>
  /** Creates a timer in the default namespace through Timers.create. */
  readonly create: (
    id: string,
    executeAt: number,
    extra?: Partial<Parameters<Context.Tag.Service<Timers>["create"]>[0]>
  ) => Effect.Effect<TimerRecord, unknown>
}

export interface HarnessOptions {
  /** Engine settings besides the test defaults. */
  readonly config?: Partial<EngineSettings>
  /** Runs against the store before the engine starts (timers written here wake nothing). */
  readonly seed?: (store: Context.Tag.Service<TimerStore>, settings: EngineSettings) => Effect.Effect<void, unknown>
  /** Called with the fake delivery before the engine starts, to script it. */
  readonly script?: (delivery: FakeDelivery) => void
  /** The Random service of the engine's fibers (the jitter of retries); the default one when left out. */
  readonly random?: Random.Random
}

/** Test defaults: one shard, no shutdown grace (nothing waits on the test clock at the end). */
export const TEST_SETTINGS: Partial<EngineSettings> = {
  instanceId: "engine-test",
  defaultNamespaceShards: 1,
  idlePollMs: 10 * 60_000,
  shutdownGraceMs: 0,
  // One instance: the first round takes every shard, and no later round is needed (on the
  // test clock, a short interval would run thousands of rounds when a test jumps hours).
  rebalanceIntervalMs: 30 * 24 * 3_600_000,
  instanceTtlMs: 60 * 24 * 3_600_000
}

/** A stored timer record of the default namespace, as Timers.create would make it. */
export const timerRecord = (
  settings: EngineSettings,
  id: string,
  executeAt: number,
  createdAt: number,
  extra: Partial<TimerRecord> = {}
): TimerRecord => ({
  namespace: "default",
  id,
  shardId: shardIdOf(id, settings.defaultNamespaceShards),
  executeAt,
  nextFireAt: executeAt,
  callbackUrl: CALLBACK_URL,
  callbackTimeoutSeconds: 10,
  state: "SCHEDULED",
  attempts: 0,
  firingId: `seeded-${id}`,
  createdAt,
  updatedAt: createdAt,
  ...extra
})

/** The first id `${prefix}-N` that lands in `shardId` of a namespace with `numShards` shards. */
export const idInShard = (prefix: string, shardId: number, numShards: number): string => {
  for (let i = 0; ; i++) {
    const id = `${prefix}-${i}`
    if (shardIdOf(id, numShards) === shardId) return id
  }
}

/**
 * Sets the test clock to T0, opens an in-memory SQLite store, runs the seed,
 * then starts Engine + Timers + TimerWakeups over it with the fake delivery.
 * Everything is released when the test's scope closes (the engine first).
 */
export const startEngine = (
  options: HarnessOptions = {}
): Effect.Effect<EngineHarness, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const settings: EngineSettings = {
      ...DEFAULT_ENGINE_SETTINGS,
      ...TEST_SETTINGS,
      ...options.config
    }
    const delivery = makeFakeDelivery()
    options.script?.(delivery)

    const storeContext = yield* Layer.build(layerSqliteStore({ filename: ":memory:" }))
    const sql = Context.get(storeContext, SqliteClient.SqliteClient)
    const sqliteStore = Context.get(storeContext, TimerStore)

    const firings: Array<RecordedFiring> = []
    let pause: Pause | undefined
    const store = TimerStore.of({
      ...sqliteStore,
      dueTimers: (lease, now, limit, excludeIds) =>
        sqliteStore.dueTimers(lease, now, limit, excludeIds).pipe(
          Effect.tap(() => {
            const held = pause
            if (held === undefined) return Effect.void
            pause = undefined
            return Deferred.succeed(held.reached, undefined).pipe(Effect.zipRight(Deferred.await(held.release)))
          })
        ),
      recordFiring: (lease, key, firingId, update, now) =>
        sqliteStore.recordFiring(lease, key, firingId, update, now).pipe(
          Effect.onExit((exit) => Effect.sync(() => firings.push({ lease, key, firingId, update, now, exit })))
        )
    })

    if (options.seed !== undefined) {
      yield* store.createNamespace(
        new Namespace({ name: "default", numShards: settings.defaultNamespaceShards, createdAt: T0 })
      )
      yield* options.seed(store, settings)
    }

    const engine = Engine.layer.pipe(Layer.provide(Layer.succeed(TimerDelivery, delivery.service)))
    const notified: Array<{ readonly shard: ShardRef; readonly at: number }> = []
    // In-process wake-ups, each notice recorded.
    const recordedWakeups = Layer.effect(
      TimerWakeups,
      Effect.map(TimerWakeups, (inner) =>
        TimerWakeups.of({
          ...inner,
          notify: (shard, at) => Effect.zipRight(Effect.sync(() => notified.push({ shard, at })), inner.notify(shard, at))
        }))
    ).pipe(Layer.provide(TimerWakeups.layer))
    const core = Timers.layer.pipe(
      Layer.provideMerge(engine),
      Layer.provideMerge(recordedWakeups),
      Layer.provideMerge(Layer.succeed(EngineConfig, settings)),
      Layer.provideMerge(Layer.succeedContext(Context.add(storeContext, TimerStore, store)))
    )
    // The engine lives in a scope of its own, closed before the store's: a test can shut it down and still read the store.
    const engineScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const build = Layer.buildWithScope(core, engineScope)
    const context = yield* (options.random === undefined ? build : Effect.withRandom(build, options.random))
    yield* settle

    const timers = Context.get(context, Timers)
    return {
      timers,
      engine: Context.get(context, Engine),
      wakeups: Context.get(context, TimerWakeups),
      notified,
      store,
      sql,
      delivery,
      firings,
      settings,
      shutdown: Scope.close(engineScope, Exit.void),
      pauseAfterNextRead: () => {
        const held: Pause = {
          reached: Deferred.unsafeMake<void>(FiberId.none),
          release: Deferred.unsafeMake<void>(FiberId.none)
        }
        pause = held
        return held
      },
      row: (id) =>
        store.getTimer({ namespace: "default", id }).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.dieMessage(`timer ${id} is not stored`),
            onSome: Effect.succeed
          }))
        ),
      create: (id, executeAt, extra = {}) =>
        timers.create({ namespace: "default", id, executeAt, callbackUrl: CALLBACK_URL, ...extra })
    }
  })
