/**
 * The scenarios of test/multi-*.test.ts: the timers they create, and the checks
 * they make of the webhook calls and of shard ownership.
 */
import { expect } from "vitest"
import type { Cluster } from "./cluster.js"
import {
  deliveriesByShard,
  deliveriesOutsideTenure,
  type OwnershipPoller,
  successionCheck
} from "./ownership.js"
import type { WebhookCall } from "./receiver.js"
import type { ServerHandle } from "./server.js"
import { createPlanned, plan, type Planned } from "./plannedTimers.js"
import { listAllTimers, percentiles } from "./util.js"

/** The namespace under test, created through the API with 64 shards. */
export const NAMESPACE = "multi"
export const NUM_SHARDS = 64
/** Shards of the default namespace, which every instance also spreads. */
export const DEFAULT_SHARDS = 16
export const ALL_SHARDS = NUM_SHARDS + DEFAULT_SHARDS
/** Creates in flight per instance. */
export const CREATE_CONCURRENCY_PER_INSTANCE = 16
/** Firings picked up per shard at most (TIMER_SHARD_CONCURRENCY). */
export const SHARD_CONCURRENCY = 32
/** Deliveries in flight per instance at most (TIMER_DELIVERY_CONCURRENCY). */
export const DELIVERY_CONCURRENCY = 256
/** Well under TIMER_IDLE_POLL (30 s): a lost wake-up shows as a lag near 30 s. */
export const STALL_MS = 15_000

/** Creates the timers round-robin through `servers`, with bounded concurrency; returns how long it took, in ms. */
export const createAll = (servers: ReadonlyArray<ServerHandle>, timers: Array<Planned>, callbackUrl: string, deadlineMs: number) =>
  createPlanned(timers, {
    servers,
    namespace: NAMESPACE,
    callbackUrl,
    concurrency: CREATE_CONCURRENCY_PER_INSTANCE * servers.length,
    deadlineMs
  })

/**
 * Creates per second through `servers`, measured on a second batch of `count`
 * timers after a first one has warmed the servers up (the cold rate is about
 * half the warm one). The timers are due in an hour and never fire here.
 */
export const warmUp = async (servers: ReadonlyArray<ServerHandle>, callbackUrl: string, count: number) => {
  await createAll(servers, plan(count, "warmup-a", Date.now() + 3_600_000, 1_000), callbackUrl, Date.now() + 30_000)
  const ms = await createAll(servers, plan(count, "warmup-b", Date.now() + 3_600_000, 1_000), callbackUrl, Date.now() + 30_000)
  return count / Math.max(1, ms) * 1000
}

/** Checks every call against the plan: known timer, exact body, instance header, one firing id per timer; returns the calls per timer (`assert` fails the test on a problem). */
export const checkCalls = (calls: ReadonlyArray<WebhookCall>, timers: ReadonlyArray<Planned>) => {
  const planned = new Map(timers.map((t) => [t.id, t]))
  const byTimer = new Map<string, Array<WebhookCall>>()
  const problems: Array<string> = []
  for (const call of calls) {
    if (call.body === undefined) {
      problems.push(`a call without a JSON body: ${call.raw.slice(0, 200)}`)
      continue
    }
    const t = planned.get(call.body.timerId)
    if (t === undefined) {
      problems.push(`a call for an unknown timer ${call.body.timerId}`)
      continue
    }
    if (call.body.namespace !== NAMESPACE) problems.push(`${t.id}: namespace ${call.body.namespace}`)
    if (call.body.executeAt !== t.executeAt) problems.push(`${t.id}: executeAt ${call.body.executeAt}`)
    if (JSON.stringify(call.body.payload) !== JSON.stringify(t.payload)) problems.push(`${t.id}: payload ${JSON.stringify(call.body.payload)}`)
    if (!(call.body.attempt >= 1)) problems.push(`${t.id}: attempt ${call.body.attempt}`)
    if (Date.parse(call.body.firedAt) < t.executeAtMs) problems.push(`${t.id}: fired at ${call.body.firedAt}, before its executeAt`)
    if (call.firingId === undefined || call.firingId === "") problems.push(`${t.id}: no x-timer-firing-id`)
    if (call.instance === undefined || call.instance === "") problems.push(`${t.id}: no x-timer-instance`)
    const list = byTimer.get(t.id)
    if (list === undefined) byTimer.set(t.id, [call])
    else list.push(call)
  }
  const missing = timers.filter((t) => !byTimer.has(t.id)).map((t) => t.id)
  const mixedFiringIds = Array.from(byTimer).filter(([, list]) => new Set(list.map((c) => c.firingId)).size > 1).map(([id]) => id)
  const assert = () => {
    expect(problems.slice(0, 20), `bad webhook calls (${problems.length})`).toEqual([])
    expect(missing.slice(0, 50), `timers never fired (${missing.length})`).toEqual([])
    expect(mixedFiringIds.slice(0, 20), "timers whose calls carry different firing ids").toEqual([])
  }
  return { byTimer, problems: problems.length, missing: missing.length, assert }
}

