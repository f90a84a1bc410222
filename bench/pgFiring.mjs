// Benchmark of firing on PostgreSQL with one and with three instances (run by
// scripts/bench.sh after the build, or alone: `node bench/pgFiring.mjs`).
// For each instance count: a fresh schema on TIMER_TEST_PG_URL (default the local
// server, database "test"), the instances started on it, a namespace of 64 shards
// spread over them, BENCH_PG_FIRE timers (default 8000) created through all of them
// and due at one instant; then fires per second (distinct timers over the span from
// the due instant to the last first call) at a local webhook receiver.
// BENCH_PG_INSTANCES (default "1,3") picks the counts; BENCH_PG_OPTIONS adds server settings
// to the instances' connections (-c ...), BENCH_PG_KEEP_SCHEMA keeps each schema for a look
// afterwards, BENCH_NODE_ARGS adds node flags to the instances. Prints a table; writes
// .bench/pg-firing.json. Every wait is bounded.
import { mkdirSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import os from "node:os"
import { join } from "node:path"
import { cleanup, percentiles, repoRoot, runPool, sleep, startReceiver, startServer } from "./lib.mjs"

const PG_URL = process.env.TIMER_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const N = Number(process.env.BENCH_PG_FIRE ?? 8000)
const COUNTS = (process.env.BENCH_PG_INSTANCES ?? "1,3").split(",").map(Number)
const SHARDS = 64
const LIMIT_MS = 120_000
const pg = createRequire(join(repoRoot, "packages/adapters/package.json"))("pg")

const query = async (url, text) => {
  const client = new pg.Client({ connectionString: url, application_name: "timers bench" })
  await client.connect()
  try {
    return (await client.query(text)).rows
  } finally {
    await client.end()
  }
}

/** Waits until every shard has a live owner and the counts differ by at most one. */
const waitSpread = async (url, ids) => {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const rows = await query(url, "SELECT owner_id, count(*)::int AS n FROM shards GROUP BY owner_id")
    const counts = ids.map((id) => rows.find((r) => r.owner_id === id)?.n ?? 0)
    const orphans = rows.filter((r) => !ids.includes(r.owner_id)).reduce((n, r) => n + r.n, 0)
    if (orphans === 0 && counts.every((n) => n > 0) && Math.max(...counts) - Math.min(...counts) <= 1) return
    await sleep(100)
  }
  throw new Error(`shards not spread over ${ids.join(", ")} within 30 s`)
}

const createTimers = (servers, count, prefix, dueMs, callbackUrl) =>
  runPool(count, 16 * servers.length, async (i) => {
    const response = await servers[i % servers.length].post("/api/v1/timers/create", {
      namespace: "bench",
      id: `${prefix}-${i}`,
      executeAt: new Date(dueMs).toISOString(),
      callbackUrl,
      payload: { i }
    })
    if (response.status !== 200) throw new Error(`create: HTTP ${response.status} ${response.text.slice(0, 200)}`)
  }, Date.now() + LIMIT_MS)

const run = async (instances) => {
  const schema = `bench_${Math.random().toString(16).slice(2, 10)}`
  await query(PG_URL, `CREATE SCHEMA ${schema}`)
  const url = new URL(PG_URL)
  url.searchParams.set("options", `-c search_path=${schema} ${process.env.BENCH_PG_OPTIONS ?? ""}`.trim())
  const receiver = await startReceiver()
  const servers = []
  try {
    const ids = Array.from({ length: instances }, (_, i) => `b${i + 1}`)
    for (const id of ids) servers.push(await startServer({ TIMER_DB_URL: url.toString(), TIMER_INSTANCE_ID: id }))
    const created = await servers[0].post("/api/v1/namespaces/create", { name: "bench", numShards: SHARDS })
    if (created.status !== 200) throw new Error(`namespace: HTTP ${created.status} ${created.text}`)
    await waitSpread(url.toString(), ids)
    // The create rate, measured on timers due in a day, sets how far ahead the fired ones are due.
    const warmStart = Date.now()
    const warm = await createTimers(servers, 600, "warm", Date.now() + 86_400_000, receiver.url)
    if (warm.failed > 0) throw warm.firstError
    const createsPerSecond = 600 / Math.max(1, Date.now() - warmStart) * 1000
    const dueAt = Date.now() + Math.round((1.5 * N) / createsPerSecond * 1000) + 2_000
    const made = await createTimers(servers, N, "t", dueAt, receiver.url)
    if (made.failed > 0) throw made.firstError
    const createdAt = Date.now()
    if (createdAt > dueAt) console.warn(`... creation ended ${createdAt - dueAt} ms after the due instant`)
    const first = new Map()
    const deadline = Math.max(Date.now(), dueAt) + LIMIT_MS
    while (Date.now() < deadline) {
      for (const call of receiver.calls) if (!first.has(call.timerId)) first.set(call.timerId, call.at)
      if (first.size >= N) break
      await sleep(20)
    }
    await sleep(500)
    const arrivals = Array.from(first.values()).sort((a, b) => a - b)
    const lastMs = arrivals.length > 0 ? arrivals[arrivals.length - 1] - dueAt : 0
    return {
      instances,
      timers: N,
      shards: SHARDS,
      createsPerSecond: Math.round(createsPerSecond),
      fired: first.size,
      calls: receiver.calls.length,
      repeats: receiver.calls.length - first.size,
      allFiredAfterMs: lastMs,
      firedPerSecond: lastMs > 0 ? Math.round((first.size / lastMs) * 1000) : null,
      lagMs: percentiles(arrivals.map((at) => at - dueAt))
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    await receiver.close()
    if (process.env.BENCH_PG_KEEP_SCHEMA === undefined) await query(PG_URL, `DROP SCHEMA ${schema} CASCADE`).catch(() => undefined)
    else console.log(`kept schema ${schema}`)
  }
}

const results = []
try {
  for (const instances of COUNTS) {
    console.log(`... PostgreSQL: ${instances} instance(s), ${N} timers due at one instant over ${SHARDS} shards`)
    results.push(await run(instances))
  }
} finally {
  cleanup()
}
console.table(results.map((r) => ({
  instances: r.instances,
  timers: r.timers,
  fired: r.fired,
  repeats: r.repeats,
  "fired/s": r.firedPerSecond,
  "all fired ms": r.allFiredAfterMs,
  "lag p50 ms": r.lagMs.p50,
  "creates/s": r.createsPerSecond
})))
const dir = join(repoRoot, ".bench")
mkdirSync(dir, { recursive: true })
const path = join(dir, "pg-firing.json")
const machine = { cpus: os.cpus().length, node: process.version, loadavg: os.loadavg() }
writeFileSync(path, JSON.stringify({ machine, pgUrl: PG_URL.replace(/\/\/[^@]*@/, "//"), results }, null, 2) + "\n")
console.log(`written to ${path}`)
if (results.some((r) => r.fired < r.timers)) {
  console.error("bench: some timers did not fire; see the JSON")
  process.exitCode = 1
}
