/**
 * Shard ownership as the store records it, watched from outside: a poller
 * reads the shards table every few tens of milliseconds and keeps, per shard,
 * the runs of equal (version, owner) it saw. Deliveries (webhook calls with
 * their x-timer-instance) are then checked against it:
 *
 * - a delivery by X at time t while the store showed, both before and after
 *   t, the shard held by another owner (or by nobody) at one unchanged
 *   version is a delivery by a second owner (`deliveriesOutsideTenure`);
 * - per shard, the succession of delivering instances must follow the
 *   succession of owners the store recorded: an A..B..A pattern is allowed
 *   only when A claimed the shard again after B (`successionCheck`).
 *
 * Why the first check is exact: the poller's snapshot of a poll lies between
 * the moments the query was sent and answered (both read from Date.now() in
 * this process, as the receiver's arrival times are). A (version, owner) seen
 * at two polls held between them: an owner changes only by a claim, which
 * increments the version, or a release, which clears it; so a run of equal
 * observations from one answered at `firstReturnedAt` to one sent at
 * `lastSentAt` held the whole time between. An owner delivers only while it
 * holds the shard: it drains before it releases, the arrival of a call is
 * recorded before the receiver answers it, and a killed owner's shards are
 * claimed only after its death.
 */
import { crc32 } from "node:zlib"
import type { WebhookCall } from "./receiver.js"
import { connect, type PgClient } from "./postgres.js"
import { sleep } from "./server.js"

/** The shard of a timer id: CRC32 (zlib) of its UTF-8 bytes modulo the number of shards. */
export const shardOf = (timerId: string, numShards: number): number =>
  (crc32(Buffer.from(timerId, "utf8")) >>> 0) % numShards

/** A run of equal observations of one shard's row. */
export interface Tenure {
  readonly version: number
  /** Null when released. */
  readonly owner: string | null
  readonly firstSentAt: number
  readonly firstReturnedAt: number
  lastSentAt: number
  lastReturnedAt: number
}

/** A shard's row now (as last polled). */
export interface ShardNow {
  readonly version: number
  readonly owner: string | null
}

/** A change seen in the instances table. */
export interface InstanceEvent {
  readonly at: number
  readonly id: string
  readonly kind: "registered" | "deregistered" | "pid changed" | "lapsed" | "renewed after lapse"
  readonly pid: number | undefined
  readonly expiresAt: number | undefined
}

/** Heartbeats of one instance as seen: the longest step of its expires_at, and how often it was seen lapsed. */
export interface HeartbeatStats {
  readonly maxStepMs: number
  readonly lapses: number
}

/** A running poller of the shards table (and of the instances table). */
export interface OwnershipPoller {
  /** Per shard key ("namespace/shardId"), the runs seen, oldest first. */
  readonly tenures: Map<string, Array<Tenure>>
  /** The rows of the last poll, by shard key. */
  current(): Map<string, ShardNow>
  /** Registrations, deregistrations, pid changes and lapses seen, in order. */
  readonly instanceEvents: Array<InstanceEvent>
  /** Per instance id, its heartbeats as seen. */
  heartbeats(): Record<string, HeartbeatStats>
  /** Polls answered so far, and the longest gap between two answered polls (ms). */
  stats(): { readonly polls: number; readonly failures: number; readonly maxGapMs: number }
  /** Resolves after the next answered poll (bounded). */
  nextPoll(timeoutMs?: number): Promise<void>
  stop(): Promise<void>
}

