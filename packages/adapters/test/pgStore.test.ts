/**
 * The PostgreSQL store: the store contract on a real server, and what only
 * PostgreSQL shows (the due query's plan, migrations run by instances starting
 * at once).
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient, type Statement } from "@effect/sql"
import { Namespace, TimerStore } from "@timer/core"
import { Effect } from "effect"
import { layerPgStore } from "../src/index.js"
import { dueRows, lockedShardVersions, writeFirings } from "../src/sql/firingStatements.js"
import { makeTimer } from "./storeContract/fixtures.js"
import { storeContractSuite } from "./storeContract/index.js"
import { freshSchemaUrl, inFreshSchema } from "./support/pgSchema.js"

/** A store in a schema of its own. */
const freshStore = () => inFreshSchema((url) => layerPgStore({ url, maxConnections: 4 }))

storeContractSuite("PostgreSQL", freshStore)

describe("PostgreSQL specifics", () => {
  it.scoped("the firing path's statements use their indexes, before and after ANALYZE", () =>
    Effect.gen(function*() {
      const store = yield* TimerStore
      const sql = yield* SqlClient.SqlClient
      yield* store.createNamespace(new Namespace({ name: "contract", numShards: 64, createdAt: 0 }))
      // Enough rows over many shards that a sequential scan would not be chosen on cost alone.
      yield* Effect.forEach(Array.from({ length: 64 }, (_, shard) => shard), (shard) =>
        Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) =>
          store.upsertTimer(makeTimer(`s${shard}-${i}`, { shardId: shard, executeAt: 1_000 + i })), { discard: true }), {
        discard: true
      })
      const explain = (statement: Statement.Statement<unknown>) => {
        const [text, params] = statement.compile()
        return Effect.map(
          sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params),
          (rows) => rows.map((row) => row["QUERY PLAN"]).join("\n")
        )
      }
      const lease = { namespace: "contract", shardId: 7, version: 1, ownerId: "owner" }
      const check = Effect.gen(function*() {
        const due = yield* explain(dueRows(sql, lease, 33, ["s7-1", "s7-2"]))
        expect(due).toMatch(/Index Scan using timers_due on timers/)
        expect(due).toMatch(/Index Cond: \(\(namespace = .*\) AND \(shard_id = 7\)\)/)
        expect(due).not.toMatch(/Seq Scan|Sort/)
        const firings = ["s7-3", "s9-4"].map((id) => ({
          lease,
          key: { namespace: "contract", id },
          firingId: "f",
          update: { _tag: "Fired", attempts: 1, executedAt: 2_000 } as const,
          now: 2_000
        }))
        const write = yield* explain(writeFirings(sql, firings))
        expect(write).toMatch(/Index Scan using timers_pkey on timers/)
        expect(write).toMatch(/Index Cond: \(\(namespace = .*column1.*\) AND \(id = .*column2.*\)\)/)
        expect(write).not.toMatch(/timers_due|Seq Scan on timers/)
        const versions = yield* explain(lockedShardVersions(sql, [lease, { namespace: "contract", shardId: 9 }]))
        expect(versions).toMatch(/shards_pkey/)
      })
      // A table just filled and not yet analyzed (the first minute of a busy deployment) ...
      yield* check
      // ... and once the planner has statistics.
      yield* sql`ANALYZE timers`
      yield* check
    }).pipe(Effect.provide(freshStore())))

  it.scoped("instances starting at once on an empty database migrate it exactly once", () =>
    Effect.gen(function*() {
      const url = yield* freshSchemaUrl
      // Five stores (five pools) open the same empty schema at the same moment.
      const namespaces = yield* Effect.all(
        Array.from({ length: 5 }, (_, i) =>
          Effect.gen(function*() {
            const store = yield* TimerStore
            yield* store.createNamespace(new Namespace({ name: "contract", numShards: 4, createdAt: i }))
            return (yield* store.listNamespaces).length
          }).pipe(Effect.provide(layerPgStore({ url, maxConnections: 2 })))),
        { concurrency: "unbounded" }
      )
      expect(namespaces).toEqual([1, 1, 1, 1, 1])
      const migrations = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ migration_id: number }>`SELECT migration_id FROM effect_sql_migrations`
      }).pipe(Effect.provide(layerPgStore({ url, maxConnections: 1 })))
      expect(migrations.map((row) => Number(row.migration_id)).sort()).toEqual([1, 2, 3])
    }))
})
