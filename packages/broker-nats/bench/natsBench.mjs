// Benchmark of the NATS adapter (run by scripts/bench.sh after the build, or alone:
// `node packages/broker-nats/bench/natsBench.mjs`), against the built server on SQLite and the NATS server
// of TIMER_TEST_NATS_URL (default nats://127.0.0.1:4222), with streams of its own:
// 1. commands ingested per second: BENCH_NATS_COMMANDS ScheduleTimer commands (default
//    10000, due in a day) published first, then the server started; the time until its
//    consumer has acknowledged them all (each after its batch's transaction committed);
// 2. DueTimeReached published per second: as many commands due at one instant; the span
//    from the due instant until the events stream holds them all.
// Prints a table; writes .bench/nats.json. Every wait is bounded.
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { mkdirSync, writeFileSync } from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { cleanup, repoRoot, sleep, startServer } from "../../../bench/lib.mjs"

const URL = process.env.TIMER_TEST_NATS_URL ?? "nats://127.0.0.1:4222"
const N = Number(process.env.BENCH_NATS_COMMANDS ?? 10000)
const LIMIT_MS = 120_000

const tag = `BENCH_${Math.random().toString(16).slice(2, 8)}`.toUpperCase()
const names = {
  TIMER_NATS_URL: URL,
  TIMER_NATS_COMMANDS_STREAM: `${tag}_COMMANDS`,
  TIMER_NATS_COMMANDS_SUBJECT: `${tag.toLowerCase()}.commands`,
  TIMER_NATS_DLQ_STREAM: `${tag}_DLQ`,
  TIMER_NATS_DLQ_SUBJECT: `${tag.toLowerCase()}.dlq`,
  TIMER_NATS_EVENTS_STREAM: `${tag}_EVENTS`,
  TIMER_NATS_EVENTS_SUBJECT: `${tag.toLowerCase()}.events`
}

const nc = await connect({ servers: URL })
const jsm = await jetstreamManager(nc)
const js = jetstream(nc)
const encoder = new TextEncoder()

const command = (prefix, i, dueAt) => encoder.encode(JSON.stringify({
  id: `${prefix}-cmd-${i}`,
  type: "ScheduleTimer",
  tenantId: "bench",
  correlationId: `${prefix}-${i}`,
  timestampMs: Date.now(),
  payload: { _tag: "ScheduleTimer", tenantId: "bench", serviceCallId: `${prefix}-${i}`, dueAt: new Date(dueAt).toISOString() }
}))

const publish = async (prefix, dueAt) => {
  for (let i = 0; i < N; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, N - i) }, (_, k) => js.publish(names.TIMER_NATS_COMMANDS_SUBJECT, command(prefix, i + k, dueAt))))
  }
}

const waitUntil = async (check, what) => {
  const deadline = Date.now() + LIMIT_MS
  while (Date.now() < deadline) {
    if (await check()) return
    await sleep(20)
  }
  throw new Error(`bench: ${what} not reached within ${LIMIT_MS / 1000} s`)
}

let server
const results = {}
try {
  // The commands wait in the stream before the server starts, so that ingestion runs flat out.
  await jsm.streams.add({ name: names.TIMER_NATS_COMMANDS_STREAM, subjects: [names.TIMER_NATS_COMMANDS_SUBJECT] })
  await publish("later", Date.now() + 86_400_000)
  console.log(`... ${N} ScheduleTimer commands in ${names.TIMER_NATS_COMMANDS_STREAM}; starting the server`)
  server = await startServer(names)
  const ingestStart = Date.now()
  await waitUntil(async () => {
    const info = await jsm.consumers.info(names.TIMER_NATS_COMMANDS_STREAM, "timer-service").catch(() => undefined)
    return info !== undefined && info.ack_floor.stream_seq >= N
  }, "all commands acknowledged")
  const ingestMs = Date.now() - ingestStart
  results.ingest = { commands: N, ms: ingestMs, commandsPerSecond: Math.round((N / ingestMs) * 1000) }

  const dueAt = Date.now() + Math.max(5_000, Math.round((N / results.ingest.commandsPerSecond) * 1500))
  await publish("now", dueAt)
  await waitUntil(async () => (await jsm.streams.info(names.TIMER_NATS_EVENTS_STREAM)).state.messages >= N, "all DueTimeReached published")
  const firedMs = Date.now() - dueAt
  results.publish = { events: N, msFromDueInstant: firedMs, eventsPerSecond: Math.round((N / firedMs) * 1000) }
} finally {
  await server?.stop()
  for (const stream of [names.TIMER_NATS_COMMANDS_STREAM, names.TIMER_NATS_DLQ_STREAM, names.TIMER_NATS_EVENTS_STREAM]) {
    await jsm.streams.delete(stream).catch(() => undefined)
  }
  await nc.drain()
  cleanup()
}

console.table([
  { what: "commands ingested (ScheduleTimer → SQLite, acked)", count: N, "per second": results.ingest.commandsPerSecond, ms: results.ingest.ms },
  { what: "DueTimeReached published (JetStream acked)", count: N, "per second": results.publish.eventsPerSecond, ms: results.publish.msFromDueInstant }
])
const dir = join(repoRoot, ".bench")
mkdirSync(dir, { recursive: true })
const path = join(dir, "nats.json")
writeFileSync(path, JSON.stringify({ machine: { cpus: os.cpus().length, node: process.version }, natsUrl: URL, results }, null, 2) + "\n")
console.log(`written to ${path}`)
