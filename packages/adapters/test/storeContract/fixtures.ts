/**
 * What the store contract's modules share: the namespaces and timers they
 * write, reads of the store, and the `test` that runs a body on a fresh store.
 */
import { it } from "@effect/vitest"
import { type DueTimers, Namespace, ShardOwnership, type TimerKey, type TimerQuery, type TimerRecord, TimerStore } from "@timer/core"
import { Effect, type Layer, Option, type Scope } from "effect"

export const NS = "contract"
export const OTHER_NS = "contract-other"

/**
 * Claims a shard for `ownerId` whatever its state, as an instance does after it
 * saw the shard free: makes its row if needed, reads its version, claims at it.
 */
export const takeShard = (
  ownership: ShardOwnership["Type"],
  shard: { readonly namespace: string; readonly shardId: number },
  ownerId: string
) =>
  Effect.gen(function*() {
    yield* ownership.ensureShards(shard.namespace, shard.shardId + 1)
    const state = (yield* ownership.shards).find((s) => s.namespace === shard.namespace && s.shardId === shard.shardId)!
    return Option.getOrThrow(yield* ownership.claim(shard, ownerId, state.version))
  })

/** A SCHEDULED timer in namespace NS, shard 0; `overrides` win. */
export const makeTimer = (id: string, overrides: Partial<TimerRecord> = {}): TimerRecord => {
  const executeAt = overrides.executeAt ?? 1_000
  return {
    namespace: NS,
    id,
    shardId: 0,
    executeAt,
    nextFireAt: executeAt,
    callbackUrl: "http://127.0.0.1:9/hook",
    callbackTimeoutSeconds: 10,
    state: "SCHEDULED",
    attempts: 0,
    firingId: `firing-${id}-1`,
    createdAt: 100,
    updatedAt: 100,
    ...overrides
  }
}

export const namespace = (name: string, numShards = 4, createdAt = 10) => new Namespace({ name, numShards, createdAt })

export const services = Effect.all({ store: TimerStore, ownership: ShardOwnership })

/** Reads a timer that must exist. */
export const mustGet = (key: TimerKey) =>
  Effect.flatMap(TimerStore, (store) => store.getTimer(key)).pipe(
    Effect.map((found) => Option.getOrThrowWith(found, () => new Error(`timer ${key.namespace}/${key.id} is missing`)))
  )

/** Every timer of a namespace, in list order. */
export const listAll = (query: Omit<TimerQuery, "limit" | "after">) =>
  Effect.flatMap(TimerStore, (store) => store.listTimers({ ...query, limit: 1_000 })).pipe(
    Effect.map((page) => page.timers)
  )

export const ids = (timers: ReadonlyArray<TimerRecord> | DueTimers) =>
  ("timers" in timers ? timers.timers : timers).map((t) => t.id)

/** Registers one contract test, whose body runs on a store of its own. */
export type ContractTest = <A, E>(
  title: string,
  body: Effect.Effect<A, E, TimerStore | ShardOwnership | Scope.Scope>
) => void

/** The contract's `test`: every test builds a new, empty store with `makeLayer`. */
export const contractTest = (makeLayer: () => Layer.Layer<TimerStore | ShardOwnership, unknown>): ContractTest =>
  (title, body) => it.scoped(title, () => Effect.provide(body, makeLayer()))