/** Starts polling the shards table of the database at `url` every `intervalMs`. */
export const startOwnershipPoller = async (url: string, intervalMs = 40): Promise<OwnershipPoller> => {
  const client: PgClient = await connect(url, "timers e2e ownership poller")
  const tenures = new Map<string, Array<Tenure>>()
  let current = new Map<string, ShardNow>()
  let polls = 0
  let failures = 0
  let maxGapMs = 0
  let lastAnswer = 0
  let stopped = false
  const waiters: Array<() => void> = []
  const instanceEvents: Array<InstanceEvent> = []
  const instances = new Map<string, { pid: number; expiresAt: number; lapsed: boolean; maxStepMs: number; lapses: number }>()
  const gone = new Map<string, { maxStepMs: number; lapses: number }>()

  const observeInstances = (rows: Array<Record<string, unknown>>, at: number) => {
    const seen = new Set<string>()
    for (const row of rows) {
      const id = String(row.id)
      const pid = Number(row.pid)
      const expiresAt = Number(row.expires_at)
      seen.add(id)
      const known = instances.get(id)
      if (known === undefined) {
        const before = gone.get(id)
        instances.set(id, { pid, expiresAt, lapsed: false, maxStepMs: before?.maxStepMs ?? 0, lapses: before?.lapses ?? 0 })
        instanceEvents.push({ at, id, kind: "registered", pid, expiresAt })
        continue
      }
      if (known.pid !== pid) {
        instanceEvents.push({ at, id, kind: "pid changed", pid, expiresAt })
        known.pid = pid
      }
      if (expiresAt !== known.expiresAt) {
        known.maxStepMs = Math.max(known.maxStepMs, expiresAt - known.expiresAt)
        known.expiresAt = expiresAt
      }
      const lapsed = expiresAt <= at
      if (lapsed && !known.lapsed) {
        known.lapses++
        instanceEvents.push({ at, id, kind: "lapsed", pid, expiresAt })
      } else if (!lapsed && known.lapsed) {
        instanceEvents.push({ at, id, kind: "renewed after lapse", pid, expiresAt })
      }
      known.lapsed = lapsed
    }
    for (const [id, known] of instances) {
      if (seen.has(id)) continue
      instances.delete(id)
      gone.set(id, { maxStepMs: known.maxStepMs, lapses: known.lapses })
      instanceEvents.push({ at, id, kind: "deregistered", pid: known.pid, expiresAt: undefined })
    }
  }

  const pollOnce = async () => {
    const sentAt = Date.now()
    let rows: Array<Record<string, unknown>>
    try {
      rows = (await client.query("SELECT namespace, shard_id, version, owner_id FROM shards")).rows
    } catch {
      // the schema is not migrated yet, or the database hiccuped: poll again
      failures++
      return
    }
    const returnedAt = Date.now()
    try {
      observeInstances((await client.query("SELECT id, pid, expires_at FROM instances")).rows, Date.now())
    } catch {
      failures++
    }
    if (lastAnswer > 0) maxGapMs = Math.max(maxGapMs, returnedAt - lastAnswer)
    lastAnswer = returnedAt
    polls++
    const next = new Map<string, ShardNow>()
    for (const row of rows) {
      const key = `${String(row.namespace)}/${Number(row.shard_id)}`
      const version = Number(row.version)
      const owner = row.owner_id === null ? null : String(row.owner_id)
      next.set(key, { version, owner })
      const list = tenures.get(key) ?? []
      if (list.length === 0) tenures.set(key, list)
      const last = list[list.length - 1]
      if (last !== undefined && last.version === version && last.owner === owner) {
        last.lastSentAt = sentAt
        last.lastReturnedAt = returnedAt
      } else {
        list.push({ version, owner, firstSentAt: sentAt, firstReturnedAt: returnedAt, lastSentAt: sentAt, lastReturnedAt: returnedAt })
      }
    }
    current = next
    for (const wake of waiters.splice(0)) wake()
  }

  const loop = (async () => {
    while (!stopped) {
      const started = Date.now()
      await pollOnce()
      await sleep(Math.max(0, started + intervalMs - Date.now()))
    }
  })()

  return {
    tenures,
    current: () => current,
    instanceEvents,
    heartbeats: () => {
      const all: Record<string, HeartbeatStats> = {}
      for (const [id, g] of gone) all[id] = { maxStepMs: g.maxStepMs, lapses: g.lapses }
      for (const [id, i] of instances) all[id] = { maxStepMs: i.maxStepMs, lapses: i.lapses }
      return all
    },
    stats: () => ({ polls, failures, maxGapMs }),
    nextPoll: (timeoutMs = 5_000) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs)
        waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      }),
    stop: async () => {
      stopped = true
      await Promise.race([loop, sleep(5_000)])
      await client.end().catch(() => undefined)
    }
  }
}

/** Shards held per owner in a poll's rows (released shards under "(none)"). */
export const countByOwner = (rows: Map<string, ShardNow>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const { owner } of rows.values()) counts.set(owner ?? "(none)", (counts.get(owner ?? "(none)") ?? 0) + 1)
  return counts
}

/**
 * Whether the shards are spread evenly over exactly `live`: every shard held
 * by one of them, and each holding ⌊S/n⌋ or ⌈S/n⌉.
 */
export const isBalanced = (rows: Map<string, ShardNow>, live: ReadonlyArray<string>, expectedShards: number): boolean => {
  if (rows.size !== expectedShards) return false
  const counts = countByOwner(rows)
  const low = Math.floor(expectedShards / live.length)
  const high = Math.ceil(expectedShards / live.length)
  let held = 0
  for (const id of live) {
    const n = counts.get(id) ?? 0
    if (n < low || n > high) return false
    held += n
  }
  return held === expectedShards
}

/** Waits (bounded) until the shards are spread evenly over `live`; returns the wait in ms, or undefined on timeout. */
export const waitBalanced = async (
  poller: OwnershipPoller,
  live: ReadonlyArray<string>,
  expectedShards: number,
  timeoutMs: number
): Promise<number | undefined> => {
  const start = Date.now()
  while (Date.now() - start < timeoutMs) {
    await poller.nextPoll(1_000)
    if (isBalanced(poller.current(), live, expectedShards)) return Date.now() - start
  }
  return undefined
}

/** A webhook call placed on its shard. */
export interface ShardDelivery {
  readonly key: string
  readonly timerId: string
  readonly instance: string
  readonly at: number
  readonly executeAtMs: number
  readonly firingId: string | undefined
}

