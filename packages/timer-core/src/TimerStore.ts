/**
 * The store port: durable timers and namespaces, sharded. Adapters (SQLite now,
 * PostgreSQL next) implement it; every write on the firing path checks
 * the shard's ownership version in the same transaction.
 */
import { Context, type Effect, type Option } from "effect"
import type { Namespace } from "./Namespace.js"
import type { ShardLease } from "./ShardOwnership.js"
import type { TimerKey, TimerRecord, TimerState } from "./Timer.js"
import type { NamespaceExists, ShardOwnershipLost, StoreError, TimerNotFound, TimerNotPending } from "./TimerErrors.js"

/** A page of timers and the cursor of the next page, if any. */
export interface TimerPage {
  readonly timers: ReadonlyArray<TimerRecord>
  readonly next: Option.Option<{ readonly executeAt: number; readonly id: string }>
}

/** What `dueTimers` read of one shard. */
export interface DueTimers {
  /** The due timers, oldest first. */
  readonly timers: ReadonlyArray<TimerRecord>
  /**
   * The earliest nextFireAt among the shard's other SCHEDULED timers (neither
   * returned nor excluded): at most `now` when more were due than `limit`.
   */
  readonly nextFireAt: Option.Option<number>
}

/**
 * A change a broker command asks for:
 * - Schedule: insert the timer, or move an existing SCHEDULED one to the
 *   timer's executeAt (new firing id, attempts afresh, the new origin); one
 *   that has fired or failed, or is already due at that time, stays as it is.
 * - Cancel: delete the timer if it is SCHEDULED.
 */
export type CommandChange =
  | { readonly _tag: "Schedule"; readonly timer: TimerRecord }
  | { readonly _tag: "Cancel"; readonly key: TimerKey }

/** What a command change did: Armed (inserted or moved; its shard may need a wake-up), Unchanged, Cancelled. */
export type CommandResult =
  | { readonly _tag: "Armed"; readonly timer: TimerRecord }
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Cancelled" }

/** A list query over one namespace, ordered by (executeAt, id). */
export interface TimerQuery {
  readonly namespace: string
  readonly state?: TimerState | undefined
  readonly executeAtFrom?: number | undefined
  readonly executeAtTo?: number | undefined
  readonly after?: { readonly executeAt: number; readonly id: string } | undefined
  readonly limit: number
}

/**
 * What a firing did to a timer, written with `recordFiring`:
 * - Fired: delivered; the timer is done.
 * - Rearmed: the callback asked for another firing at `executeAt` (a new firingId).
 * - RetryScheduled: the attempt failed; try again at `nextFireAt`.
 * - Failed: the attempt failed and no retry is left, or the failure is permanent.
 */
export type FiringUpdate =
  | { readonly _tag: "Fired"; readonly attempts: number; readonly executedAt: number }
  | {
    readonly _tag: "Rearmed"
    readonly executeAt: number
    readonly firingId: string
    readonly executedAt: number
  }
  | {
    readonly _tag: "RetryScheduled"
    readonly attempts: number
    readonly nextFireAt: number
    readonly firstAttemptAt: number
    readonly lastError: string
  }
  | { readonly _tag: "Failed"; readonly attempts: number; readonly lastError: string }

/** The timer store. */
export class TimerStore extends Context.Tag("@timer/TimerStore")<TimerStore, {
  /** Creates a namespace; one that exists with the same numShards is returned as it is. */
  readonly createNamespace: (namespace: Namespace) => Effect.Effect<Namespace, NamespaceExists | StoreError>
  /** Reads a namespace. */
  readonly getNamespace: (name: string) => Effect.Effect<Option.Option<Namespace>, StoreError>
  /** Lists all namespaces, by name. */
  readonly listNamespaces: Effect.Effect<ReadonlyArray<Namespace>, StoreError>

  /**
   * Inserts a timer, or replaces the one with the same (namespace, id) whatever
   * its state; the stored createdAt of a replaced timer is kept. Returns what is stored.
   */
  readonly upsertTimer: (timer: TimerRecord) => Effect.Effect<TimerRecord, StoreError>
  /** Reads a timer. */
  readonly getTimer: (key: TimerKey) => Effect.Effect<Option.Option<TimerRecord>, StoreError>
  /**
   * Atomically replaces a SCHEDULED timer with `f` of it. Fails with
   * TimerNotFound or TimerNotPending, changing nothing.
   */
  readonly updateScheduled: (
    key: TimerKey,
    f: (timer: TimerRecord) => TimerRecord
  ) => Effect.Effect<TimerRecord, TimerNotFound | TimerNotPending | StoreError>
  /** Deletes a timer; false when there was none. */
  readonly deleteTimer: (key: TimerKey) => Effect.Effect<boolean, StoreError>
  /** One page of a namespace's timers. */
  readonly listTimers: (query: TimerQuery) => Effect.Effect<TimerPage, StoreError>

  /**
   * What a shard fiber reads, in one index range scan of one shard: the
   * SCHEDULED timers with nextFireAt <= now, oldest first, at most `limit`,
   * leaving out the ids in `excludeIds` (those already in flight), and when
   * the shard is next due. Fails with ShardOwnershipLost when the shard's
   * version is no longer the lease's.
   */
  readonly dueTimers: (
    lease: ShardLease,
    now: number,
    limit: number,
    excludeIds?: ReadonlyArray<string>
  ) => Effect.Effect<DueTimers, ShardOwnershipLost | StoreError>
  /**
   * Writes the outcome of one firing, in one transaction that first checks the
   * lease's version (ShardOwnershipLost on a mismatch, nothing written). Only
   * the arming that was fired (same firingId, still SCHEDULED) is changed;
   * returns false when the timer was replaced, updated or deleted meanwhile
   * (every replacement and update gives the timer a new firingId).
   */
  readonly recordFiring: (
    lease: ShardLease,
    key: TimerKey,
    firingId: string,
    update: FiringUpdate,
    now: number
  ) => Effect.Effect<boolean, ShardOwnershipLost | StoreError>
  /** Applies the changes of a batch of commands, in order, in one transaction. */
  readonly applyCommands: (changes: ReadonlyArray<CommandChange>) => Effect.Effect<ReadonlyArray<CommandResult>, StoreError>
  /** Deletes up to `limit` FIRED or FAILED timers last updated before `before`; returns how many. */
  readonly purgeFinished: (before: number, limit: number) => Effect.Effect<number, StoreError>
  /** Checks that the store answers. */
  readonly ping: Effect.Effect<void, StoreError>
}>() {}
