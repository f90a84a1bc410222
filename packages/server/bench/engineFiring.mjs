// Benchmark of the firing engine alone (no HTTP API): BENCH_ENGINE_TIMERS timers
// (default 2000) already due in a SQLite store, fired to a local webhook receiver
// on 127.0.0.1. Runs with the default concurrency settings and a few others, with
// synchronous FULL and NORMAL. Prints a table; writes .bench/engine.json.
// Run after the build (scripts/bench.sh does both). Each run is bounded to 120 s.
import { NodeHttpClient } from "@effect/platform-node"
import { layerSqliteStore, layerWebhookDelivery } from "@timer/adapters"
import { Engine, EngineConfig, Namespace, shardIdOf, TimerStore, TimerWakeups } from "@timer/core"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import http from "node:http"
import os from "node:os"
import { join } from "node:path"

const N = Number(process.env.BENCH_ENGINE_TIMERS ?? 2000)
const SHARDS = 16
const LIMIT_MS = 120_000

let received = 0
const receiver = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    received++
    res.end()
  })
})
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve))
const url = `http://127.0.0.1:${receiver.address().port}/hook`

const timer = (i) => ({
  namespace: "default",
  id: `t${i}`,
  shardId: shardIdOf(`t${i}`, SHARDS),
  executeAt: 0,
  nextFireAt: 0,
  callbackUrl: url,
  payload: { i },
  callbackTimeoutSeconds: 10,
  state: "SCHEDULED",
  attempts: 0,
  firingId: `f${i}`,
  createdAt: 0,
  updatedAt: 0
})

const run = async ({ synchronous, shardConcurrency, deliveryConcurrency }) => {
  const dir = mkdtempSync(join(os.tmpdir(), "engine-bench-"))
  const store = layerSqliteStore({ filename: join(dir, "timers.db"), synchronous })
  await Effect.runPromise(Effect.gen(function*() {
    const timers = yield* TimerStore
    yield* timers.createNamespace(new Namespace({ name: "default", numShards: SHARDS, createdAt: 0 }))
    for (let i = 0; i < N; i++) yield* timers.upsertTimer(timer(i))
  }).pipe(Effect.provide(store)))
  received = 0
  const engine = Engine.layer.pipe(
    Layer.provide(layerWebhookDelivery.pipe(Layer.provide(NodeHttpClient.layerUndici))),
    Layer.provide(TimerWakeups.layer),
    Layer.provide(EngineConfig.layer({ shardConcurrency, deliveryConcurrency, defaultNamespaceShards: SHARDS })),
    Layer.provide(store)
  )
  const start = performance.now()
  await Effect.runPromise(Effect.gen(function*() {
    yield* Engine
    while (received < N && performance.now() - start < LIMIT_MS) yield* Effect.sleep(10)
  }).pipe(Effect.provide(engine), Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)))
  const ms = performance.now() - start
  rmSync(dir, { recursive: true, force: true })
  return { synchronous, shardConcurrency, deliveryConcurrency, timers: N, fired: received, ms: Math.round(ms), firedPerSecond: Math.round((received / ms) * 1000) }
}

const results = []
for (const config of [
  { synchronous: "FULL", shardConcurrency: 32, deliveryConcurrency: 256 },
  { synchronous: "NORMAL", shardConcurrency: 32, deliveryConcurrency: 256 },
  { synchronous: "FULL", shardConcurrency: 8, deliveryConcurrency: 64 }
]) {
  console.log(`... engine: ${N} due timers, synchronous=${config.synchronous}, shard/delivery concurrency ${config.shardConcurrency}/${config.deliveryConcurrency}`)
  results.push(await run(config))
}
receiver.close()
console.log("Firing engine alone (SQLite store, local webhook receiver; no HTTP API)")
console.table(results)
const out = join(process.cwd(), ".bench")
mkdirSync(out, { recursive: true })
writeFileSync(join(out, "engine.json"), JSON.stringify({ date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, results }, null, 2))
console.log(`written to ${join(out, "engine.json")}`)
