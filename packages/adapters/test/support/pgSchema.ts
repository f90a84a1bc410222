/**
 * PostgreSQL for tests: the server of TIMER_TEST_PG_URL (default the local
 * one, database "test"), each store in a fresh schema of its own that is
 * dropped when the store's layer is released. A test that cannot reach the
 * server fails; it never passes silently.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"

/** The server the tests use. */
export const TEST_PG_URL = process.env.TIMER_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** The URL of `base` with its search_path set to `schema`. */
export const withSearchPath = (base: string, schema: string): string => {
  const url = new URL(base)
  url.searchParams.set("options", `-c search_path=${schema}`)
  return url.toString()
}

/** A client of the test server for set-up work (creating and dropping schemas). */
export const adminClient = PgClient.layer({ url: Redacted.make(TEST_PG_URL), maxConnections: 2 })

/** Creates a fresh schema for the life of the scope (dropped at its end); returns its URL. */
export const freshSchemaUrl = Effect.gen(function*() {
  // The admin client lives as long as the scope, so that it can still drop the schema at the end.
  const sql = Context.get(yield* Layer.build(adminClient), SqlClient.SqlClient)
  const schema = `t_${randomBytes(6).toString("hex")}`
  yield* sql.unsafe(`CREATE SCHEMA ${schema}`)
  yield* Effect.addFinalizer(() => Effect.ignore(sql.unsafe(`DROP SCHEMA ${schema} CASCADE`)))
  return withSearchPath(TEST_PG_URL, schema)
})

/** A layer made by `make` over a fresh schema, which is dropped when the layer is released. */
export const inFreshSchema = <A, E, R>(make: (url: string) => Layer.Layer<A, E, R>) =>
  Layer.unwrapScoped(Effect.map(freshSchemaUrl, make))
