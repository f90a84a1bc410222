/**
 * Wake-ups across instances over a real PostgreSQL: a notice sent through one
 * instance reaches the shard's listener on another; one for a shard this
 * instance holds is delivered directly.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { TimerWakeups } from "@timer/core"
import { Context, Deferred, Duration, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { layerPgWakeups } from "../src/index.js"
import { adminClient, TEST_PG_URL } from "./support/pgSchema.js"

/** The wake-ups of one instance: its own connection pool and listening connection. */
const instance = Effect.map(
  Layer.build(layerPgWakeups(TEST_PG_URL).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(TEST_PG_URL), maxConnections: 2 })))),
  Context.get(TimerWakeups)
)

describe("wake-ups over LISTEN/NOTIFY", () => {
  it.live("a notice sent through one instance wakes the shard's listener on another", () =>
    Effect.scoped(Effect.gen(function*() {
      const a = yield* instance
      const b = yield* instance
      // A namespace of this test only: other tests' notices on the shared channel do not match it.
      const shard = { namespace: `wake-${randomBytes(4).toString("hex")}`, shardId: 3 }
      const woken = yield* Deferred.make<number>()
      yield* b.listen(shard, (at) => Deferred.unsafeDone(woken, Effect.succeed(at)))
      // LISTEN is set up in the background; send until heard, for at most 5 s.
      const heard = yield* a.notify(shard, 1_234).pipe(
        Effect.zipRight(Deferred.await(woken).pipe(Effect.timeout(Duration.millis(200)))),
        Effect.retry({ times: 25 })
      )
      expect(heard).toBe(1_234)
    })))

  it.live("after the listening connection is killed, wake-ups get through again", () =>
    Effect.scoped(Effect.gen(function*() {
      const a = yield* instance
      const b = yield* instance
      const shard = { namespace: `wake-${randomBytes(4).toString("hex")}`, shardId: 1 }
      const heard: Array<number> = []
      yield* b.listen(shard, (at) => heard.push(at))
      const sendUntilHeard = (at: number) =>
        a.notify(shard, at).pipe(
          Effect.zipRight(Effect.sleep(Duration.millis(100))),
          Effect.repeat({ until: () => heard.includes(at), times: 100 })
        )
      yield* sendUntilHeard(1)
      // The database drops every wake-up listener (as on a restart of the server).
      const sql = yield* Effect.map(Layer.build(adminClient), Context.get(SqlClient.SqlClient))
      const killed = yield* sql<{ killed: boolean }>`SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
        WHERE application_name = 'durable-timers wake-ups'`
      expect(killed.length).toBeGreaterThan(0)
      yield* sendUntilHeard(2)
      expect(heard).toContain(2)
    })))

  it.live("a notice for a shard this instance listens to is delivered without the database", () =>
    Effect.scoped(Effect.gen(function*() {
      const a = yield* instance
      const shard = { namespace: `wake-${randomBytes(4).toString("hex")}`, shardId: 0 }
      const seen: Array<number> = []
      yield* a.listen(shard, (at) => seen.push(at))
      yield* a.notify(shard, 42)
      // Synchronous: no round trip, so it is there as soon as notify returns.
      expect(seen).toEqual([42])
    })))
})
