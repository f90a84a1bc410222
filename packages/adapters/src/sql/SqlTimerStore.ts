/**
 * The timer store and shard ownership over @effect/sql, in SQL that SQLite and
 * PostgreSQL both run. The schema comes from each database's migrations.
 */
import {
  Namespace,
  NamespaceExists,
  ShardOwnership,
  ShardOwnershipLost,
  StoreError,
  TimerNotFound,
  TimerNotPending,
  TimerStore,
  type CommandResult,
  type ShardLease,
  shardKey
} from "@timer/core"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { type Cause, Clock, Context, Effect, Layer, Option } from "effect"
import { dueRows, lockedShardVersions, shardVersion, writeFirings } from "./firingStatements.js"
import { makeFiringWriter, timerKeyOf } from "./firingWriter.js"
import { fromRow, toRow, type TimerRow } from "./timerRows.js"

interface InstanceRow {
  readonly id: string
  readonly host: string
  readonly pid: number | string
  readonly started_at: number | string
  readonly expires_at: number | string
}

interface ShardRow {
  readonly namespace: string
  readonly shard_id: number | string
  readonly version: number | string
  readonly owner_id: string | null
}

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

interface NamespaceRow {
  readonly name: string
  readonly num_shards: number
  readonly created_at: number | string
}

// Stored rows were validated on the way in, so they are not validated again.
const toNamespace = (row: NamespaceRow) =>
  new Namespace({ name: row.name, numShards: Number(row.num_shards), createdAt: Number(row.created_at) }, true)

/** Maps failures of the database, and rows that cannot be read, to a StoreError naming the operation. */
const storeError = (operation: string) => <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (error): error is Extract<E, SqlError | Cause.UnknownException> =>
      error._tag === "SqlError" || error._tag === "UnknownException",
    (cause) => Effect.fail(new StoreError({ operation, cause }))
  )

/** Reads rows as timers; a row that cannot be read fails (UnknownException) instead of throwing. */
const timersOf = (rows: ReadonlyArray<TimerRow>) => Effect.try(() => rows.map(fromRow))

/** Reads the first row as a timer, if any. */
const firstTimerOf = (rows: ReadonlyArray<TimerRow>) => Effect.map(timersOf(rows.slice(0, 1)), (timers) => Option.fromNullable(timers[0]))

