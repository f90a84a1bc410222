// Benchmark of the built server over its HTTP API (run by scripts/bench.sh after the build):
// 1. creates per second: BENCH_CREATES timers (default 5000) at concurrency 16 and 64,
//    keep-alive (fetch's default), each run on a fresh server and database;
// 2. firing: BENCH_FIRE timers (default 2000) all due at one instant; throughput and lag
//    (webhook arrival − executeAt) at the receiver.
// Both with the default TIMER_SQLITE_SYNCHRONOUS=FULL, and once more with NORMAL.
// Prints a table and writes .bench/bench.json. Every loop is bounded by count and time.
import { execFileSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { cleanup, percentiles, repoRoot, runPool, sleep, startReceiver, startServer } from "./lib.mjs"

const intEnv = (name, fallback) => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`)
  return value
}
const CREATES = intEnv("BENCH_CREATES", 5000)
const FIRE = intEnv("BENCH_FIRE", 2000)
/** Longest any one phase may run, in seconds. */
const PHASE_LIMIT_MS = intEnv("BENCH_PHASE_LIMIT_S", 120) * 1000
const FAR_FUTURE = Date.now() + 24 * 3_600_000

const createBody = (id, executeAtMs, callbackUrl, i) => ({
  namespace: "default",
  id,
  executeAt: new Date(executeAtMs).toISOString(),
  callbackUrl,
  payload: { i, note: "bench" }
})

/** Creates `count` timers at `concurrency`; returns the rate and the latencies. */
async function createPhase(server, { count, concurrency, prefix, executeAt, callbackUrl }) {
  const latencies = []
  let non200 = 0
  let lastError
  const start = performance.now()
  const result = await runPool(
    count,
    concurrency,
    async (i) => {
      const t = performance.now()
      const response = await server.post("/api/v1/timers/create", createBody(`${prefix}-${i}`, executeAt(i), callbackUrl, i))
      latencies.push(performance.now() - t)
      if (response.status !== 200) {
        non200++
        lastError = `HTTP ${response.status} ${response.text.slice(0, 200)}`
      }
    },
    Date.now() + PHASE_LIMIT_MS
  )
  const elapsedMs = performance.now() - start
  return {
    requested: count,
    done: result.done,
    failed: result.failed + non200,
    ...(result.firstError || lastError ? { firstError: String(result.firstError ?? lastError) } : {}),
    elapsedMs: Math.round(elapsedMs),
    perSecond: Math.round((result.done / elapsedMs) * 1000),
    latencyMs: percentiles(latencies)
  }
}

async function benchCreates(sync, concurrency, receiverUrl) {
  const server = await startServer({ TIMER_SQLITE_SYNCHRONOUS: sync })
  try {
    // A short warm-up (JIT, connections), not counted.
    await createPhase(server, { count: 200, concurrency, prefix: "warm", executeAt: () => FAR_FUTURE, callbackUrl: receiverUrl })
    const run = await createPhase(server, {
      count: CREATES,
      concurrency,
      prefix: "c",
      executeAt: (i) => FAR_FUTURE + i,
      callbackUrl: receiverUrl
    })
    return { scenario: "create", sync, concurrency, ...run }
  } finally {
    await server.stop()
  }
}

async function benchFiring(sync) {
  const receiver = await startReceiver()
  const server = await startServer({ TIMER_SQLITE_SYNCHRONOUS: sync })
  try {
    // The due instant comes after every create, from the rate of a warm-up batch.
    const warm = await createPhase(server, {
      count: 200,
      concurrency: 32,
      prefix: "warm",
      executeAt: () => FAR_FUTURE,
      callbackUrl: receiver.url
    })
    const leadMs = Math.min(PHASE_LIMIT_MS, Math.round((1.5 * FIRE * 1000) / Math.max(1, warm.perSecond)) + 1_000)
    const dueAt = Date.now() + leadMs
    const created = await createPhase(server, {
      count: FIRE,
      concurrency: 32,
      prefix: "f",
      executeAt: () => dueAt,
      callbackUrl: receiver.url
    })
    const createdLate = Date.now() > dueAt
    const distinct = new Set()
    const deadline = Math.max(dueAt, Date.now()) + PHASE_LIMIT_MS
    let seen = 0
    while (distinct.size < created.done && Date.now() < deadline) {
      for (; seen < receiver.calls.length; seen++) distinct.add(receiver.calls[seen].timerId)
      await sleep(5)
    }
    await sleep(200)
    const calls = receiver.calls.filter((c) => c.timerId?.startsWith("f-"))
    const first = new Map()
    for (const c of calls) if (!first.has(c.timerId)) first.set(c.timerId, c.at)
    const arrivals = [...first.values()].sort((a, b) => a - b)
    const lags = arrivals.map((at) => at - dueAt)
    const spanMs = arrivals.length > 1 ? arrivals[arrivals.length - 1] - arrivals[0] : 0
    return {
      scenario: "fire",
      sync,
      timers: created.done,
      fired: first.size,
      duplicates: calls.length - first.size,
      createdAfterDue: createdLate,
      createPerSecond: created.perSecond,
      firstArrivalMs: lags[0] ?? null,
      allFiredAfterMs: lags[lags.length - 1] ?? null,
      // Steady firing rate between the first and last arrival, and overall from the due instant.
      firedPerSecond: spanMs > 0 ? Math.round(((arrivals.length - 1) / spanMs) * 1000) : null,
      firedPerSecondFromDue: lags.length > 0 ? Math.round((arrivals.length / Math.max(1, lags[lags.length - 1])) * 1000) : null,
      lagMs: percentiles(lags)
    }
  } finally {
    await server.stop()
    await receiver.close()
  }
}

const gitCommit = () => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: repoRoot, encoding: "utf8" }).trim()
  } catch {
    return null
  }
}

const main = async () => {
  const machine = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    commit: gitCommit()
  }
  console.log(`bench: ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}, ${machine.date}`)
  const sink = await startReceiver() // creates' callback; nothing fires during the create runs
  const results = []
  try {
    for (const [sync, concurrency] of [["FULL", 16], ["FULL", 64], ["NORMAL", 64]]) {
      console.log(`... ${CREATES} creates, synchronous=${sync}, concurrency ${concurrency}`)
      results.push(await benchCreates(sync, concurrency, sink.url))
    }
    for (const sync of ["FULL", "NORMAL"]) {
      console.log(`... ${FIRE} timers due at one instant, synchronous=${sync}`)
      results.push(await benchFiring(sync))
    }
  } finally {
    await sink.close()
  }

  const createRows = results.filter((r) => r.scenario === "create").map((r) => ({
    sync: r.sync,
    concurrency: r.concurrency,
    done: r.done,
    failed: r.failed,
    "creates/s": r.perSecond,
    "p50 ms": r.latencyMs.p50,
    "p99 ms": r.latencyMs.p99,
    "max ms": r.latencyMs.max
  }))
  const fireRows = results.filter((r) => r.scenario === "fire").map((r) => ({
    sync: r.sync,
    timers: r.timers,
    fired: r.fired,
    dups: r.duplicates,
    "fired/s": r.firedPerSecond,
    "first ms": r.firstArrivalMs,
    "lag p50": r.lagMs.p50,
    "lag p99": r.lagMs.p99,
    "all fired ms": r.allFiredAfterMs
  }))
  console.log("\nHTTP creates (POST /api/v1/timers/create, keep-alive)")
  console.table(createRows)
  console.log("Firing: timers due at one instant (lag = webhook arrival − executeAt)")
  console.table(fireRows)

  const dir = join(repoRoot, ".bench")
  mkdirSync(dir, { recursive: true })
  const path = join(dir, "bench.json")
  writeFileSync(path, JSON.stringify({ machine, settings: { creates: CREATES, fire: FIRE }, results }, null, 2) + "\n")
  console.log(`written to ${path}`)
  const failed = results.some((r) => (r.scenario === "create" ? r.done < r.requested || r.failed > 0 : r.fired < r.timers))
  if (failed) {
    console.error("bench: some requests failed or timers did not fire; see the JSON")
    process.exitCode = 1
  }
}

main()
  .catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
  .finally(cleanup)
