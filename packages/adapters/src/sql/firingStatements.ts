/**
 * The statements of the firing path, in SQL that SQLite and PostgreSQL both
 * run. They live apart from the store so that the tests can ask each
 * database's planner about exactly these statements.
 */
import type { SqlClient } from "@effect/sql"
import type { ShardRef } from "@timer/core"
import type { PendingFiring } from "./firingWriter.js"
import { firingColumns, type TimerRow } from "./timerRows.js"

/**
 * The shard's SCHEDULED timers in nextFireAt order, up to `limit`, leaving out
 * `excludeIds`: an index range scan of timers_due within one shard. The caller
 * splits what is due from the first one that is not.
 */
export const dueRows = (sql: SqlClient.SqlClient, shard: ShardRef, limit: number, excludeIds: ReadonlyArray<string>) =>
  sql<TimerRow>`SELECT * FROM timers
    WHERE namespace = ${shard.namespace} AND shard_id = ${shard.shardId} AND state = 'SCHEDULED'
      ${excludeIds.length === 0 ? sql`` : sql`AND id NOT IN ${sql.in(excludeIds)}`}
    ORDER BY next_fire_at LIMIT ${limit}`

/** The shard's version. */
export const shardVersion = (sql: SqlClient.SqlClient, shard: ShardRef) =>
  sql<{ version: number | string }>`SELECT version FROM shards
    WHERE namespace = ${shard.namespace} AND shard_id = ${shard.shardId}`

/** The versions of several shards, their rows share-locked (PostgreSQL, inside a transaction). */
export const lockedShardVersions = (sql: SqlClient.SqlClient, shards: ReadonlyArray<ShardRef>) =>
  sql<{ namespace: string; shard_id: number | string; version: number | string }>`SELECT namespace, shard_id, version
    FROM shards WHERE ${sql.or(shards.map((shard) => sql`(namespace = ${shard.namespace} AND shard_id = ${shard.shardId})`))}
    ${shareLock(sql)}`

const shareLock = (sql: SqlClient.SqlClient) => sql.onDialectOrElse({ pg: () => sql`FOR SHARE`, orElse: () => sql`` })

/** The SQL type of each column a firing writes (parameters in a VALUES list are cast to it). */
const COLUMN_TYPES: Record<string, string> = {
  state: "TEXT",
  attempts: "INTEGER",
  execute_at: "BIGINT",
  next_fire_at: "BIGINT",
  firing_id: "TEXT",
  first_attempt_at: "BIGINT",
  last_error: "TEXT",
  executed_at: "BIGINT",
  updated_at: "BIGINT"
}

/**
 * Writes the outcomes of firings of one kind (the same columns), each to the
 * arming that fired (same firing id, not finished), in one statement; returns
 * the keys written. The keys must be distinct. The condition says "not FIRED
 * or FAILED" rather than "SCHEDULED": the latter is the partial due index's
 * predicate, and PostgreSQL's planner then picks that index over the primary
 * key on a table not yet analyzed, reading a whole namespace per row.
 */
export const writeFirings = (sql: SqlClient.SqlClient, firings: ReadonlyArray<PendingFiring>) => {
  const columns = Object.keys(firingColumns(firings[0]!.update, firings[0]!.now))
  const set = sql.csv(columns.map((column, i) => sql.literal(`${column} = CAST(v.column${i + 4} AS ${COLUMN_TYPES[column]})`)))
  const rows = sql.csv(firings.map((firing) => {
    const values = firingColumns(firing.update, firing.now)
    return sql.join(", ", true)([firing.key.namespace, firing.key.id, firing.firingId, ...columns.map((c) => values[c] ?? null)].map((value) => sql`${value}`))
  }))
  return sql<{ namespace: string; id: string }>`UPDATE timers SET ${set}
    FROM (VALUES ${rows}) AS v
    WHERE timers.namespace = v.column1 AND timers.id = v.column2 AND timers.firing_id = v.column3
      AND timers.state NOT IN ('FIRED', 'FAILED')
    RETURNING timers.namespace, timers.id`
}