/** Every timer of the plan is FIRED in the store (read through `server`). */
export const expectAllFiredInStore = async (server: ServerHandle, timers: ReadonlyArray<Planned>) => {
  const listed = await listAllTimers(server, NAMESPACE)
  const state = new Map(listed.map((t) => [t.id as string, t.state as string]))
  const notFired = timers.filter((t) => state.get(t.id) !== "FIRED").map((t) => `${t.id}:${state.get(t.id)}`)
  expect(notFired.slice(0, 50), `timers not FIRED in the store (${notFired.length})`).toEqual([])
}

/** First-call lag (arrival − executeAt) of each timer. */
export const firstCallLags = (byTimer: Map<string, Array<WebhookCall>>, timers: ReadonlyArray<Planned>, filter: (t: Planned, first: WebhookCall) => boolean = () => true) => {
  const lags: Array<number> = []
  for (const t of timers) {
    const first = byTimer.get(t.id)?.[0]
    if (first !== undefined && filter(t, first)) lags.push(first.at - t.executeAtMs)
  }
  return percentiles(lags)
}

/** Ownership checks on every delivery of the namespace; `assert` fails the test on a second owner. */
export const checkOwnership = (calls: ReadonlyArray<WebhookCall>, poller: OwnershipPoller, cluster: Cluster) => {
  const byShard = deliveriesByShard(calls, NAMESPACE, NUM_SHARDS)
  const violations = deliveriesOutsideTenure(byShard, poller.tenures)
  const succession = successionCheck(byShard, poller.tenures)
  const summary = {
    pollerStats: poller.stats(),
    heartbeats: poller.heartbeats(),
    instanceEvents: poller.instanceEvents.filter((e) => e.kind !== "registered").map((e) => `${e.at} ${e.id} ${e.kind} pid ${e.pid}`),
    deliveriesDuringAnotherOwnersTenure: violations.length,
    shardsWithHandoffs: succession.shardsWithHandoffs,
    handoffsSeenInDeliveries: succession.handoffs,
    returnsABA: succession.returns,
    returnsExplainedByReclaim: succession.explainedReturns,
    unexplainedSuccessions: succession.unexplained.length,
    // Signs of trouble in the processes' logs, per process ("<id>-<n>").
    logs: {
      shardOwnershipLost: cluster.countInLogs(/shard ownership lost/),
      registrationLapsed: cluster.countInLogs(/registration lapsed/),
      heartbeatFailed: cluster.countInLogs(/heartbeat failed/),
      roundFailed: cluster.countInLogs(/shard round failed/),
      errors: cluster.countInLogs(/"logLevel":"(ERROR|FATAL)"/)
    }
  }
  const assert = () => {
    expect(
      violations.slice(0, 10).map((v) =>
        `${v.delivery.key}: ${v.delivery.timerId} delivered by ${v.delivery.instance} at ${v.delivery.at} while ${v.heldBy} held v${v.version} from ${v.heldFrom} to ${v.heldUntil}`
      ),
      `deliveries by an instance while another held the shard (${violations.length})`
    ).toEqual([])
    expect(
      succession.unexplained.slice(0, 5).map((u) =>
        `${u.key}: deliveries ${u.runs.map((r) => `${r.instance}×${r.count}@${r.firstAt}-${r.lastAt}`).join(" → ")}; owners ${u.owners.join(" → ")}`
      ),
      "successions of delivering instances the store's owners do not explain"
    ).toEqual([])
  }
  return { byShard, summary, violations, assert }
}

/** Per shard, the first delivery by an instance other than `gone` arriving after `since` (and passing `filter`). */
export const firstDeliveryElsewhere = (
  byShard: ReturnType<typeof deliveriesByShard>,
  shards: ReadonlyArray<string>,
  gone: string,
  since: number,
  filter: (d: { executeAtMs: number }) => boolean = () => true
) => {
  const firsts: Array<number> = []
  let withoutDelivery = 0
  for (const key of shards) {
    const first = (byShard.get(key) ?? []).find((d) => d.instance !== gone && d.at >= since && filter(d))
    if (first === undefined) withoutDelivery++
    else firsts.push(first.at - since)
  }
  return { ...percentiles(firsts), shardsWithoutDelivery: withoutDelivery }
}

/** Per shard, when (ms after `since`) the store first showed it held by an instance other than `gone`. */
export const claimedElsewhere = (poller: OwnershipPoller, shards: ReadonlyArray<string>, gone: string, since: number) => {
  const times: Array<number> = []
  let never = 0
  for (const key of shards) {
    const tenure = (poller.tenures.get(key) ?? []).find((t) => t.owner !== null && t.owner !== gone && t.firstReturnedAt >= since)
    if (tenure === undefined) never++
    else times.push(tenure.firstReturnedAt - since)
  }
  return { ...percentiles(times), never }
}

/** The shard keys of NAMESPACE held by `owner` in the poller's last rows. */
export const shardsHeldBy = (poller: OwnershipPoller, owner: string) =>
  Array.from(poller.current()).filter(([key, row]) => row.owner === owner && key.startsWith(`${NAMESPACE}/`)).map(([key]) => key)

/** Webhook calls arriving per second of [from, from + seconds). */
export const perSecond = (calls: ReadonlyArray<{ at: number }>, from: number, seconds: number) => {
  const buckets = Array.from({ length: seconds }, () => 0)
  for (const c of calls) {
    const i = Math.floor((c.at - from) / 1000)
    if (i >= 0 && i < seconds) buckets[i]!++
  }
  return buckets
}

/** One test's resources, released after it whatever happens. */
