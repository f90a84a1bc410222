/**
 * NATS for the end-to-end tests: the shared server on 127.0.0.1:4222 (or
 * TIMER_TEST_NATS_URL) with stream and subject names of the test's own, or a
 * private nats-server process that a test may stop and start again; and
 * helpers to publish commands and read what a stream holds.
 */
import { jetstream, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/nats-core"
import { connect } from "@nats-io/transport-node"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { freePort, makeTempDir, removeDir, sleep } from "./server.js"

/** The shared server the tests use. */
export const TEST_NATS_URL = process.env.TIMER_TEST_NATS_URL ?? "nats://127.0.0.1:4222"

/** Stream and subject names of one test, and the server settings that use them. */
export const natsNames = (prefix = "e2e") => {
  const tag = `${prefix}_${randomBytes(4).toString("hex")}`.toUpperCase()
  const subject = tag.toLowerCase()
  const names = {
    commandsStream: `${tag}_COMMANDS`,
    commandsSubject: `${subject}.commands`,
    dlqStream: `${tag}_DLQ`,
    dlqSubject: `${subject}.commands.dlq`,
    eventsStream: `${tag}_EVENTS`,
    eventsSubject: `${subject}.events`
  }
  const env = (url: string): Record<string, string> => ({
    TIMER_NATS_URL: url,
    TIMER_NATS_COMMANDS_STREAM: names.commandsStream,
    TIMER_NATS_COMMANDS_SUBJECT: names.commandsSubject,
    TIMER_NATS_DLQ_STREAM: names.dlqStream,
    TIMER_NATS_DLQ_SUBJECT: names.dlqSubject,
    TIMER_NATS_EVENTS_STREAM: names.eventsStream,
    TIMER_NATS_EVENTS_SUBJECT: names.eventsSubject
  })
  return { ...names, env, streams: [names.commandsStream, names.dlqStream, names.eventsStream] }
}

/** A message stored in a stream. */
export interface StoredMessage {
  readonly seq: number
  readonly subject: string
  readonly text: string
  readonly headers: Record<string, string>
}

/** A client of the tests: publish, read a stream, delete streams. */
export interface NatsTestClient {
  readonly connection: NatsConnection
  readonly jsm: JetStreamManager
  /** Publishes to JetStream (a string as it is, anything else as JSON) and waits for the ack (retrying for a while). */
  publish(subject: string, message: unknown): Promise<void>
  /** Every message of a stream, in order (none when it does not exist). */
  read(stream: string): Promise<Array<StoredMessage>>
  /** Waits (bounded) until the stream holds at least `count` messages; returns them. */
  waitFor(stream: string, count: number, timeoutMs: number): Promise<Array<StoredMessage>>
  /** Deletes the streams (best effort). */
  deleteStreams(streams: ReadonlyArray<string>): Promise<void>
  close(): Promise<void>
}

/** Connects a test client to `url`. */
export const connectNats = async (url = TEST_NATS_URL): Promise<NatsTestClient> => {
  const connection = await connect({ servers: url, name: "timers e2e", reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 200 })
  const jsm = await jetstreamManager(connection)
  const js = jetstream(connection)
  const encoder = new TextEncoder()
  const decoder = new TextDecoder()
  const read = async (stream: string) => {
    let last = 0
    try {
      last = (await jsm.streams.info(stream)).state.last_seq
    } catch {
      return []
    }
    const messages: Array<StoredMessage> = []
    for (let seq = 1; seq <= last; seq++) {
      try {
        const m = await jsm.streams.getMessage(stream, { seq })
        if (m === null) continue
        const headers: Record<string, string> = {}
        for (const key of m.header?.keys() ?? []) headers[key] = m.header!.get(key)
        messages.push({ seq, subject: m.subject, text: decoder.decode(m.data), headers })
      } catch {
        // deleted
      }
    }
    return messages
  }
  return {
    connection,
    jsm,
    // Retried for up to 15 s, as a producer would while the server restarts.
    publish: async (subject, message) => {
      const data = encoder.encode(typeof message === "string" ? message : JSON.stringify(message))
      const deadline = Date.now() + 15_000
      for (;;) {
        try {
          await js.publish(subject, data, { timeout: 2_000 })
          return
        } catch (error) {
          if (Date.now() > deadline) throw error
          await sleep(200)
        }
      }
    },
    read,
    waitFor: async (stream, count, timeoutMs) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const info = await jsm.streams.info(stream).catch(() => undefined)
        if ((info?.state.messages ?? 0) >= count || Date.now() > deadline) return read(stream)
        await sleep(50)
      }
    },
    deleteStreams: async (streams) => {
      for (const stream of streams) await jsm.streams.delete(stream).catch(() => undefined)
    },
    close: async () => {
      await Promise.race([connection.drain().catch(() => undefined), sleep(3_000)])
    }
  }
}

/** A nats-server process of a test's own, on a free port, with JetStream on a temporary directory. */
export interface PrivateNatsServer {
  readonly url: string
  /** Stops it (SIGKILL: as a crash would) and waits for the exit. */
  stop(): Promise<void>
  /** Starts it again on the same port and store. */
  start(): Promise<void>
  /** Stops it and removes its store. */
  dispose(): Promise<void>
}

const NATS_SERVER = process.env.NATS_SERVER_BIN ?? "/usr/sbin/nats-server"

/** Starts a private nats-server; fails when it is not up within 10 s. */
export const startPrivateNatsServer = async (): Promise<PrivateNatsServer> => {
  const port = await freePort()
  const dir = makeTempDir("timers-e2e-nats-")
  let child: ChildProcess | undefined
  const up = async () => {
    child = spawn(NATS_SERVER, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir], { stdio: "ignore" })
    const deadline = Date.now() + 10_000
    for (;;) {
      try {
        const probe = await connect({ servers: `127.0.0.1:${port}`, reconnect: false, timeout: 500 })
        await jetstreamManager(probe)
        await probe.close()
        return
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`nats-server did not start on port ${port}: ${String(error)}`)
        await sleep(100)
      }
    }
  }
  const stop = async () => {
    const running = child
    child = undefined
    if (running === undefined || running.exitCode !== null) return
    await new Promise<void>((resolve) => {
      running.once("exit", () => resolve())
      running.kill("SIGKILL")
      setTimeout(resolve, 5_000)
    })
  }
  await up()
  return { url: `nats://127.0.0.1:${port}`, stop, start: up, dispose: async () => (await stop(), removeDir(dir)) }
}
