/**
 * End to end with many instances on one PostgreSQL schema (a fresh one per
 * test, dropped at its end), against the built server processes:
 *
 * 1. Three instances, 20,000 timers due over 20 s created through all three;
 *    one instance SIGKILLed halfway through the window and a fresh one (new
 *    id) started: every timer fires with its payload, repeats come only from
 *    the killed instance's firings in flight, and no shard is fired by two
 *    owners at once (checked against the shards table, polled throughout).
 *    Three instances fire about 1400 timers a second on a 2-core machine
 *    (bench/pgFiring.mjs); the lag is reported, not bounded.
 *    E2E_MULTI_TIMERS / E2E_MULTI_WINDOW_MS change the load.
 * 2. Rolling restart: each of three instances in turn stopped with SIGTERM
 *    and started again under the same id while timers fire: nothing lost,
 *    nothing repeated, and the time until a stopped instance's shards fire
 *    elsewhere.
 * 3. Lag across instances: timers created through one instance for shards
 *    another owns, 200 ms ahead (wake-ups by LISTEN/NOTIFY).
 * 4. The TTL path: an instance registered under another host name
 *    (TIMER_INSTANCE_HOST) is SIGKILLed; its shards move only once its
 *    registration lapses (on one host a dead pid is recognised at once).
 *
 * All processes run on one machine, so in tests 1 and 2 a killed instance is
 * recognised at once by its missing pid (the fast path), not by its TTL.
 * Writes its figures to .bench/e2e-multi.json. A failed test keeps every
 * process's whole log in a temporary directory and prints its path, with the
 * registrations, lapses and deregistrations the poller saw.
 */
import { cpus, loadavg } from "node:os"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { type Cluster, makeCluster } from "./support/cluster.js"
import {
  countByOwner,
  type OwnershipPoller,
  shardOf,
  startOwnershipPoller,
  waitBalanced
} from "./support/ownership.js"
import { createSchema, type TestSchema } from "./support/postgres.js"
import { type Receiver, startReceiver } from "./support/receiver.js"
import { killAllServers, sleep } from "./support/server.js"
import { formatPercentiles, percentiles, writeReport } from "./support/util.js"

import {
  ALL_SHARDS,
  checkCalls,
  checkOwnership,
  claimedElsewhere,
  createAll,
  DEFAULT_SHARDS,
  DELIVERY_CONCURRENCY,
  expectAllFiredInStore,
  firstCallLags,
  firstDeliveryElsewhere,
  NAMESPACE,
  NUM_SHARDS,
  perSecond,
  plan,
  type Planned,
  SHARD_CONCURRENCY,
  shardsHeldBy,
  STALL_MS,
  warmUp
} from "./support/multiScenario.js"
interface Setting {
  readonly schema: TestSchema
  readonly poller: OwnershipPoller
  readonly receiver: Receiver
  readonly cluster: Cluster
}

let current: Array<() => Promise<void>> = []
let keepLogs: Array<() => void> = []
const report: Record<string, unknown> = {
  generatedAt: new Date().toISOString(),
  // Other work on the machine skews every figure here: the 1-minute load average before each test is recorded with it.
  machine: { cpus: cpus().length, node: process.version }
}
/** The 1-, 5- and 15-minute load averages, rounded. */
const load = () => loadavg().map((l) => Math.round(l * 100) / 100)

const setUp = async (
  ctx: { onTestFailed: (f: () => void) => void },
  env: Record<string, string> = {}
): Promise<Setting> => {
  const schema = await createSchema()
  current.push(() => schema.drop())
  const poller = await startOwnershipPoller(schema.url)
  current.unshift(() => poller.stop())
  const receiver = await startReceiver()
  current.unshift(() => receiver.close())
  const cluster = makeCluster(schema.url, { TIMER_LOG_LEVEL: "info", ...env })
  current.unshift(() => cluster.close())
  keepLogs.push(() => cluster.keepLogs())
  ctx.onTestFailed(() => {
    console.error(`--- schema ${schema.schema}; shards now: ${JSON.stringify(Object.fromEntries(countByOwner(poller.current())))} ---`)
    console.error(`--- instance events: ${JSON.stringify(poller.instanceEvents)}`)
    console.error(`--- heartbeats: ${JSON.stringify(poller.heartbeats())}`)
    console.error(cluster.logs(60))
    console.error(`--- whole logs kept in ${cluster.logDir} ---`)
  })
  return { schema, poller, receiver, cluster }
}

