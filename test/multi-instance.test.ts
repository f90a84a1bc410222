/**
 * End to end with three instances on one PostgreSQL schema (a fresh one per
 * test, dropped at its end), against the built server processes: 20,000
 * timers due over 20 s created through all three; one instance SIGKILLed
 * halfway through the window and a fresh one (new id) started. Every timer
 * fires with its payload, repeats come only from the killed instance's
 * firings in flight, no shard is fired by two owners at once (checked against
 * the shards table, polled throughout), and the killed instance's shards fire
 * again within 10 s. The lag is reported, not bounded.
 * E2E_MULTI_TIMERS / E2E_MULTI_WINDOW_MS change the load.
 *
 * All processes run on one machine, so a killed instance is recognised at
 * once by its missing pid (the fast path), not by its TTL (see
 * multi-lag-and-ttl.test.ts). Writes its figures to .bench/e2e-multi.json. A
 * failed test keeps every process's whole log in a temporary directory and
 * prints its path, with the registrations, lapses and deregistrations the
 * poller saw.
 */
import { describe, expect, it } from "vitest"
import { load, startBalanced, useMultiSetting } from "./support/multiSetting.js"
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
  SHARD_CONCURRENCY,
  shardsHeldBy,
  warmUp
} from "./support/multiScenario.js"
import { shardOf, waitBalanced } from "./support/ownership.js"
import { plan, type Planned } from "./support/plannedTimers.js"
import { sleep } from "./support/server.js"
import { formatPercentiles } from "./support/util.js"

const { setUp, report } = useMultiSetting("e2e-multi.json")

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
    // catches a stall. The bound on failover is: a killed instance's shards fire again within 10 s.
    expect(summary.kill.killToKilledShardsFiringAgainMs ?? Number.POSITIVE_INFINITY, "the killed instance's shards did not fire again within 10 s").toBeLessThan(10_000)
    expect(rebalancedMs, "the shards were not spread over the three live instances within 20 s").toBeDefined()
    expect(summary.kill.perShardClaimedElsewhereMs.never, "killed shards never claimed by another instance").toBe(0)
    expect(planned.size).toBe(N)
  }, 240_000)
})
