/**
 * End to end over Kafka, against the built server and librdkafka's mock
 * cluster (real Kafka protocol on loopback; one cluster per test):
 * - round trip: ScheduleTimer in, DueTimeReached out keyed by
 *   `${tenantId}.${serviceCallId}`, every field checked by the strict schema;
 * - the contract's rules, and dead letters of each kind;
 * - two instances on PostgreSQL in one consumer group: every timer fires;
 * - SIGKILL while commands are being taken in: after a restart none is lost.
 * Writes its figures to .bench/e2e-kafka.json.
 */
import { DueTimeReached } from "@timer/core"
import { Schema } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { kafkaClient, kafkaEnv, type MockKafka, startMockKafka, type TopicMessage } from "./support/kafka.js"
import { createSchema } from "./support/postgres.js"
import { makeTempDir, removeDir, sleep, startServer } from "./support/server.js"
import { useTestHooks } from "./support/testHooks.js"

const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(DueTimeReached), { onExcessProperty: "error" })
const TOPICS = ["timer.commands:4", "timer.events:4", "timer.commands.dlq:1"]

const { defer, report } = useTestHooks("e2e-kafka.json")

const setUp = async () => {
  const cluster: MockKafka = await startMockKafka(1, TOPICS)
  defer(() => cluster.stop())
  const client = kafkaClient(cluster.bootstrap)
  defer(() => client.close())
  const dir = makeTempDir()
  defer(async () => removeDir(dir))
  return { cluster, client, dir, env: kafkaEnv(cluster.bootstrap) }
}

let seq = 0
const schedule = (serviceCallId: string, dueAt: number) => ({
  key: `t1.${serviceCallId}`,
  value: {
    id: `cmd-${++seq}`,
    type: "ScheduleTimer",
    tenantId: "t1",
    correlationId: `corr-${serviceCallId}`,
    timestampMs: Date.now(),
    payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId, dueAt: new Date(dueAt).toISOString() }
  }
})
const cancel = (serviceCallId: string) => ({
  key: `t1.${serviceCallId}`,
  value: { id: `cmd-${++seq}`, type: "CancelTimer", tenantId: "t1", timestampMs: Date.now(), payload: { _tag: "CancelTimer", tenantId: "t1", serviceCallId } }
})

const byCall = (messages: ReadonlyArray<TopicMessage>) => {
  const calls = new Map<string, number>()
  for (const m of messages) {
    const event = decodeEvent(m.text)
    calls.set(event.aggregateId, (calls.get(event.aggregateId) ?? 0) + 1)
  }
  return calls
}

describe("Kafka", () => {
  it("ScheduleTimer in, DueTimeReached out keyed by tenant and service call, every field of the contract", async () => {
    const { client, dir, env } = await setUp()
    await startServer({ dir, env })
    const command = schedule("sc-1", Date.now() + 500)
    await client.produce("timer.commands", [command])
    const [message] = await client.read("timer.events", 1, 20_000)
    expect(message, "no DueTimeReached within 20 s").toBeDefined()
    const event = decodeEvent(message!.text)
    expect(event).toMatchObject({
      type: "DueTimeReached",
      tenantId: "t1",
      aggregateId: "sc-1",
      correlationId: "corr-sc-1",
      causationId: command.value.id,
      payload: { _tag: "DueTimeReached", tenantId: "t1", serviceCallId: "sc-1" }
    })
    expect(message!.key).toBe("t1.sc-1")
    expect(message!.headers["x-timer-firing-id"]).toMatch(/\S/)
  }, 60_000)

  it("follows the contract's rules and dead-letters bad messages of each kind, going on after them", async () => {
    const { client, dir, env } = await setUp()
    await startServer({ dir, env })
    const now = Date.now()
    const repeated = schedule("sc-repeat", now + 1_000)
    await client.produce("timer.commands", [
      repeated,
      repeated,
      { key: "bad", value: "{not json" },
      { key: "bad", value: { ...schedule("x", now).value, type: "Explode" } },
      { key: "bad", value: schedule("", now).value },
      schedule("sc-move", now + 30_000),
      schedule("sc-move", now + 1_000),
      schedule("sc-cancel", now + 1_500),
      cancel("sc-cancel"),
      schedule("sc-past", now - 60_000)
    ])
    const dead = await client.read("timer.commands.dlq", 3, 20_000)
    expect(dead.map((m) => m.headers["timer-dlq-reason"]).sort()).toEqual(["InvalidCommand", "InvalidJson", "UnknownType"])
    expect(dead.map((m) => m.text)).toContain("{not json")
    await sleep(3_000)
    const events = byCall(await client.read("timer.events", 3, 20_000))
    expect([...events.entries()].sort()).toEqual([["sc-move", 1], ["sc-past", 1], ["sc-repeat", 1]])
  }, 90_000)

  it("two instances on PostgreSQL in one consumer group take the commands and fire every timer", async () => {
    const N = 400
    const { client, env } = await setUp()
    const schema = await createSchema("kafka")
    defer(() => schema.drop())
    const common = { ...env, TIMER_DB_URL: schema.url }
    const dirs = [makeTempDir(), makeTempDir()]
    defer(async () => dirs.forEach(removeDir))
    const logs = dirs.map((dir) => join(dir, "server.log"))
    await Promise.all(dirs.map((dir, i) => startServer({ dir, env: { ...common, TIMER_INSTANCE_ID: `k${i + 1}` }, logFile: logs[i]! })))
    // The partitions each instance read after its last rebalance.
    const assigned = () =>
      logs.map((log) => {
        const joins = readFileSync(log, "utf8").split("\n").filter((line) => line.includes("joined the Kafka consumer group"))
        const last = joins.at(-1)
        return last === undefined ? 0 : Number(JSON.parse(last).annotations.partitions)
      })
    // The commands go out once the group has settled over both (bounded: the assertion below tells if it never does).
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && assigned().some((n) => n === 0);) await sleep(100)
    const commands = Array.from({ length: N }, (_, i) => schedule(`two-${i}`, Date.now() + 3_000))
    await client.produce("timer.commands", commands)
    const events = await client.read("timer.events", N, 60_000)
    const calls = byCall(events)
    const missing = commands.filter((c) => !calls.has(c.value.payload.serviceCallId)).length
    const firedBy = new Set(events.map((m) => m.headers["x-timer-instance"]))
    const partitions = assigned()
    report.twoInstances = { commands: N, events: events.length, missing, firedBy: [...firedBy], partitionsByInstance: partitions }
    expect(missing, "commands whose timer never fired").toBe(0)
    expect(partitions, "commands partitions read by each instance").toEqual([2, 2])
  }, 120_000)

  it("a SIGKILL while commands are taken in loses none of them", async () => {
    const N = 3_000
    const { client, dir, env } = await setUp()
    const commands = Array.from({ length: N }, (_, i) => schedule(`kill-${i}`, Date.now() + 20_000))
    await client.produce("timer.commands", commands)
    const server = await startServer({ dir, env })
    await sleep(300)
    await server.stop("SIGKILL")
    await startServer({ dir, env })
    const events = await client.read("timer.events", N, 90_000)
    const calls = byCall(events)
    const missing = commands.filter((c) => !calls.has(c.value.payload.serviceCallId)).length
    report.sigkill = { commands: N, events: events.length, missing }
    console.log(`[e2e kafka] SIGKILL during intake: ${events.length} events for ${N} commands, ${missing} missing`)
    expect(missing, "commands lost across the SIGKILL").toBe(0)
  }, 150_000)
})
