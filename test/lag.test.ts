/**
 * Firing precision on an idle server: timers created 200 ms before their
 * executeAt reach the webhook within tens of milliseconds of it.
 * Writes its figures to .bench/e2e-lag.json.
 */
import { afterAll, describe, expect, it } from "vitest"
import { type Receiver, startReceiver } from "./support/receiver.js"
import { killAllServers, makeTempDir, removeDir, type ServerHandle, sleep, startServer } from "./support/server.js"
import { formatPercentiles, percentiles, writeReport } from "./support/util.js"

let server: ServerHandle | undefined
let receiver: Receiver | undefined
const dir = makeTempDir()

afterAll(async () => {
  await killAllServers()
  await receiver?.close()
  removeDir(dir)
})

describe("firing lag", () => {
  it("fires a timer created 200 ms ahead within tens of milliseconds of its executeAt", async (ctx) => {
    const WARMUP = 5
    const N = 50
    const AHEAD_MS = 200
    const SPACING_MS = 40
    ctx.onTestFailed(() => console.error(`--- server log ---\n${server?.logTail(40)}`))
    receiver = await startReceiver()
    server = await startServer({ dir })

    const planned: Array<{ id: string; executeAtMs: number; createMs: number }> = []
    for (let i = 0; i < WARMUP + N; i++) {
      const slot = Date.now()
      const executeAtMs = slot + AHEAD_MS
      const id = `${i < WARMUP ? "warmup" : "lag"}-${i}`
      const response = await server.post("/api/v1/timers/create", {
        namespace: "default",
        id,
        executeAt: new Date(executeAtMs).toISOString(),
        callbackUrl: receiver.url,
        payload: { i }
      })
      expect(response.status, response.text).toBe(200)
      planned.push({ id, executeAtMs, createMs: Date.now() - slot })
      await sleep(Math.max(0, slot + SPACING_MS - Date.now()))
    }
    const all = await receiver.waitUntil(() => receiver!.distinctTimers() >= WARMUP + N, 10_000, 2)
    expect(all, `only ${receiver.distinctTimers()} of ${WARMUP + N} fired within 10 s`).toBe(true)

    const byTimer = receiver.byTimer()
    const lags = planned.map((p) => byTimer.get(p.id)![0]!.at - p.executeAtMs)
    const measured = lags.slice(WARMUP)
    const lag = percentiles(measured)
    const create = percentiles(planned.slice(WARMUP).map((p) => p.createMs))
    const lateCreates = planned.filter((p) => p.createMs >= AHEAD_MS).length
    writeReport("e2e-lag.json", {
      generatedAt: new Date().toISOString(),
      timers: N,
      warmup: WARMUP,
      aheadMs: AHEAD_MS,
      spacingMs: SPACING_MS,
      firstColdTimerLagMs: lags[0],
      lagMs: lag,
      createLatencyMs: create
    })
    console.log(
      `[e2e lag] ${N} timers created ${AHEAD_MS} ms ahead: lag ${formatPercentiles(lag)}; ` +
        `create latency p50=${create.p50} p99=${create.p99} ms; first (cold) timer lag ${lags[0]} ms`
    )

    expect(lateCreates, "creates that took longer than the 200 ms lead").toBe(0)
    expect(lag.min, "a timer fired before its executeAt").toBeGreaterThanOrEqual(-1)
    expect(lag.p99, "p99 lag").toBeLessThan(150)
  })
})
