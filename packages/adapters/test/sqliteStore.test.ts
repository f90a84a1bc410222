/**
 * The SQLite store: the store contract on a fresh temp file per test, plus
 * what only SQLite has — WAL mode, the query plan of the due scan, migrations.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Migrator, Statement } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Namespace, ShardOwnership, TimerStore } from "@timer/core"
import { Context, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { layerSqliteStore, sqliteMigrations } from "../src/index.js"
import { makeTimer, takeShard } from "./storeContract/fixtures.js"
import { storeContractSuite } from "./storeContract/index.js"

const dir = mkdtempSync(join(tmpdir(), "timer-sqlite-store-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A path for a new database file; the file itself is created when the layer is built. */
const freshFile = () => join(dir, `${randomUUID()}.db`)

/** A store on its own new file. */
const freshStore = () => layerSqliteStore({ filename: freshFile() })

storeContractSuite("SQLite", freshStore)

interface PlanRow {
  readonly id: number
  readonly parent: number
  readonly detail: string
}

/** Runs `effect` and returns the SQL (with parameters) of every statement it issued. */
const captureStatements = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const statements: Array<readonly [string, ReadonlyArray<unknown>]> = []
    yield* effect.pipe(
      Statement.withTransformer((statement) => {
        statements.push(statement.compile())
        return Effect.succeed(statement)
      })
    )
    return statements
  })

/** The query plan of one captured statement. */
const explain = ([text, params]: readonly [string, ReadonlyArray<unknown>]) =>
  Effect.flatMap(SqliteClient.SqliteClient, (sql) => sql.unsafe<PlanRow>(`EXPLAIN QUERY PLAN ${text}`, params))

const details = (plan: ReadonlyArray<PlanRow>) => plan.map((row) => row.detail)

/** Some timers over four shards and two namespaces, so that the planner has something to choose from. */
const seedShards = Effect.gen(function*() {
  const store = yield* TimerStore
  for (const ns of ["plan", "plan-other"]) {
    yield* store.createNamespace(new Namespace({ name: ns, numShards: 4, createdAt: 0 }))
    for (let i = 0; i < 200; i++) {
      const state = i % 5 === 0 ? "FIRED" : "SCHEDULED"
      yield* store.upsertTimer(makeTimer(`t${i}`, { namespace: ns, shardId: i % 4, executeAt: 1_000 + i * 10, state }))
    }
  }
})

