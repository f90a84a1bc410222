/**
 * Wake-ups across instances on PostgreSQL: a timer created or moved earlier
 * through any instance wakes the fiber of its shard on whichever instance owns
 * it, through LISTEN/NOTIFY. A shard held by this instance is woken directly.
 * The listening connection is a client of its own, opened again whenever it
 * fails (a database restart, say); meanwhile the shard fibers' idle poll still
 * finds every timer.
 */
import { SqlClient } from "@effect/sql"
import { makeWakeupListeners, type ShardRef, shardKey, TimerWakeups } from "@timer/core"
import { Duration, Effect, Layer, Schedule } from "effect"
import pg from "pg"

/** The channel wake-ups travel on. */
export const WAKEUP_CHANNEL = "timer_wakeups"

/** The payload of one wake-up: namespace, shard id and due time, tab-separated (names have no tabs). */
const encode = (shard: ShardRef, at: number) => `${shard.namespace}\t${shard.shardId}\t${at}`

const decode = (payload: string): { readonly key: string; readonly at: number } | undefined => {
  const [namespace, shardId, at] = payload.split("\t")
  if (namespace === undefined || shardId === undefined || at === undefined) return undefined
  return { key: shardKey({ namespace, shardId: Number(shardId) }), at: Number(at) }
}

/**
 * Listens on the channel with a client of its own until that client fails;
 * calls `onPayload` for every notification.
 */
const listenOnce = (url: string, onPayload: (payload: string) => void) =>
  Effect.scoped(
    Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise(async () => {
          const client = new pg.Client({ connectionString: url, application_name: "durable-timers wake-ups" })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end().catch(() => undefined))
      )
      yield* Effect.async<never, Error>((resume) => {
        const onNotification = (message: pg.Notification) => {
          if (message.channel === WAKEUP_CHANNEL && message.payload !== undefined) onPayload(message.payload)
        }
        const onError = (error: Error) => resume(Effect.fail(error))
        const onEnd = () => resume(Effect.fail(new Error("the listening connection ended")))
        client.on("notification", onNotification)
        client.on("error", onError)
        client.on("end", onEnd)
        client.query(`LISTEN ${WAKEUP_CHANNEL}`).catch(onError)
        return Effect.sync(() => {
          client.off("notification", onNotification)
          client.off("error", onError)
          client.off("end", onEnd)
        })
      })
    })
  )

/** Wake-ups through the database of `url`, sent with the SqlClient in context. */
export const layerPgWakeups = (url: string): Layer.Layer<TimerWakeups, never, SqlClient.SqlClient> =>
  Layer.scoped(
    TimerWakeups,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const listeners = makeWakeupListeners()

      yield* listenOnce(url, (payload) => {
        const wakeup = decode(payload)
        if (wakeup !== undefined) listeners.wake(wakeup.key, wakeup.at)
      }).pipe(
        Effect.tapErrorCause((cause) => Effect.logWarning("wake-up channel lost; listening again", cause)),
        Effect.retry(Schedule.exponential(Duration.millis(100)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(5))))),
        Effect.forkScoped
      )

      return TimerWakeups.of({
        notify: (shard, at) =>
          Effect.suspend(() =>
            listeners.wake(shardKey(shard), at)
              ? Effect.void
              // NOTIFY takes no bind parameters; pg_notify does.
              : sql`SELECT pg_notify(${WAKEUP_CHANNEL}, ${encode(shard, at)})`.pipe(
                Effect.asVoid,
                Effect.catchAll((error) => Effect.logWarning("could not send a wake-up", error))
              )
          ),
        listen: listeners.listen
      })
    })
  )