/** The calls of `namespace`, by shard key, each list in arrival order. */
export const deliveriesByShard = (
  calls: ReadonlyArray<WebhookCall>,
  namespace: string,
  numShards: number
): Map<string, Array<ShardDelivery>> => {
  const byShard = new Map<string, Array<ShardDelivery>>()
  for (const call of calls) {
    if (call.body === undefined || call.body.namespace !== namespace) continue
    const key = `${namespace}/${shardOf(call.body.timerId, numShards)}`
    const delivery: ShardDelivery = {
      key,
      timerId: call.body.timerId,
      instance: call.instance ?? "(no x-timer-instance)",
      at: call.at,
      executeAtMs: Date.parse(call.body.executeAt),
      firingId: call.firingId
    }
    const list = byShard.get(key)
    if (list === undefined) byShard.set(key, [delivery])
    else list.push(delivery)
  }
  for (const list of byShard.values()) list.sort((a, b) => a.at - b.at)
  return byShard
}

/** A delivery made while the store showed the shard held by someone else throughout. */
export interface TenureViolation {
  readonly delivery: ShardDelivery
  readonly heldBy: string | null
  readonly version: number
  readonly heldFrom: number
  readonly heldUntil: number
}

/** Deliveries that fall inside a run during which another owner (or none) surely held their shard. */
export const deliveriesOutsideTenure = (
  byShard: Map<string, Array<ShardDelivery>>,
  tenures: Map<string, Array<Tenure>>
): Array<TenureViolation> => {
  const violations: Array<TenureViolation> = []
  for (const [key, deliveries] of byShard) {
    const runs = tenures.get(key) ?? []
    for (const delivery of deliveries) {
      for (const run of runs) {
        if (run.owner === delivery.instance) continue
        if (run.firstReturnedAt <= delivery.at && delivery.at <= run.lastSentAt) {
          violations.push({ delivery, heldBy: run.owner, version: run.version, heldFrom: run.firstReturnedAt, heldUntil: run.lastSentAt })
          break
        }
      }
    }
  }
  return violations
}

/** A run of consecutive deliveries on one shard by one instance. */
export interface DeliveryRun {
  readonly instance: string
  readonly count: number
  readonly firstAt: number
  readonly lastAt: number
}

/** The succession of delivering instances on one shard. */
export const runsOf = (deliveries: ReadonlyArray<ShardDelivery>): Array<DeliveryRun> => {
  const runs: Array<DeliveryRun> = []
  for (const d of deliveries) {
    const last = runs[runs.length - 1]
    if (last !== undefined && last.instance === d.instance) {
      runs[runs.length - 1] = { ...last, count: last.count + 1, lastAt: d.at }
    } else {
      runs.push({ instance: d.instance, count: 1, firstAt: d.at, lastAt: d.at })
    }
  }
  return runs
}

/** What the succession check found on every shard. */
export interface SuccessionReport {
  /** Shards whose deliveries came from more than one instance. */
  readonly shardsWithHandoffs: number
  /** Handoffs seen in the deliveries (changes of delivering instance). */
  readonly handoffs: number
  /** A..B..A patterns: an instance delivering again on a shard after another did. */
  readonly returns: number
  /** Returns the store explains: the instance claimed the shard again after the other one. */
  readonly explainedReturns: number
  /** Runs of deliveries that no owner succession recorded by the store explains (should be none). */
  readonly unexplained: Array<{ readonly key: string; readonly runs: Array<DeliveryRun>; readonly owners: Array<string | null> }>
}

/**
 * Checks that, per shard, the delivering instances follow the owners the
 * store recorded, in order: each run of deliveries by X is matched to a
 * tenure of X no earlier than the previous run's.
 */
export const successionCheck = (
  byShard: Map<string, Array<ShardDelivery>>,
  tenures: Map<string, Array<Tenure>>
): SuccessionReport => {
  let shardsWithHandoffs = 0
  let handoffs = 0
  let returns = 0
  let explainedReturns = 0
  const unexplained: Array<{ key: string; runs: Array<DeliveryRun>; owners: Array<string | null> }> = []
  for (const [key, deliveries] of byShard) {
    const runs = runsOf(deliveries)
    if (runs.length > 1) shardsWithHandoffs++
    handoffs += runs.length - 1
    // Owners in succession (by version; releases dropped), consecutive repeats merged.
    const owners: Array<string | null> = []
    for (const tenure of tenures.get(key) ?? []) {
      if (tenure.owner === null) continue
      if (owners[owners.length - 1] !== tenure.owner) owners.push(tenure.owner)
    }
    let pointer = 0
    let ok = true
    const seen = new Set<string>()
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i]!
      const isReturn = seen.has(run.instance)
      if (isReturn) returns++
      let found = -1
      for (let j = pointer; j < owners.length; j++) {
        if (owners[j] === run.instance) {
          found = j
          break
        }
      }
      if (found < 0) {
        ok = false
      } else {
        if (isReturn) explainedReturns++
        pointer = found
      }
      seen.add(run.instance)
    }
    if (!ok) unexplained.push({ key, runs, owners })
  }
  return { shardsWithHandoffs, handoffs, returns, explainedReturns, unexplained }
}
