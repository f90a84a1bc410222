/**
 * End to end over NATS JetStream, against the built server on SQLite: the
 * shared nats-server (127.0.0.1:4222) with streams and subjects of each
 * test's own, and a private nats-server for the restart test.
 * - Round trip: ScheduleTimer in, DueTimeReached out, every field checked by
 *   the strict schema; the timer is visible through the HTTP API. A timer made
 *   through the API with a natsSubject publishes the webhook's body there.
 * - The contract's rules: moved while pending, ignored once fired, a repeated
 *   command changes nothing, CancelTimer, a past dueAt fires at once.
 * - Bad messages of each kind land in the dead-letter stream with their
 *   reason and original bytes, and the next good command is still processed.
 * - SIGKILL while firings are between their publish and their store update:
 *   after the restart, every DueTimeReached is in the events stream once.
 * - The NATS server killed and restarted mid-run: nothing lost.
 * Writes its figures to .bench/e2e-nats.json.
 */
import { DueTimeReached } from "@timer/core"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { connectNats, natsNames, type NatsTestClient, type StoredMessage, startPrivateNatsServer, TEST_NATS_URL } from "./support/nats.js"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { makeTempDir, removeDir, sleep, startServer } from "./support/server.js"
import { useTestHooks } from "./support/testHooks.js"

const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(DueTimeReached), { onExcessProperty: "error" })
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const { defer, report } = useTestHooks("e2e-nats.json")

/** A client, names of the test's own and a server using them on a database directory of its own. */
const setUp = async (url = TEST_NATS_URL) => {
  const names = natsNames()
  const client = await connectNats(url)
  defer(async () => {
    await client.deleteStreams(names.streams)
    await client.close()
  })
  const dir = makeTempDir()
  defer(async () => removeDir(dir))
  let starts = 0
  /** Starts the server (again); its whole log goes to a file, read by `logLines`. */
  const start = () => startServer({ dir, env: names.env(url), logFile: join(dir, `server-${++starts}.log`) })
  const logLines = (pattern: string) =>
    readFileSync(join(dir, `server-${starts}.log`), "utf8").split("\n").filter((line) => line.includes(pattern)).length
  return { names, client, dir, start, logLines, server: await start() }
}

let commandSeq = 0
const schedule = (serviceCallId: string, dueAt: number, extra: Record<string, unknown> = {}) => ({
  id: `cmd-${++commandSeq}`,
  type: "ScheduleTimer",
  tenantId: "t1",
  aggregateId: serviceCallId,
  correlationId: `corr-${serviceCallId}`,
  timestampMs: Date.now(),
  payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId, dueAt: new Date(dueAt).toISOString() },
  ...extra
})
const cancel = (serviceCallId: string) => ({
  id: `cmd-${++commandSeq}`,
  type: "CancelTimer",
  tenantId: "t1",
  timestampMs: Date.now(),
  payload: { _tag: "CancelTimer", tenantId: "t1", serviceCallId }
})

/** The events of a stream by service call. */
const eventsByCall = (messages: ReadonlyArray<StoredMessage>) => {
  const byCall = new Map<string, Array<DueTimeReached>>()
  for (const message of messages) {
    const event = decodeEvent(message.text)
    byCall.set(event.aggregateId, [...(byCall.get(event.aggregateId) ?? []), event])
  }
  return byCall
}

/** Publishes commands with bounded concurrency. */
const publishAll = async (client: NatsTestClient, subject: string, commands: ReadonlyArray<unknown>) => {
  for (let i = 0; i < commands.length; i += 100) {
    await Promise.all(commands.slice(i, i + 100).map((command) => client.publish(subject, command)))
  }
}

