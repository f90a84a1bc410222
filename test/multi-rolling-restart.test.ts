/**
 * End to end on PostgreSQL: a rolling restart — each of three instances in
 * turn stopped with SIGTERM and started again under the same id while timers
 * fire. Nothing lost, nothing repeated, no shard fired by two owners at once,
 * and the time until a stopped instance's shards fire elsewhere (target under
 * 1 s). Writes its figures to .bench/e2e-multi-rolling.json.
 */
import { describe, expect, it } from "vitest"
import { load, startBalanced, useMultiSetting } from "./support/multiSetting.js"
import {
  ALL_SHARDS,
  checkCalls,
  checkOwnership,
  claimedElsewhere,
  createAll,
  expectAllFiredInStore,
  firstCallLags,
  firstDeliveryElsewhere,
  NAMESPACE,
  NUM_SHARDS,
  shardsHeldBy,
  STALL_MS,
  warmUp
} from "./support/multiScenario.js"
import { shardOf, waitBalanced } from "./support/ownership.js"
import { plan } from "./support/plannedTimers.js"
import { sleep } from "./support/server.js"
import { formatPercentiles } from "./support/util.js"

const { setUp, report } = useMultiSetting("e2e-multi-rolling.json")

describe("many instances on PostgreSQL", () => {
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
})
