/**
 * Kafka for the end-to-end tests: librdkafka's mock cluster (real Kafka
 * protocol on loopback ports), launched by a small C program built here with
 * the machine's compiler on first use (needs librdkafka-dev); and a kafkajs
 * client to produce commands and read topics.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, mkdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Kafka, logLevel, Partitioners } from "kafkajs"
import { repoRoot, sleep } from "./server.js"

const SOURCE = join(repoRoot, "test/support/kafka/mock_cluster.c")
const BINARY = join(repoRoot, "node_modules/.cache/timer-e2e/mock_cluster")

/** Builds the launcher when it is missing or older than its source. */
const buildLauncher = () => {
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs >= statSync(SOURCE).mtimeMs) return
  mkdirSync(join(BINARY, ".."), { recursive: true })
  execFileSync("cc", ["-O1", "-o", BINARY, SOURCE, "-lrdkafka"], { stdio: "inherit" })
}

/** A running mock cluster. */
export interface MockKafka {
  /** host:port,host:port… */
  readonly bootstrap: string
  stop(): Promise<void>
}

/** Starts a mock cluster of `brokers` brokers with these topics ("name:partitions"). */
export const startMockKafka = async (brokers: number, topics: ReadonlyArray<string>): Promise<MockKafka> => {
  buildLauncher()
  const child: ChildProcess = spawn(BINARY, [String(brokers), ...topics], { stdio: ["pipe", "pipe", "ignore"] })
  const bootstrap = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    const timer = setTimeout(() => reject(new Error("the mock Kafka cluster printed no bootstrap servers within 10 s")), 10_000)
    lines.once("line", (line) => {
      clearTimeout(timer)
      resolve(line.trim())
    })
    child.once("exit", (code) => reject(new Error(`the mock Kafka cluster exited (${code})`)))
  })
  return {
    bootstrap,
    stop: async () => {
      child.stdin?.end()
      child.kill("SIGKILL")
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(3_000)])
    }
  }
}

/** A message read from a topic. */
export interface TopicMessage {
  readonly partition: number
  readonly key: string | null
  readonly text: string
  readonly headers: Record<string, string>
}

/** A test client: produce, and read a topic from its start. */
export const kafkaClient = (bootstrap: string) => {
  const kafka = new Kafka({ clientId: "timers-e2e", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING })
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: true })
  let connected = false
  return {
    produce: async (topic: string, messages: ReadonlyArray<{ key?: string; value: unknown }>) => {
      if (!connected) await producer.connect()
      connected = true
      for (let i = 0; i < messages.length; i += 500) {
        await producer.send({
          topic,
          acks: -1,
          messages: messages.slice(i, i + 500).map((m) => ({
            key: m.key ?? null,
            value: typeof m.value === "string" ? m.value : JSON.stringify(m.value)
          }))
        })
      }
    },
    /** Reads the topic from its start until `count` messages arrived or `timeoutMs` passed. */
    read: async (topic: string, count: number, timeoutMs: number): Promise<Array<TopicMessage>> => {
      const consumer = kafka.consumer({ groupId: `reader-${Math.random().toString(16).slice(2)}`, allowAutoTopicCreation: true })
      const messages: Array<TopicMessage> = []
      await consumer.connect()
      try {
        await consumer.subscribe({ topic, fromBeginning: true })
        await consumer.run({
          eachMessage: async ({ message, partition }) => {
            const headers: Record<string, string> = {}
            for (const [key, value] of Object.entries(message.headers ?? {})) headers[key] = String(value)
            messages.push({ partition, key: message.key?.toString() ?? null, text: message.value?.toString() ?? "", headers })
          }
        })
        const deadline = Date.now() + timeoutMs
        while (messages.length < count && Date.now() < deadline) await sleep(50)
        return messages
      } finally {
        await Promise.race([consumer.disconnect().catch(() => undefined), sleep(5_000)])
      }
    },
    close: async () => {
      if (connected) await Promise.race([producer.disconnect().catch(() => undefined), sleep(5_000)])
    }
  }
}

/** The server settings that point it at `bootstrap` (the mock cluster names no controller: no idempotent producer). */
export const kafkaEnv = (bootstrap: string): Record<string, string> => ({
  TIMER_KAFKA_BROKERS: bootstrap,
  TIMER_KAFKA_IDEMPOTENT: "false",
  // A killed instance's partitions move after this.
  TIMER_KAFKA_SESSION_TIMEOUT_MS: "6000"
})
