/**
 * PostgreSQL for the end-to-end tests: a fresh schema per test on the server
 * of TIMER_TEST_PG_URL (default the local one, database "test"), the URL that
 * points a server process at it, and a small client for reading its tables.
 * The `pg` driver is the one packages/adapters depends on (resolved from
 * there: the e2e package does not list it).
 */
import { randomBytes } from "node:crypto"
import { createRequire } from "node:module"
import { join } from "node:path"
import { repoRoot } from "./server.js"

/** The server the tests use. */
export const TEST_PG_URL = process.env.TIMER_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** The little of a `pg` client these tests use. */
export interface PgClient {
  connect(): Promise<void>
  query(text: string, values?: ReadonlyArray<unknown>): Promise<{ rows: Array<Record<string, unknown>> }>
  end(): Promise<void>
  on(event: "error", listener: (error: Error) => void): void
}

interface PgModule {
  readonly Client: new (config: { connectionString: string; application_name?: string }) => PgClient
}

const pg = createRequire(join(repoRoot, "packages/adapters/package.json"))("pg") as PgModule

/** A connected client; errors after connecting (the server going away) are kept from crashing the test process. */
export const connect = async (url: string, applicationName = "timers e2e"): Promise<PgClient> => {
  const client = new pg.Client({ connectionString: url, application_name: applicationName })
  client.on("error", () => {
    // reported by the next query
  })
  await client.connect()
  return client
}

/** The URL of `base` with its search_path set to `schema`. */
export const withSearchPath = (base: string, schema: string): string => {
  const url = new URL(base)
  url.searchParams.set("options", `-c search_path=${schema}`)
  return url.toString()
}

/** A fresh schema and the URL that uses it. */
export interface TestSchema {
  readonly schema: string
  /** TIMER_DB_URL for a server on this schema. */
  readonly url: string
  /** Drops the schema and everything in it (best effort, bounded). */
  drop(): Promise<void>
}

/** Creates a fresh schema `e2e_<random>`. */
export const createSchema = async (prefix = "e2e"): Promise<TestSchema> => {
  const schema = `${prefix}_${randomBytes(5).toString("hex")}`
  const admin = await connect(TEST_PG_URL, "timers e2e admin")
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
  } finally {
    await admin.end().catch(() => undefined)
  }
  let dropped = false
  return {
    schema,
    url: withSearchPath(TEST_PG_URL, schema),
    drop: async () => {
      if (dropped) return
      dropped = true
      const drop = (async () => {
        const client = await connect(TEST_PG_URL, "timers e2e admin")
        try {
          await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
        } finally {
          await client.end().catch(() => undefined)
        }
      })()
      await Promise.race([drop.catch((error) => console.error(`could not drop schema ${schema}: ${String(error)}`)), new Promise((r) => setTimeout(r, 10_000))])
    }
  }
}