describe("SQLite store", () => {
  it.scoped("runs in WAL mode with the configured pragmas", () =>
    Effect.gen(function*() {
      const sql = yield* SqliteClient.SqliteClient
      expect(yield* sql.unsafe("PRAGMA journal_mode")).toStrictEqual([{ journal_mode: "wal" }])
      expect(yield* sql.unsafe("PRAGMA synchronous")).toStrictEqual([{ synchronous: 2 }]) // FULL
      expect(yield* sql.unsafe("PRAGMA busy_timeout")).toStrictEqual([{ timeout: 5000 }])
    }).pipe(Effect.provide(freshStore())))

  it.scoped("synchronous = NORMAL when asked", () =>
    Effect.gen(function*() {
      const sql = yield* SqliteClient.SqliteClient
      expect(yield* sql.unsafe("PRAGMA synchronous")).toStrictEqual([{ synchronous: 1 }])
    }).pipe(Effect.provide(layerSqliteStore({ filename: freshFile(), synchronous: "NORMAL" }))))

  it.scoped("dueTimers is an index range scan of timers_due within one shard, with no sort, and a lease check by key", () =>
    Effect.gen(function*() {
      const store = yield* TimerStore
      const ownership = yield* ShardOwnership
      const sql = yield* SqliteClient.SqliteClient
      yield* seedShards
      const lease = yield* takeShard(ownership, { namespace: "plan", shardId: 2 }, "owner")

      const check = Effect.gen(function*() {
        let due: ReadonlyArray<{ readonly id: string }> = []
        const statements = yield* captureStatements(
          store.dueTimers(lease, 1_500, 10).pipe(Effect.tap((read) => (due = read.timers)))
        )
        // The captured statement is the one that produced the result.
        expect(due.length).toBe(10)
        const selects = statements.filter(([text]) => /\bFROM\s+timers\b/i.test(text))
        expect(selects).toHaveLength(1)
        const [text, params] = selects[0]!
        expect(text).toMatch(/^\s*SELECT\b/i)
        // Ordered by the index, so the plan below must not sort.
        expect(text).toMatch(/\bORDER BY\s+next_fire_at\b/i)
        expect(params).toContain("plan")
        expect(params).toContain(2)
        // The limit and one more: the first timer not due tells when the shard is next due.
        expect(params).toContain(11)
        const plan = details(yield* explain(selects[0]!))
        expect(plan.some((d) =>
          /^SEARCH timers USING (COVERING )?INDEX timers_due \(namespace=\? AND shard_id=\?\)$/.test(d)
        )).toBe(true)
        expect(plan.filter((d) => /^SCAN\b/.test(d))).toStrictEqual([])
        expect(plan.filter((d) => /TEMP B-TREE/.test(d))).toStrictEqual([])
        // The lease check is a primary key lookup.
        const leaseCheck = statements.filter(([q]) => /\bFROM\s+shards\b/i.test(q))
        expect(leaseCheck).toHaveLength(1)
        const leasePlan = details(yield* explain(leaseCheck[0]!))
        expect(leasePlan.filter((d) => /^SCAN\b/.test(d))).toStrictEqual([])
      })
      yield* check
      // Also once the planner has statistics.
      yield* sql.unsafe("ANALYZE")
      yield* check
    }).pipe(Effect.provide(freshStore())))

  it.effect("migrations are idempotent: the same file opens again with its data", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const open = <A, E>(body: Effect.Effect<A, E, TimerStore | SqliteClient.SqliteClient>) =>
        Effect.provide(body, layerSqliteStore({ filename }))
      const timer = makeTimer("kept", { payload: { n: 1 } })
      const namespace = new Namespace({ name: "contract", numShards: 3, createdAt: 7 })

      yield* open(Effect.gen(function*() {
        const store = yield* TimerStore
        yield* store.createNamespace(namespace)
        yield* store.upsertTimer(timer)
      }))
      for (let round = 0; round < 2; round++) {
        yield* open(Effect.gen(function*() {
          const store = yield* TimerStore
          const sql = yield* SqliteClient.SqliteClient
          expect(yield* store.getNamespace("contract")).toStrictEqual(Option.some(namespace))
          expect(yield* store.getTimer(timer)).toStrictEqual(Option.some(timer))
          const migrations = yield* sql.unsafe<{ migration_id: number; name: string }>(
            "SELECT migration_id, name FROM effect_sql_migrations ORDER BY migration_id"
          )
          expect(migrations.map((m) => [Number(m.migration_id), m.name])).toStrictEqual([[1, "create_timers"], [2, "create_instances"], [3, "timer_targets"]])
          const indexes = yield* sql.unsafe<{ name: string }>(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'timers' AND sql IS NOT NULL ORDER BY name"
          )
          expect(indexes.map((i) => i.name)).toStrictEqual(["timers_by_execute_at", "timers_due", "timers_finished"])
        }))
      }
    }))

  it.effect("migration 3 keeps the timers of a file made before it, and holds every timer to one target", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const { "3_timer_targets": _three, ...before } = sqliteMigrations
      yield* Effect.gen(function*() {
        const sql = yield* SqliteClient.SqliteClient
        yield* sql`INSERT INTO timers (namespace, id, shard_id, execute_at, next_fire_at, callback_url, payload, retry_policy,
            callback_timeout_seconds, state, attempts, firing_id, first_attempt_at, created_at, updated_at, executed_at, last_error)
          VALUES ('contract', 'old', 0, 1000, 1000, 'http://127.0.0.1/old', '{"n":1}', NULL, 10, 'SCHEDULED', 0, 'f-old', NULL, 5, 5, NULL, NULL)`
      }).pipe(
        Effect.provide(Layer.effectDiscard(Migrator.make({})({ loader: Migrator.fromRecord(before) })).pipe(
          Layer.provideMerge(SqliteClient.layer({ filename }))
        ))
      )
      yield* Effect.gen(function*() {
        const store = yield* TimerStore
        const sql = yield* SqliteClient.SqliteClient
        expect(yield* store.getTimer({ namespace: "contract", id: "old" })).toStrictEqual(Option.some(makeTimer("old", {
          executeAt: 1000,
          callbackUrl: "http://127.0.0.1/old",
          payload: { n: 1 },
          firingId: "f-old",
          createdAt: 5,
          updatedAt: 5
        })))
        const neither = yield* Effect.flip(sql`UPDATE timers SET callback_url = NULL WHERE id = 'old'`)
        expect(String(neither.cause)).toMatch(/CHECK constraint failed/)
        const both = yield* Effect.flip(sql`UPDATE timers SET nats_subject = 'a.b' WHERE id = 'old'`)
        expect(String(both.cause)).toMatch(/CHECK constraint failed/)
      }).pipe(Effect.provide(layerSqliteStore({ filename })))
    }))

  it.scoped("two stores opened on the same file at once see each other's writes", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const first = Context.get(yield* Layer.build(layerSqliteStore({ filename })), TimerStore)
      const second = Context.get(yield* Layer.build(layerSqliteStore({ filename })), TimerStore)
      yield* first.upsertTimer(makeTimer("shared"))
      expect(Option.isSome(yield* second.getTimer({ namespace: "contract", id: "shared" }))).toBe(true)
    }))

  it.scoped("claim records the owner in the shard row; release clears it only at the lease's version", () =>
    Effect.gen(function*() {
      const ownership = yield* ShardOwnership
      const sql = yield* SqliteClient.SqliteClient
      const row = sql.unsafe<{ version: number; owner_id: string | null }>(
        "SELECT version, owner_id FROM shards WHERE namespace = ? AND shard_id = ?",
        ["contract", 0]
      )
      const first = yield* takeShard(ownership, { namespace: "contract", shardId: 0 }, "a")
      expect(yield* row).toStrictEqual([{ version: 1, owner_id: "a" }])
      const second = yield* takeShard(ownership, { namespace: "contract", shardId: 0 }, "b")
      expect(yield* row).toStrictEqual([{ version: 2, owner_id: "b" }])
      yield* ownership.release(first)
      expect(yield* row).toStrictEqual([{ version: 2, owner_id: "b" }])
      yield* ownership.release(second)
      expect(yield* row).toStrictEqual([{ version: 2, owner_id: null }])
    }).pipe(Effect.provide(freshStore())))
})
