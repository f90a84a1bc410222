/**
 * End to end on PostgreSQL, three instances:
 * 1. Lag across instances: timers created through one instance for shards
 *    another owns, 200 ms ahead (wake-ups by LISTEN/NOTIFY); target p99 < 50 ms.
 * 2. The TTL path: an instance registered under another host name
 *    (TIMER_INSTANCE_HOST) is SIGKILLed; its shards move only once its
 *    registration lapses (on one host a dead pid is recognised at once).
 * Writes its figures to .bench/e2e-multi-lag-ttl.json.
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
  SHARD_CONCURRENCY,
  shardsHeldBy,
  warmUp
} from "./support/multiScenario.js"
import { shardOf, waitBalanced } from "./support/ownership.js"
import { plan } from "./support/plannedTimers.js"
import { sleep } from "./support/server.js"
import { formatPercentiles, percentiles } from "./support/util.js"

const { setUp, report } = useMultiSetting("e2e-multi-lag-ttl.json")

describe("many instances on PostgreSQL", () => {
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
