/**
 * The statements of the firing path, in SQL that SQLite and PostgreSQL both
 * run. They live apart from the store so that the tests can ask each
 * database's planner about exactly these statements.
 */
import type { SqlClient } from "@effect/sql"
import type { ShardLease } from "@timer/core"
import type { PendingFiring } from "./firingWriter.js"
import { firingColumns, type TimerRow } from "./timerRows.js"

/**
 * The shard's SCHEDULED timers in nextFireAt order, up to `limit`, leaving out
 * `excludeIds`: an index range scan of timers_due within one shard. The caller
 * splits what is due from the first one that is not.
 */
export const dueRows = (sql: SqlClient.SqlClient, shard: ShardLease, limit: number, excludeIds: ReadonlyArray<string>) =>
  sql<TimerRow>`SELECT * FROM timers
    WHERE namespace = ${shard.namespace} AND shard_id = ${shard.shardId} AND state = 'SCHEDULED'
      ${excludeIds.length === 0 ? sql`` : sql`AND id NOT IN ${sql.in(excludeIds)}`}
    ORDER BY next_fire_at LIMIT ${limit}`

/** The shard's version; `lock` takes a share lock on its row (PostgreSQL, inside a transaction). */
export const shardVersion = (sql: SqlClient.SqlClient, lease: ShardLease, lock: boolean) =>
  sql<{ version: number | string }>`SELECT version FROM shards
    WHERE namespace = ${lease.namespace} AND shard_id = ${lease.shardId}
    ${lock ? sql.onDialectOrElse({ pg: () => sql`FOR SHARE`, orElse: () => sql`` }) : sql``}`

/**
 * Writes one firing's outcome to the arming that fired (same firing id, not
 * finished); returns its id when it was still there. The condition says "not
 * FIRED or FAILED" rather than "SCHEDULED": the latter is the partial due
 * index's predicate, and PostgreSQL's planner then picks that index over the
 * primary key on a table not yet analyzed, reading a whole namespace per write.
 */
export const writeFiring = (sql: SqlClient.SqlClient, { firingId, key, now, update }: PendingFiring) =>
  sql<{ id: string }>`UPDATE timers SET ${sql.update(firingColumns(update, now))}
    WHERE namespace = ${key.namespace} AND id = ${key.id} AND firing_id = ${firingId} AND state NOT IN ('FIRED', 'FAILED')
    RETURNING id`