describe("NATS JetStream", () => {
  it("ScheduleTimer in, DueTimeReached out with every field of the contract", async () => {
    const { client, names, server } = await setUp()
    const command = schedule("sc-1", Date.now() + 500)
    const publishedAt = Date.now()
    await client.publish(names.commandsSubject, command)
    const [message] = await client.waitFor(names.eventsStream, 1, 10_000)
    expect(message, "no DueTimeReached within 10 s").toBeDefined()
    const event = decodeEvent(message!.text)
    expect(event).toMatchObject({
      type: "DueTimeReached",
      tenantId: "t1",
      aggregateId: "sc-1",
      correlationId: "corr-sc-1",
      causationId: command.id,
      payload: { _tag: "DueTimeReached", tenantId: "t1", serviceCallId: "sc-1" }
    })
    expect(event.id).toMatch(UUID_V7)
    expect(Date.parse(event.payload.reachedAt)).toBeGreaterThanOrEqual(Date.parse(command.payload.dueAt))
    expect(event.timestampMs).toBeGreaterThanOrEqual(Date.parse(event.payload.reachedAt))
    expect(event.timestampMs).toBeLessThan(publishedAt + 10_000)
    expect(message!.subject).toBe(names.eventsSubject)
    // The timer is an ordinary timer of the API, fired, its firing id the message's Nats-Msg-Id.
    const got = await server.post("/api/v1/timers/get", { namespace: "default", timerId: "t1/sc-1" })
    expect(got.status, got.text).toBe(200)
    expect(got.body).toMatchObject({
      state: "FIRED",
      natsSubject: names.eventsSubject,
      origin: { tenantId: "t1", serviceCallId: "sc-1", commandId: command.id, correlationId: "corr-sc-1" }
    })
    expect(message!.headers["Nats-Msg-Id"]).toBe(message!.headers["x-timer-firing-id"])
    report.roundTripLagMs = Date.parse(event.payload.reachedAt) - Date.parse(command.payload.dueAt)
    // A graceful stop does not wait on NATS.
    const termAt = Date.now()
    expect(await server.stop("SIGTERM", 10_000)).toEqual({ code: 0, signal: null })
    report.sigtermExitMs = Date.now() - termAt
  })

  it("a timer made through the HTTP API may publish to a NATS subject: it gets the webhook's JSON body", async () => {
    const { client, names, server } = await setUp()
    const executeAt = new Date(Date.now() + 300).toISOString()
    const created = await server.post("/api/v1/timers/create", {
      namespace: "default",
      id: "api-timer",
      executeAt,
      natsSubject: names.eventsSubject,
      payload: { order: 42 }
    })
    expect(created.status, created.text).toBe(200)
    expect(created.body).toMatchObject({ natsSubject: names.eventsSubject })
    expect(created.body.callbackUrl).toBeUndefined()
    const [message] = await client.waitFor(names.eventsStream, 1, 10_000)
    expect(JSON.parse(message!.text)).toEqual({
      namespace: "default",
      timerId: "api-timer",
      executeAt: new Date(Date.parse(executeAt)).toISOString(),
      payload: { order: 42 },
      attempt: 1,
      firedAt: expect.any(String)
    })
    expect(message!.headers).toMatchObject({ "x-timer-attempt": "1", "content-type": "application/json" })
    expect(message!.headers["Nats-Msg-Id"]).toBe(message!.headers["x-timer-firing-id"])
  })

  it("moves a pending timer, ignores one fired, keeps a repeated command once, cancels, and fires a past dueAt at once", async () => {
    const { client, names } = await setUp()
    const now = Date.now()
    const repeated = schedule("sc-repeat", now + 1_000)
    await publishAll(client, names.commandsSubject, [
      schedule("sc-move", now + 30_000),
      schedule("sc-move", now + 1_000),
      repeated,
      repeated,
      schedule("sc-cancel", now + 1_500),
      cancel("sc-cancel"),
      schedule("sc-past", now - 60_000)
    ])
    const first = eventsByCall(await client.waitFor(names.eventsStream, 3, 10_000))
    expect([...first.keys()].sort()).toEqual(["sc-move", "sc-past", "sc-repeat"])
    expect(Date.parse(first.get("sc-move")![0]!.payload.reachedAt)).toBeLessThan(now + 10_000)
    // Once fired, a ScheduleTimer changes nothing.
    await client.publish(names.commandsSubject, schedule("sc-move", Date.now() + 500))
    await sleep(2_500)
    const all = eventsByCall(await client.read(names.eventsStream))
    expect([...all.entries()].map(([call, events]) => [call, events.length]).sort()).toEqual([["sc-move", 1], ["sc-past", 1], ["sc-repeat", 1]])
  })

  it("dead-letters bad messages of each kind with the reason and the original bytes, and goes on", async () => {
    const { client, names } = await setUp()
    const bad: Array<[unknown, string, RegExp]> = [
      ["{this is not json", "InvalidJson", /not UTF-8 JSON/],
      [{ ...schedule("x", Date.now()), type: "FireEverything" }, "UnknownType", /FireEverything/],
      [schedule("", Date.now()), "InvalidCommand", /payload\.serviceCallId/],
      [{ ...schedule("y", Date.now()), payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId: "y", dueAt: "soon" } }, "InvalidCommand", /payload\.dueAt/]
    ]
    for (const [message] of bad) await client.publish(names.commandsSubject, message)
    await client.publish(names.commandsSubject, schedule("after-bad", Date.now()))
    const dead = await client.waitFor(names.dlqStream, bad.length, 10_000)
    expect(dead.map((m) => m.headers["timer-dlq-reason"])).toEqual(bad.map(([, reason]) => reason))
    for (const [i, [message, , problem]] of bad.entries()) {
      expect(dead[i]!.text).toBe(typeof message === "string" ? message : JSON.stringify(message))
      expect(dead[i]!.headers["timer-dlq-message"]).toMatch(problem)
      expect(dead[i]!.headers["timer-dlq-subject"]).toBe(names.commandsSubject)
    }
    const events = await client.waitFor(names.eventsStream, 1, 10_000)
    expect(events.map((m) => decodeEvent(m.text).aggregateId)).toEqual(["after-bad"])
  })

  it("a SIGKILL between publishes and their store updates repeats no DueTimeReached in the stream, and loses none", async () => {
    const N = 2_000
    const { client, logLines, names, server, start } = await setUp()
    const dueAt = Date.now() + 4_000
    const commands = Array.from({ length: N }, (_, i) => schedule(`kill-${i}`, dueAt))
    const publishStart = Date.now()
    await publishAll(client, names.commandsSubject, commands)
    const ingestMs = Date.now() - publishStart
    // Kill once about a third have been published as events.
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && (await client.jsm.streams.info(names.eventsStream)).state.messages < N / 3) await sleep(5)
    await server.stop("SIGKILL")
    const atKill = (await client.jsm.streams.info(names.eventsStream)).state.messages
    await start()
    const events = await client.waitFor(names.eventsStream, N, 60_000)
    await sleep(1_000)
    const byCall = eventsByCall(await client.read(names.eventsStream))
    const repeated = [...byCall.values()].filter((list) => list.length > 1).length
    const dropped = logLines("JetStream dropped a repeated firing")
    report.sigkill = { commands: N, ingestMs, eventsAtKill: atKill, events: events.length, repeatedInStream: repeated, repeatsDroppedByJetStream: dropped }
    console.log(`[e2e nats] SIGKILL at ${atKill} of ${N} events: ${events.length} events after the restart, ${repeated} repeated, ${dropped} repeats dropped by JetStream`)
    expect(byCall.size, "service calls with a DueTimeReached").toBe(N)
    expect(repeated, "DueTimeReached repeated in the stream").toBe(0)
    // The kill did land between publishes and their updates: the restarted server published again.
    expect(dropped, "repeats the restarted server published (JetStream dropped them)").toBeGreaterThan(0)
  }, 120_000)

  it("loses nothing when the NATS server is killed and restarted mid-run", async () => {
    const nats = await startPrivateNatsServer()
    defer(() => nats.dispose())
    const { client, names } = await setUp(nats.url)
    const before = Array.from({ length: 300 }, (_, i) => schedule(`before-${i}`, Date.now() + 1_000 + i * 10))
    await publishAll(client, names.commandsSubject, before)
    await sleep(2_000)
    await nats.stop()
    await sleep(1_500)
    await nats.start()
    const after = Array.from({ length: 100 }, (_, i) => schedule(`after-${i}`, Date.now() + 500 + i * 10))
    await publishAll(client, names.commandsSubject, after)
    const events = await client.waitFor(names.eventsStream, before.length + after.length, 60_000)
    const byCall = eventsByCall(events)
    const missing = [...before, ...after].map((c) => c.payload.serviceCallId).filter((call) => !byCall.has(call))
    report.natsRestart = { commands: before.length + after.length, events: events.length, missing: missing.length }
    expect(missing.slice(0, 20), `service calls without a DueTimeReached (${missing.length})`).toEqual([])
  }, 120_000)
})