/** Starts `ids`, creates NAMESPACE through the first and waits until the shards are spread over all of them. */
const startBalanced = async (setting: Setting, ids: ReadonlyArray<string>) => {
  const startedAt = Date.now()
  const handles = await setting.cluster.startAll(ids)
  const created = await handles[0]!.post("/api/v1/namespaces/create", { name: NAMESPACE, numShards: NUM_SHARDS })
  expect(created.status, created.text).toBe(200)
  const balancedMs = await waitBalanced(setting.poller, ids, ALL_SHARDS, 20_000)
  expect(
    balancedMs,
    `shards not spread over ${ids.join(", ")} within 20 s: ${JSON.stringify(Object.fromEntries(countByOwner(setting.poller.current())))}`
  ).toBeDefined()
  return { handles, startToBalancedMs: Date.now() - startedAt }
}

afterEach(async (ctx) => {
  // A failed test keeps its processes' whole logs (the path is printed).
  if (ctx.task.result?.state === "fail") for (const keep of keepLogs) keep()
  keepLogs = []
  const steps = current
  current = []
  for (const step of steps) {
    try {
      await step()
    } catch (error) {
      console.error(`cleanup step failed: ${String(error)}`)
    }
  }
  await killAllServers()
})

afterAll(async () => {
  await killAllServers()
  if (Object.keys(report).length > 2) {
    const path = writeReport("e2e-multi.json", report)
    console.log(`e2e report written to ${path}`)
  }
})

