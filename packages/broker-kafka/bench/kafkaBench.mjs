// Benchmark of the Kafka adapter (run by scripts/bench.sh after the build, or alone:
// `node packages/broker-kafka/bench/kafkaBench.mjs`), against the built server on SQLite
// and librdkafka's mock cluster (real Kafka protocol on loopback; the launcher is built
// by the e2e tests into node_modules/.cache/timer-e2e, or here with `cc` when missing):
// 1. commands ingested per second: BENCH_KAFKA_COMMANDS ScheduleTimer commands (default
//    10000, due in a day) produced first, then the server started; the time until the
//    group's committed offsets cover them all (each batch committed after its transaction);
// 2. DueTimeReached produced per second: as many commands due at one instant; the span
//    from the due instant until the events topic holds them all.
// Prints a table; writes .bench/kafka.json. Every wait is bounded.
import { execFileSync, spawn } from "node:child_process"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Kafka, logLevel, Partitioners } from "kafkajs"
import { cleanup, repoRoot, sleep, startServer } from "../../../bench/lib.mjs"

const N = Number(process.env.BENCH_KAFKA_COMMANDS ?? 10000)
const LIMIT_MS = 120_000
const launcher = join(repoRoot, "node_modules/.cache/timer-e2e/mock_cluster")
if (!existsSync(launcher)) {
  mkdirSync(join(launcher, ".."), { recursive: true })
  execFileSync("cc", ["-O1", "-o", launcher, join(repoRoot, "test/support/kafka/mock_cluster.c"), "-lrdkafka"], { stdio: "inherit" })
}
const mock = spawn(launcher, ["1", "timer.commands:4", "timer.events:4", "timer.commands.dlq:1"], { stdio: ["pipe", "pipe", "ignore"] })
const bootstrap = await new Promise((resolve) => createInterface({ input: mock.stdout }).once("line", (line) => resolve(line.trim())))

const kafka = new Kafka({ clientId: "bench", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING })
const admin = kafka.admin()
await admin.connect()
const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
await producer.connect()

const command = (prefix, i, dueAt) => ({
  key: `bench.${prefix}-${i}`,
  value: JSON.stringify({
    id: `${prefix}-cmd-${i}`,
    type: "ScheduleTimer",
    tenantId: "bench",
    timestampMs: Date.now(),
    payload: { _tag: "ScheduleTimer", tenantId: "bench", serviceCallId: `${prefix}-${i}`, dueAt: new Date(dueAt).toISOString() }
  })
})
const produce = async (prefix, dueAt) => {
  for (let i = 0; i < N; i += 1000) {
    await producer.send({ topic: "timer.commands", messages: Array.from({ length: Math.min(1000, N - i) }, (_, k) => command(prefix, i + k, dueAt)) })
  }
}
const sumOffsets = (partitions) => partitions.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0)
const waitUntil = async (check, what) => {
  const deadline = Date.now() + LIMIT_MS
  while (Date.now() < deadline) {
    if (await check()) return
    await sleep(50)
  }
  throw new Error(`bench: ${what} not reached within ${LIMIT_MS / 1000} s`)
}

let server
const results = {}
try {
  await produce("later", Date.now() + 86_400_000)
  console.log(`... ${N} ScheduleTimer commands in timer.commands (mock cluster ${bootstrap}); starting the server`)
  server = await startServer({ TIMER_KAFKA_BROKERS: bootstrap, TIMER_KAFKA_IDEMPOTENT: "false" })
  const ingestStart = Date.now()
  const committed = async () => {
    const [topic] = await admin.fetchOffsets({ groupId: "timer-service", topics: ["timer.commands"] })
    return topic === undefined ? 0 : sumOffsets(topic.partitions)
  }
  await waitUntil(async () => (await committed()) >= N, "all commands committed")
  const ingestMs = Date.now() - ingestStart
  results.ingest = { commands: N, ms: ingestMs, commandsPerSecond: Math.round((N / ingestMs) * 1000) }

  const dueAt = Date.now() + Math.max(5_000, Math.round((N / results.ingest.commandsPerSecond) * 1500))
  await produce("now", dueAt)
  await waitUntil(async () => sumOffsets(await admin.fetchTopicOffsets("timer.events")) >= N, "all DueTimeReached produced")
  const firedMs = Date.now() - dueAt
  results.publish = { events: N, msFromDueInstant: firedMs, eventsPerSecond: Math.round((N / firedMs) * 1000) }
} finally {
  await server?.stop()
  await producer.disconnect().catch(() => undefined)
  await admin.disconnect().catch(() => undefined)
  mock.kill("SIGKILL")
  cleanup()
}

console.table([
  { what: "commands ingested (ScheduleTimer → SQLite, offsets committed)", count: N, "per second": results.ingest.commandsPerSecond, ms: results.ingest.ms },
  { what: "DueTimeReached produced (acks from all replicas)", count: N, "per second": results.publish.eventsPerSecond, ms: results.publish.msFromDueInstant }
])
const dir = join(repoRoot, ".bench")
mkdirSync(dir, { recursive: true })
const path = join(dir, "kafka.json")
writeFileSync(path, JSON.stringify({ machine: { cpus: os.cpus().length, node: process.version }, cluster: "librdkafka mock cluster, 1 broker", results }, null, 2) + "\n")
console.log(`written to ${path}`)
process.exit(0)