/** Builds both ports over the SqlClient in context; firing outcomes are group-committed by a fiber of the scope. */
export const makeSqlStores = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Locks a timer row between the read and the write of updateScheduled (PostgreSQL), so that
  // concurrent updates or a firing committed in between are not overwritten.
  const lockTimer = sql.onDialectOrElse({ pg: () => sql`FOR UPDATE`, orElse: () => sql`` })

  /** Fails with ShardOwnershipLost unless the shard is still at the lease's version. */
  const checkLease = (lease: ShardLease) =>
    shardVersion(sql, lease).pipe(
      Effect.flatMap((rows) =>
        rows.length === 1 && Number(rows[0]!.version) === lease.version
          ? Effect.void
          : Effect.fail(
            new ShardOwnershipLost({ namespace: lease.namespace, shardId: lease.shardId, heldVersion: lease.version })
          )
      )
    )

  const getTimerRow = (namespace: string, id: string, lock = sql``) =>
    sql<TimerRow>`SELECT * FROM timers WHERE namespace = ${namespace} AND id = ${id} ${lock}`.pipe(
      Effect.flatMap(firstTimerOf)
    )

  const recordFiring = yield* makeFiringWriter({
    shardVersions: (shards) =>
      Effect.map(
        lockedShardVersions(sql, shards),
        (rows) => new Map(rows.map((row) => [shardKey({ namespace: row.namespace, shardId: Number(row.shard_id) }), Number(row.version)]))
      ),
    write: (firings) =>
      Effect.map(writeFirings(sql, firings), (rows) => new Set(rows.map((row) => timerKeyOf(row)))),
    transaction: sql.withTransaction
  })

  const store = TimerStore.of({
    createNamespace: (namespace) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO namespaces (name, num_shards, created_at)
          VALUES (${namespace.name}, ${namespace.numShards}, ${namespace.createdAt})
          ON CONFLICT (name) DO NOTHING`
        const rows = yield* sql<NamespaceRow>`SELECT * FROM namespaces WHERE name = ${namespace.name}`
        const stored = toNamespace(rows[0]!)
        if (stored.numShards !== namespace.numShards) {
          return yield* new NamespaceExists({
            namespace: namespace.name,
            numShards: stored.numShards,
            requestedNumShards: namespace.numShards
          })
        }
        return stored
      }).pipe(storeError("createNamespace")),

    getNamespace: (name) =>
      sql<NamespaceRow>`SELECT * FROM namespaces WHERE name = ${name}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toNamespace)),
        storeError("getNamespace")
      ),

    listNamespaces: sql<NamespaceRow>`SELECT * FROM namespaces ORDER BY name`.pipe(
      Effect.map((rows) => rows.map(toNamespace)),
      storeError("listNamespaces")
    ),

    upsertTimer: (timer) => {
      const row = toRow(timer)
      const { created_at: _c, namespace: _n, id: _i, ...changed } = row
      return sql<TimerRow>`INSERT INTO timers ${sql.insert(row as any)}
        ON CONFLICT (namespace, id) DO UPDATE SET ${sql.update(changed as any)}
        RETURNING *`.pipe(
        Effect.flatMap(firstTimerOf),
        Effect.map(Option.getOrThrow),
        storeError("upsertTimer")
      )
    },

    getTimer: (key) => getTimerRow(key.namespace, key.id).pipe(storeError("getTimer")),

    updateScheduled: (key, f) =>
      Effect.gen(function*() {
        const current = yield* getTimerRow(key.namespace, key.id, lockTimer)
        if (Option.isNone(current)) return yield* new TimerNotFound({ namespace: key.namespace, timerId: key.id })
        if (current.value.state !== "SCHEDULED") {
          return yield* new TimerNotPending({ namespace: key.namespace, timerId: key.id, state: current.value.state })
        }
        const next = f(current.value)
        const { namespace: _n, id: _i, created_at: _c, ...changed } = toRow(next)
        yield* sql`UPDATE timers SET ${sql.update(changed as any)} WHERE namespace = ${key.namespace} AND id = ${key.id}`
        return next
      }).pipe(
        sql.withTransaction,
        storeError("updateScheduled")
      ),

    deleteTimer: (key) =>
      sql<{ id: string }>`DELETE FROM timers WHERE namespace = ${key.namespace} AND id = ${key.id} RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        storeError("deleteTimer")
      ),

    listTimers: (query) => {
      const clauses = [sql`namespace = ${query.namespace}`]
      if (query.state !== undefined) clauses.push(sql`state = ${query.state}`)
      if (query.executeAtFrom !== undefined) clauses.push(sql`execute_at >= ${query.executeAtFrom}`)
      if (query.executeAtTo !== undefined) clauses.push(sql`execute_at < ${query.executeAtTo}`)
      if (query.after !== undefined) {
        clauses.push(sql`(execute_at, id) > (${query.after.executeAt}, ${query.after.id})`)
      }
      return sql<TimerRow>`SELECT * FROM timers WHERE ${sql.and(clauses)}
        ORDER BY execute_at, id LIMIT ${query.limit + 1}`.pipe(
        Effect.flatMap((rows) => Effect.zip(timersOf(rows.slice(0, query.limit)), Effect.succeed(rows.length))),
        Effect.map(([timers, found]) => {
          const last = timers[timers.length - 1]
          return {
            timers,
            next: found > query.limit && last !== undefined
              ? Option.some({ executeAt: last.executeAt, id: last.id })
              : Option.none()
          }
        }),
        storeError("listTimers")
      )
    },

    dueTimers: (lease, now, limit, excludeIds = []) =>
      Effect.gen(function*() {
        const rows = yield* dueRows(sql, lease, limit + 1, excludeIds)
        // Checked after the read, outside a transaction: a version only grows, so a lease
        // current now was current while the rows were read.
        yield* checkLease(lease)
        let due = 0
        while (due < Math.min(limit, rows.length) && Number(rows[due]!.next_fire_at) <= now) due++
        const next = rows[due]
        return {
          timers: yield* timersOf(rows.slice(0, due)),
          nextFireAt: next === undefined ? Option.none() : Option.some(Number(next.next_fire_at))
        }
      }).pipe(storeError("dueTimers")),

    recordFiring: (lease, key, firingId, update, now) => recordFiring({ lease, key, firingId, update, now }),

    applyCommands: (changes) =>
      Effect.forEach(changes, (change): Effect.Effect<CommandResult, SqlError | Cause.UnknownException> =>
        change._tag === "Cancel"
          ? sql<{ id: string }>`DELETE FROM timers
              WHERE namespace = ${change.key.namespace} AND id = ${change.key.id} AND state = 'SCHEDULED' RETURNING id`.pipe(
            Effect.map((rows) => (rows.length > 0 ? { _tag: "Cancelled" } : { _tag: "Unchanged" }))
          )
          : sql<TimerRow>`INSERT INTO timers ${sql.insert(toRow(change.timer) as any)}
              ON CONFLICT (namespace, id) DO UPDATE SET execute_at = excluded.execute_at,
                next_fire_at = excluded.next_fire_at, attempts = 0, firing_id = excluded.firing_id,
                first_attempt_at = NULL, last_error = NULL, origin = excluded.origin, updated_at = excluded.updated_at
              WHERE timers.state = 'SCHEDULED' AND timers.execute_at <> excluded.execute_at
              RETURNING *`.pipe(
            Effect.flatMap(firstTimerOf),
            Effect.map(Option.match({ onNone: () => ({ _tag: "Unchanged" }), onSome: (timer) => ({ _tag: "Armed", timer }) }))
          )).pipe(sql.withTransaction, storeError("applyCommands")),

    purgeFinished: (before, limit) =>
      // The outer condition is checked again: under PostgreSQL's READ COMMITTED a timer re-armed
      // after the subquery read it must not be deleted.
      sql<{ id: string }>`DELETE FROM timers WHERE (namespace, id) IN (
          SELECT namespace, id FROM timers
          WHERE state <> 'SCHEDULED' AND updated_at < ${before}
          LIMIT ${limit}
        ) AND state <> 'SCHEDULED' AND updated_at < ${before} RETURNING id`.pipe(
        Effect.map((rows) => rows.length),
        storeError("purgeFinished")
      ),

    ping: sql`SELECT 1`.pipe(Effect.asVoid, storeError("ping"))
  })

  const ownership = ShardOwnership.of({
    heartbeat: (instance) =>
      sql`INSERT INTO instances (id, host, pid, started_at, expires_at)
        VALUES (${instance.id}, ${instance.host}, ${instance.pid}, ${instance.startedAt}, ${instance.expiresAt})
        ON CONFLICT (id) DO UPDATE SET host = ${instance.host}, pid = ${instance.pid},
          started_at = ${instance.startedAt}, expires_at = ${instance.expiresAt}`.pipe(Effect.asVoid, storeError("heartbeat")),

    deregister: (instanceId) =>
      sql`DELETE FROM instances WHERE id = ${instanceId}`.pipe(Effect.asVoid, storeError("deregister")),

    liveInstances: (now) =>
      sql<InstanceRow>`SELECT * FROM instances WHERE expires_at > ${now} ORDER BY id`.pipe(
        Effect.map((rows) =>
          rows.map((row) => ({
            id: row.id,
            host: row.host,
            pid: Number(row.pid),
            startedAt: Number(row.started_at),
            expiresAt: Number(row.expires_at)
          }))
        ),
        storeError("liveInstances")
      ),

    ensureShards: (namespace, numShards) =>
      Effect.forEach(
        chunksOf(Array.from({ length: numShards }, (_, shardId) => shardId), 500),
        (ids) =>
          sql`INSERT INTO shards ${
            sql.insert(ids.map((shard_id) => ({ namespace, shard_id, version: 0, owner_id: null, claimed_at: null })))
          } ON CONFLICT (namespace, shard_id) DO NOTHING`,
        { discard: true }
      ).pipe(storeError("ensureShards")),

    shards: sql<ShardRow>`SELECT namespace, shard_id, version, owner_id FROM shards ORDER BY namespace, shard_id`.pipe(
      Effect.map((rows) =>
        rows.map((row) => ({
          namespace: row.namespace,
          shardId: Number(row.shard_id),
          version: Number(row.version),
          ownerId: row.owner_id ?? undefined
        }))
      ),
      storeError("shards")
    ),

    claim: (shard, ownerId, seenVersion) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* sql<{ version: number | string }>`UPDATE shards
          SET version = version + 1, owner_id = ${ownerId}, claimed_at = ${now}
          WHERE namespace = ${shard.namespace} AND shard_id = ${shard.shardId} AND version = ${seenVersion}
          RETURNING version`
        return Option.map(Option.fromNullable(rows[0]), (row) => ({ ...shard, ownerId, version: Number(row.version) }))
      }).pipe(storeError("claimShard")),

    release: (lease) =>
      sql`UPDATE shards SET owner_id = NULL
        WHERE namespace = ${lease.namespace} AND shard_id = ${lease.shardId} AND version = ${lease.version}`.pipe(
        Effect.asVoid,
        storeError("releaseShard")
      )
  })

  return { store, ownership }
})

/** Both ports over the SqlClient in context; the schema must be migrated first. */
export const layerSqlStores: Layer.Layer<TimerStore | ShardOwnership, never, SqlClient.SqlClient> = Layer.scopedContext(
  Effect.map(makeSqlStores, ({ ownership, store }) =>
    Context.make(TimerStore, store).pipe(Context.add(ShardOwnership, ownership)))
)