describe("many instances on PostgreSQL", () => {
  it("fires every timer across a SIGKILL of one of three instances and a fresh one joining, never by two owners at once", async (ctx) => {
    // 20,000 timers due over 20 s, as the issue asks (E2E_MULTI_TIMERS and E2E_MULTI_WINDOW_MS change
    // the load). Should a slow machine predict more than MAX_CREATE_MS of creation, the count is
    // scaled down to fit (and reported as such).
    const TARGET_N = Number(process.env.E2E_MULTI_TIMERS ?? 20_000)
    const MAX_CREATE_MS = 90_000
    const WINDOW_MS = Number(process.env.E2E_MULTI_WINDOW_MS ?? 20_000)
    const KILLED = "i2"
    const loadAtStart = load()
    const setting = await setUp(ctx)
    const { poller, receiver, cluster } = setting
    const ids = ["i1", "i2", "i3"]
    const { handles, startToBalancedMs } = await startBalanced(setting, ids)

    const warmupRate = await warmUp(handles, receiver.url, 800)
    const N = Math.min(TARGET_N, Math.floor((warmupRate * MAX_CREATE_MS) / 1000 / 1.2))
    const scaledDown = N < TARGET_N
    if (scaledDown) console.warn(`[e2e multi] creates run at ${Math.round(warmupRate)}/s here: ${N} timers instead of ${TARGET_N}`)
    const leadMs = Math.round((1.2 * N) / warmupRate * 1000) + 2_000

    const creationStart = Date.now()
    const windowStart = creationStart + leadMs
    const windowEnd = windowStart + WINDOW_MS
    const timers = plan(N, "mi", windowStart, WINDOW_MS)
    const creationMs = await createAll(handles, timers, receiver.url, creationStart + leadMs + WINDOW_MS / 2)
    const createdLate = timers.filter((t) => t.createdAt > t.executeAtMs).length

    // Kill one instance in the middle of the window, then start a fresh one.
    await sleep(Math.max(0, windowStart + WINDOW_MS / 2 - Date.now()))
    await poller.nextPoll()
    const killedShards = shardsHeldBy(poller, KILLED)
    const killedShardsAll = Array.from(poller.current()).filter(([, row]) => row.owner === KILLED).length
    const firedBeforeKill = receiver.distinctTimers()
    const killAt = Date.now()
    const exit = await cluster.get(KILLED).stop("SIGKILL", 10_000)
    expect(exit.signal).toBe("SIGKILL")
    const killToExitMs = Date.now() - killAt
    const fresh = await cluster.start("i4")
    const live = ["i1", "i3", "i4"]
    const rebalancedMs = await waitBalanced(poller, live, ALL_SHARDS, 20_000)
    const rebalancedAt = Date.now()

    const allFired = await receiver.waitUntil(() => receiver.distinctTimers() >= N, Math.max(0, windowEnd - Date.now()) + 45_000, 20)
    const doneAt = Date.now()
    expect.soft(allFired, `only ${receiver.distinctTimers()} of ${N} timers fired within 45 s of the window's end`).toBe(true)
    await sleep(1_000) // stray repeats
    const calls = receiver.calls.filter((c) => c.body?.namespace === NAMESPACE)

    const checked = checkCalls(calls, timers)
    const byTimer = checked.byTimer
    const owned = checkOwnership(calls, poller, cluster)
    const { byShard, summary: ownership } = owned

    // Repeats: only of firings the killed instance had in flight when it died.
    let duplicateTimers = 0
    let extraCalls = 0
    const badRepeats: Array<string> = []
    const badRepeatTimers = new Set<string>()
    for (const [id, list] of byTimer) {
      if (list.length === 1) continue
      duplicateTimers++
      extraCalls += list.length - 1
      const [first, ...rest] = list
      const describeCalls = list.map((c) => `${c.instance}@${c.at - killAt >= 0 ? "+" : ""}${c.at - killAt}ms`).join(", ")
      if (first!.instance !== KILLED || first!.at > killAt + killToExitMs || rest.some((again) => again.instance === KILLED || again.at < killAt)) {
        badRepeats.push(`${id}: ${describeCalls} (relative to the kill)`)
        badRepeatTimers.add(id)
      }
    }

    const planned = new Map(timers.map((t) => [t.id, t]))
    const killedSet = new Set(killedShards)
    const inKilledShard = (t: Planned) => killedSet.has(`${NAMESPACE}/${shardOf(t.id, NUM_SHARDS)}`)
    const firsts = timers.flatMap((t) => byTimer.get(t.id)?.slice(0, 1) ?? [])
    const lastFirstAt = Math.max(...firsts.map((c) => c.at))
    const inWindow = firsts.filter((c) => c.at >= windowStart && c.at < windowEnd).length
    const lag = firstCallLags(byTimer, timers)
    const lagBeforeKill = firstCallLags(byTimer, timers, (t) => t.executeAtMs < killAt)
    const lagAfterKillOthers = firstCallLags(byTimer, timers, (t) => t.executeAtMs >= killAt && !inKilledShard(t))
    const lagAfterKillKilledShards = firstCallLags(byTimer, timers, (t) => t.executeAtMs >= killAt && inKilledShard(t))
    const lagKilledShardsAroundKill = firstCallLags(byTimer, timers, (t) => inKilledShard(t) && t.executeAtMs >= killAt - 1_000 && t.executeAtMs < killAt + 3_000)
    const firedByInstance: Record<string, number> = {}
    for (const c of firsts) firedByInstance[c.instance ?? "?"] = (firedByInstance[c.instance ?? "?"] ?? 0) + 1

    const summary = {
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: load(),
      timers: N,
      targetTimers: TARGET_N,
      scaledDown,
      namespace: { name: NAMESPACE, numShards: NUM_SHARDS, plusDefaultShards: DEFAULT_SHARDS },
      windowMs: WINDOW_MS,
      startToBalancedMs,
      warmupCreatesPerSecond: Math.round(warmupRate),
      creationMs,
      createsPerSecond: Math.round((N / creationMs) * 1000),
      createdAfterExecuteAt: createdLate,
      windowOpensAfterCreationStartMs: leadMs,
      firesPerSecondInWindow: Math.round(inWindow / (WINDOW_MS / 1000)),
      firedWithinWindow: inWindow,
      lastFirstFiringAfterWindowEndMs: lastFirstAt - windowEnd,
      firesPerSecondByWindowSecond: perSecond(firsts, windowStart, Math.ceil(WINDOW_MS / 1000) + 2),
      firedByInstance,
      kill: {
        instance: KILLED,
        afterWindowStartMs: killAt - windowStart,
        firedBeforeKill,
        killToExitMs,
        shardsHeldInNamespace: killedShards.length,
        shardsHeldAll: killedShardsAll,
        // The brief's measure: first delivery elsewhere, on a killed shard, of a timer due after the kill.
        killToKilledShardsFiringAgainMs: firstDeliveryElsewhere(byShard, killedShards, KILLED, killAt, (d) => d.executeAtMs > killAt).min,
        perShardFirstFiringElsewhereMs: firstDeliveryElsewhere(byShard, killedShards, KILLED, killAt),
        perShardFirstFiringOfTimerDueAfterKillMs: firstDeliveryElsewhere(byShard, killedShards, KILLED, killAt, (d) => d.executeAtMs > killAt),
        perShardClaimedElsewhereMs: claimedElsewhere(poller, killedShards, KILLED, killAt),
        freshInstanceSpawnToReadyMs: fresh.readyAt - fresh.spawnedAt,
        freshReadyToBalancedMs: rebalancedMs ?? null,
        killToBalancedOverTheNewThreeMs: rebalancedMs === undefined ? null : rebalancedAt - killAt
      },
      allFiredAfterKillMs: doneAt - killAt,
      calls: calls.length,
      duplicates: {
        timers: duplicateTimers,
        extraCalls,
        bound: SHARD_CONCURRENCY * killedShardsAll,
        deliveryConcurrency: DELIVERY_CONCURRENCY,
        fromTheKill: duplicateTimers - badRepeatTimers.size,
        notFromTheKill: badRepeatTimers.size,
        notFromTheKillSample: badRepeats.slice(0, 5)
      },
      lagMs: lag,
      lagBeforeKillMs: lagBeforeKill,
      lagAfterKillOtherShardsMs: lagAfterKillOthers,
      lagAfterKillKilledShardsMs: lagAfterKillKilledShards,
      lagKilledShardsDueFrom1sBeforeTo3sAfterKillMs: lagKilledShardsAroundKill,
      badCalls: checked.problems,
      neverFired: checked.missing,
      ownership,
      secondOwnerDeliveriesSample: owned.violations.slice(0, 5)
    }
    report.sigkillOfOneOfThree = summary
    console.log(
      `[e2e multi] ${N} timers (${summary.createsPerSecond} creates/s, ${createdLate} created late); fired ${summary.firesPerSecondInWindow}/s in the window; ` +
        `by instance ${JSON.stringify(firedByInstance)}\n` +
        `[e2e multi] lag ${formatPercentiles(lag)}\n` +
        `[e2e multi] lag before kill ${formatPercentiles(lagBeforeKill)}; after kill, other shards ${formatPercentiles(lagAfterKillOthers)}; killed shards ${formatPercentiles(lagAfterKillKilledShards)}\n` +
        `[e2e multi] kill of ${KILLED} (${killedShards.length} shards of ${NAMESPACE}): fired again elsewhere after ${summary.kill.killToKilledShardsFiringAgainMs} ms; ` +
        `claimed ${JSON.stringify(summary.kill.perShardClaimedElsewhereMs)}; duplicates ${duplicateTimers} timers / ${extraCalls} extra calls\n` +
        `[e2e multi] ownership ${JSON.stringify(ownership)}`
    )

    checked.assert()
    await expectAllFiredInStore(fresh, timers)
    owned.assert()
    expect(badRepeats.slice(0, 20), "repeats not explained by the kill").toEqual([])
    expect(duplicateTimers).toBeLessThanOrEqual(SHARD_CONCURRENCY * killedShardsAll)
    expect(lag.min, "a timer fired before its executeAt").toBeGreaterThanOrEqual(-1)
    // The lag is reported, not bounded (this machine's other work shows in it); the bounded wait above
    // catches a stall. The issue's bound on failover is: a killed instance's shards fire again within 10 s.
    expect(summary.kill.killToKilledShardsFiringAgainMs ?? Number.POSITIVE_INFINITY, "the killed instance's shards did not fire again within 10 s").toBeLessThan(10_000)
    expect(rebalancedMs, "the shards were not spread over the three live instances within 20 s").toBeDefined()
    expect(summary.kill.perShardClaimedElsewhereMs.never, "killed shards never claimed by another instance").toBe(0)
    expect(planned.size).toBe(N)
  }, 240_000)

  it("loses and repeats nothing through a rolling restart with SIGTERM, handing shards over within about a second", async (ctx) => {
    // 200 timers a second: well under what three instances fire on a 2-core machine, so that the
    // handoffs, not an overload, are what is tested.
    const N = 3_000
    const WINDOW_MS = 15_000
    const loadAtStart = load()
    const setting = await setUp(ctx)
    const { poller, receiver, cluster } = setting
    const ids = ["i1", "i2", "i3"]
    const { handles } = await startBalanced(setting, ids)
    const warmupRate = await warmUp(handles, receiver.url, 300)
    const leadMs = Math.round((1.2 * N) / warmupRate * 1000) + 1_500
    const creationStart = Date.now()
    const windowStart = creationStart + leadMs
    const windowEnd = windowStart + WINDOW_MS
    const timers = plan(N, "roll", windowStart, WINDOW_MS)
    const creationMs = await createAll(handles, timers, receiver.url, windowStart + 2_000)

    await sleep(Math.max(0, windowStart + 1_000 - Date.now()))
    const restarts: Array<{
      id: string
      shards: Array<string>
      termAt: number
      termToExitMs: number
      spawnToReadyMs: number
      termToBalancedMs: number | null
    }> = []
    for (const id of ids) {
      await poller.nextPoll()
      const shards = shardsHeldBy(poller, id)
      const termAt = Date.now()
      const exit = await cluster.get(id).stop("SIGTERM", 15_000)
      const termToExitMs = Date.now() - termAt
      expect(exit, `exit of ${id} after SIGTERM`).toEqual({ code: 0, signal: null })
      expect(cluster.get(id).logTail(400)).toMatch(/released shards/)
      const again = await cluster.start(id)
      // Spread again before the next restart (bounded, so that every restart falls in the window).
      const balancedMs = await waitBalanced(poller, ids, ALL_SHARDS, 6_000)
      restarts.push({
        id,
        shards,
        termAt,
        termToExitMs,
        spawnToReadyMs: again.readyAt - again.spawnedAt,
        termToBalancedMs: balancedMs === undefined ? null : Date.now() - termAt
      })
      expect.soft(balancedMs, `shards not spread again within 6 s of restarting ${id}`).toBeDefined()
    }
    const restartsDoneAfterWindowStartMs = Date.now() - windowStart

    const allFired = await receiver.waitUntil(() => receiver.distinctTimers() >= N, Math.max(0, windowEnd - Date.now()) + 30_000, 20)
    expect.soft(allFired, `only ${receiver.distinctTimers()} of ${N} timers fired within 30 s of the window's end`).toBe(true)
    await sleep(1_000)
    const calls = receiver.calls.filter((c) => c.body?.namespace === NAMESPACE)
    const checked = checkCalls(calls, timers)
    const byTimer = checked.byTimer
    const owned = checkOwnership(calls, poller, cluster)
    const { byShard, summary: ownership } = owned
    const repeated = Array.from(byTimer).filter(([, list]) => list.length > 1)

    const handoffs = restarts.map((r) => {
      const inShards = new Set(r.shards)
      return {
        instance: r.id,
        termAfterWindowStartMs: r.termAt - windowStart,
        shardsHeld: r.shards.length,
        termToExitMs: r.termToExitMs,
        spawnToReadyMs: r.spawnToReadyMs,
        termToBalancedAgainMs: r.termToBalancedMs,
        // The first of its shards to fire elsewhere, then every one of them (shards with timers due then).
        termToFirstShardFiringElsewhereMs: firstDeliveryElsewhere(byShard, r.shards, r.id, r.termAt).min,
        perShardFiringElsewhereMs: firstDeliveryElsewhere(byShard, r.shards, r.id, r.termAt),
        perShardClaimedElsewhereMs: claimedElsewhere(poller, r.shards, r.id, r.termAt),
        lagOfItsShardsDueInTheNextTwoSecondsMs: firstCallLags(byTimer, timers, (t) =>
          inShards.has(`${NAMESPACE}/${shardOf(t.id, NUM_SHARDS)}`) && t.executeAtMs >= r.termAt && t.executeAtMs < r.termAt + 2_000)
      }
    })
    const lag = firstCallLags(byTimer, timers)
    const summary = {
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: load(),
      timers: N,
      windowMs: WINDOW_MS,
      creationMs,
      createsPerSecond: Math.round((N / creationMs) * 1000),
      createdAfterExecuteAt: timers.filter((t) => t.createdAt > t.executeAtMs).length,
      restartsDoneAfterWindowStartMs,
      handoffs,
      calls: calls.length,
      repeatedTimers: repeated.length,
      repeatedSample: repeated.slice(0, 5).map(([id, list]) => `${id}: ${list.map((c) => `${c.instance}@${c.at}`).join(", ")}`),
      lagMs: lag,
      badCalls: checked.problems,
      neverFired: checked.missing,
      ownership,
      secondOwnerDeliveriesSample: owned.violations.slice(0, 5)
    }
    report.rollingRestart = summary
    console.log(
      `[e2e rolling] ${N} timers, ${calls.length} calls, ${repeated.length} repeated; lag ${formatPercentiles(lag)}\n` +
        handoffs.map((h) =>
          `[e2e rolling] ${h.instance}: exit in ${h.termToExitMs} ms, its ${h.shardsHeld} shards fire elsewhere from ${h.termToFirstShardFiringElsewhereMs} ms ` +
          `(per shard p50 ${h.perShardFiringElsewhereMs.p50}, max ${h.perShardFiringElsewhereMs.max}; claimed p50 ${h.perShardClaimedElsewhereMs.p50}, max ${h.perShardClaimedElsewhereMs.max}); ` +
          `its lag then ${formatPercentiles(h.lagOfItsShardsDueInTheNextTwoSecondsMs)}`
        ).join("\n") +
        `\n[e2e rolling] ownership ${JSON.stringify(ownership)}`
    )

    checked.assert()
    await expectAllFiredInStore(cluster.get("i1"), timers)
    owned.assert()
    expect(repeated.slice(0, 10).map(([id, list]) => `${id}: ${list.map((c) => `${c.instance}@${c.at}`).join(", ")}`), "timers fired twice").toEqual([])
    expect(lag.min).toBeGreaterThanOrEqual(-1)
    expect(lag.max, "largest lag").toBeLessThan(STALL_MS)
    for (const h of handoffs) {
      expect(h.perShardClaimedElsewhereMs.never, `${h.instance}'s shards never claimed elsewhere`).toBe(0)
      // Target under 1 s; a loose bound here for a loaded CI machine. Measured only while timers were still due.
      if (h.termAfterWindowStartMs < WINDOW_MS - 2_000) {
        expect(h.termToFirstShardFiringElsewhereMs, `${h.instance}'s shards firing elsewhere after SIGTERM`).toBeLessThan(2_500)
      }
    }
    expect(handoffs[0]!.termAfterWindowStartMs, "the first restart came after the window").toBeLessThan(WINDOW_MS - 2_000)
  }, 180_000)

  it("fires timers created through one instance for shards another owns within tens of milliseconds", async (ctx) => {
    const WARMUP = 5
    const REMOTE = 100
    const LOCAL = 30
    const AHEAD_MS = 200
    const SPACING_MS = 40
    const loadAtStart = load()
    const setting = await setUp(ctx)
    const { poller, receiver } = setting
    const ids = ["i1", "i2", "i3"]
    const { handles } = await startBalanced(setting, ids)
    const through = handles[0]!
    await poller.nextPoll()
    const owners = poller.current()
    const ownerOf = (id: string) => owners.get(`${NAMESPACE}/${shardOf(id, NUM_SHARDS)}`)?.owner ?? null

    // Ids by owner: remote ones for i2 and i3, local ones for i1, interleaved.
    const remote: Array<string> = []
    const local: Array<string> = []
    for (let k = 0; remote.length < WARMUP + REMOTE || local.length < LOCAL; k++) {
      const id = `xl-${k}`
      const owner = ownerOf(id)
      if (owner === "i1") {
        if (local.length < LOCAL) local.push(id)
      } else if (owner !== null && remote.length < WARMUP + REMOTE) remote.push(id)
    }
    const sequence: Array<{ id: string; kind: "warmup" | "remote" | "local" }> = [
      ...remote.slice(0, WARMUP).map((id) => ({ id, kind: "warmup" as const }))
    ]
    for (let i = 0, j = 0; i < REMOTE; i++) {
      sequence.push({ id: remote[WARMUP + i]!, kind: "remote" })
      if (i % 3 === 2 && j < LOCAL) sequence.push({ id: local[j++]!, kind: "local" })
    }

    const planned: Array<{ id: string; kind: string; owner: string | null; executeAtMs: number; createMs: number }> = []
    for (const { id, kind } of sequence) {
      const slot = Date.now()
      const executeAtMs = slot + AHEAD_MS
      const response = await through.post("/api/v1/timers/create", {
        namespace: NAMESPACE,
        id,
        executeAt: new Date(executeAtMs).toISOString(),
        callbackUrl: receiver.url,
        payload: { id }
      })
      expect(response.status, response.text).toBe(200)
      planned.push({ id, kind, owner: ownerOf(id), executeAtMs, createMs: Date.now() - slot })
      await sleep(Math.max(0, slot + SPACING_MS - Date.now()))
    }
    const all = await receiver.waitUntil(() => receiver.distinctTimers() >= planned.length, 10_000, 2)
    expect(all, `only ${receiver.distinctTimers()} of ${planned.length} fired within 10 s`).toBe(true)
    await sleep(300)
    const byTimer = receiver.byTimer()
    const wrongInstance = planned.filter((p) => byTimer.get(p.id)![0]!.instance !== p.owner)
    const lagsOf = (kind: string) => planned.filter((p) => p.kind === kind).map((p) => byTimer.get(p.id)![0]!.at - p.executeAtMs)
    const remoteLag = percentiles(lagsOf("remote"))
    const localLag = percentiles(lagsOf("local"))
    const create = percentiles(planned.filter((p) => p.kind !== "warmup").map((p) => p.createMs))
    const ownershipMoved = Array.from(poller.current()).filter(([key, row]) => owners.get(key)?.version !== row.version).length
    const summary = {
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: load(),
      through: "i1",
      aheadMs: AHEAD_MS,
      spacingMs: SPACING_MS,
      remoteTimers: REMOTE,
      localTimers: LOCAL,
      remoteLagMs: remoteLag,
      localLagMs: localLag,
      firstColdRemoteLagMs: lagsOf("warmup")[0],
      createLatencyMs: create,
      firedByAnotherInstanceThanTheOwner: wrongInstance.length,
      shardsThatChangedOwnerMeanwhile: ownershipMoved,
      repeated: Array.from(byTimer.values()).filter((l) => l.length > 1).length
    }
    report.lagAcrossInstances = summary
    console.log(
      `[e2e multi lag] created through i1 ${AHEAD_MS} ms ahead: shards of i2/i3 ${formatPercentiles(remoteLag)}; ` +
        `shards of i1 ${formatPercentiles(localLag)}; create p50=${create.p50} p99=${create.p99} ms`
    )
    expect(planned.filter((p) => p.kind !== "warmup" && p.createMs >= AHEAD_MS).length, "creates slower than the 200 ms lead").toBe(0)
    expect(ownershipMoved, "ownership moved during the test").toBe(0)
    expect(wrongInstance.map((p) => `${p.id}: owner ${p.owner}, fired by ${byTimer.get(p.id)![0]!.instance}`)).toEqual([])
    expect(remoteLag.min, "a timer fired before its executeAt").toBeGreaterThanOrEqual(-1)
    // Target p99 < 50 ms; a loose bound for a loaded CI machine.
    expect(remoteLag.p99, "p99 lag of timers created through another instance").toBeLessThan(150)
    expect(summary.repeated).toBe(0)
  }, 120_000)

  // On one host a dead instance is recognised by its pid at once; one registered under another host
  // name (TIMER_INSTANCE_HOST) is not, so the others must wait for its registration to lapse.
  it("moves a SIGKILLed instance's shards once its registration lapses (TTL), when it is on another host", async (ctx) => {
    const N = 3_000
    const WINDOW_MS = 12_000
    const TTL_MS = 5_000
    const REMOTE = "r1"
    const loadAtStart = load()
    const setting = await setUp(ctx, { TIMER_INSTANCE_TTL: `${TTL_MS}ms` })
    const { poller, receiver, cluster } = setting
    const ids = ["i1", "i2", REMOTE]
    await cluster.startAll(["i1", "i2"])
    await cluster.start(REMOTE, { env: { TIMER_INSTANCE_HOST: "e2e-other-host" } })
    const handles = ids.map((id) => cluster.get(id))
    const created = await handles[0]!.post("/api/v1/namespaces/create", { name: NAMESPACE, numShards: NUM_SHARDS })
    expect(created.status, created.text).toBe(200)
    expect(await waitBalanced(poller, ids, ALL_SHARDS, 20_000), "shards not spread over three instances").toBeDefined()

    const warmupRate = await warmUp(handles, receiver.url, 300)
    const leadMs = Math.round((1.2 * N) / warmupRate * 1000) + 1_500
    const windowStart = Date.now() + leadMs
    const windowEnd = windowStart + WINDOW_MS
    const timers = plan(N, "ttl", windowStart, WINDOW_MS)
    await createAll(handles, timers, receiver.url, windowStart + 2_000)

    await sleep(Math.max(0, windowStart + 3_000 - Date.now()))
    await poller.nextPoll()
    const shards = shardsHeldBy(poller, REMOTE)
    const shardsAll = Array.from(poller.current()).filter(([, row]) => row.owner === REMOTE).length
    const killAt = Date.now()
    const exit = await cluster.get(REMOTE).stop("SIGKILL", 10_000)
    expect(exit.signal).toBe("SIGKILL")

    const allFired = await receiver.waitUntil(() => receiver.distinctTimers() >= N, Math.max(0, windowEnd - Date.now()) + 30_000, 20)
    expect.soft(allFired, `only ${receiver.distinctTimers()} of ${N} timers fired`).toBe(true)
    await sleep(1_000)
    const calls = receiver.calls.filter((c) => c.body?.namespace === NAMESPACE)
    const checked = checkCalls(calls, timers)
    const byTimer = checked.byTimer
    const owned = checkOwnership(calls, poller, cluster)
    const { byShard, summary: ownership } = owned
    const repeated = Array.from(byTimer.values()).filter((l) => l.length > 1)
    // A repeat must be of a firing the killed instance made before its death, repeated by another after it.
    const badRepeats = repeated
      .filter(([first, ...rest]) => first!.instance !== REMOTE || first!.at > killAt + 1_000 || rest.some((c) => c.instance === REMOTE || c.at < killAt))
      .map((list) => `${list[0]!.body?.timerId}: ${list.map((c) => `${c.instance}@${c.at - killAt}ms`).join(", ")}`)
    const claimed = claimedElsewhere(poller, shards, REMOTE, killAt)
    const firing = firstDeliveryElsewhere(byShard, shards, REMOTE, killAt, (d) => d.executeAtMs > killAt)
    const inShards = new Set(shards)
    const summary = {
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: load(),
      timers: N,
      ttlMs: TTL_MS,
      shardsHeldInNamespace: shards.length,
      killAfterWindowStartMs: killAt - windowStart,
      perShardClaimedElsewhereMs: claimed,
      killToShardsFiringAgainMs: firing.min,
      perShardFirstFiringOfTimerDueAfterKillMs: firing,
      lagOfItsShardsDueInTheTtlMs: firstCallLags(byTimer, timers, (t) =>
        inShards.has(`${NAMESPACE}/${shardOf(t.id, NUM_SHARDS)}`) && t.executeAtMs >= killAt && t.executeAtMs < killAt + TTL_MS),
      duplicates: {
        timers: repeated.length,
        extraCalls: repeated.reduce((n, l) => n + l.length - 1, 0),
        bound: SHARD_CONCURRENCY * shardsAll,
        notFromTheKill: badRepeats.length,
        notFromTheKillSample: badRepeats.slice(0, 5)
      },
      badCalls: checked.problems,
      neverFired: checked.missing,
      ownership,
      secondOwnerDeliveriesSample: owned.violations.slice(0, 5)
    }
    report.ttlTakeover = summary
    console.log(
      `[e2e ttl] ${REMOTE} killed with ${shards.length} shards of ${NAMESPACE}: claimed elsewhere after ${formatPercentiles(claimed)}; ` +
        `fired again after ${firing.min} ms; duplicates ${summary.duplicates.timers}`
    )
    checked.assert()
    await expectAllFiredInStore(cluster.get("i1"), timers)
    owned.assert()
    expect(badRepeats.slice(0, 20), "repeats not explained by the kill").toEqual([])
    // Not before the registration lapses: the last heartbeat was at most one round before the kill.
    expect(claimed.never).toBe(0)
    expect(claimed.min, "shards moved before the TTL lapsed").toBeGreaterThanOrEqual(TTL_MS - 1_000)
    expect(claimed.max, "shards moved long after the TTL lapsed").toBeLessThan(TTL_MS + 3_000)
    expect(repeated.length).toBeLessThanOrEqual(SHARD_CONCURRENCY * shardsAll)
  }, 150_000)
})
