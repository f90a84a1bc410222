/**
 * The PostgreSQL store: the store contract on a real server, and what only
 * PostgreSQL shows (the due query's plan, migrations run by instances starting
 * at once).
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Namespace, TimerStore } from "@timer/core"
import { Effect } from "effect"
import { layerPgStore } from "../src/index.js"
import { makeTimer } from "./storeContract/fixtures.js"
import { storeContractSuite } from "./storeContract/index.js"
import { freshSchemaUrl, inFreshSchema } from "./support/pgSchema.js"

/** A store in a schema of its own. */
const freshStore = () => inFreshSchema((url) => layerPgStore({ url, maxConnections: 4 }))

storeContractSuite("PostgreSQL", freshStore)

describe("PostgreSQL specifics", () => {
  it.scoped("the due query is an index scan of timers_due within one shard, in order, without a sort", () =>
    Effect.gen(function*() {
      const store = yield* TimerStore
      const sql = yield* SqlClient.SqlClient
      yield* store.createNamespace(new Namespace({ name: "contract", numShards: 64, createdAt: 0 }))
      // Enough rows over many shards that a sequential scan would not be chosen on cost alone.
      for (let shard = 0; shard < 64; shard++) {
        for (let i = 0; i < 40; i++) {
          yield* store.upsertTimer(makeTimer(`s${shard}-${i}`, { shardId: shard, executeAt: 1_000 + i }))
        }
      }
      yield* sql`ANALYZE timers`
      const plan = yield* sql<{ "QUERY PLAN": string }>`EXPLAIN SELECT * FROM timers
        WHERE namespace = ${"contract"} AND shard_id = ${7}
          AND state = 'SCHEDULED' AND next_fire_at <= ${5_000}
        ORDER BY next_fire_at LIMIT ${32}`
      const text = plan.map((row) => row["QUERY PLAN"]).join("\n")
      expect(text).toMatch(/Index Scan using timers_due on timers/)
      expect(text).toMatch(/Index Cond: \(\(namespace = .*\) AND \(shard_id = 7\) AND \(next_fire_at <= .*\)\)/)
      expect(text).not.toMatch(/Seq Scan|Sort/)
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
      expect(migrations.map((row) => Number(row.migration_id)).sort()).toEqual([1, 2])
    }))
})
