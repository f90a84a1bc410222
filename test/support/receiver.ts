/**
 * A local webhook receiver: records every call (arrival time, body, firing id,
 * attempt and instance headers) and answers 200 with an empty body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { performance } from "node:perf_hooks"
import { sleep } from "./server.js"

/** The JSON body of a webhook call. */
export interface WebhookBody {
  readonly namespace: string
  readonly timerId: string
  readonly executeAt: string
  readonly payload: unknown
  readonly attempt: number
  readonly firedAt: string
}

/** One received call. */
export interface WebhookCall {
  /** Arrival time (headers and body read), epoch ms from Date.now(). */
  readonly at: number
  /** Arrival time from performance.now() (monotonic), ms. */
  readonly mono: number
  readonly path: string
  readonly firingId: string | undefined
  readonly attemptHeader: string | undefined
  /** The x-timer-instance header: the instance that fired the timer. */
  readonly instance: string | undefined
  /** The decoded body; undefined when it was not JSON (see `raw`). */
  readonly body: WebhookBody | undefined
  readonly raw: string
}

/** A running receiver. */
export interface Receiver {
  readonly url: string
  readonly calls: Array<WebhookCall>
  /** Calls grouped by body.timerId. */
  byTimer(): Map<string, Array<WebhookCall>>
  /** Distinct timer ids called. */
  distinctTimers(): number
  /** Waits until `predicate` holds, polling every `intervalMs`; false on timeout. */
  waitUntil(predicate: () => boolean, timeoutMs: number, intervalMs?: number): Promise<boolean>
  close(): Promise<void>
}

/** Options of `startReceiver`. */
export interface ReceiverOptions {
  /** Decides the answer of a call; 200 with an empty body when left out. */
  readonly respond?: (call: WebhookCall) => { status: number; body?: string }
}

/** Starts a receiver on 127.0.0.1 and a free port. */
export const startReceiver = async (options: ReceiverOptions = {}): Promise<Receiver> => {
  const calls: Array<WebhookCall> = []
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const at = Date.now()
      const mono = performance.now()
      const raw = Buffer.concat(chunks).toString("utf8")
      let body: WebhookBody | undefined
      try {
        body = JSON.parse(raw) as WebhookBody
      } catch {
        body = undefined
      }
      const header = (name: string) => {
        const value = req.headers[name]
        return Array.isArray(value) ? value[0] : value
      }
      const call: WebhookCall = {
        at,
        mono,
        path: req.url ?? "",
        firingId: header("x-timer-firing-id"),
        attemptHeader: header("x-timer-attempt"),
        instance: header("x-timer-instance"),
        body,
        raw
      }
      calls.push(call)
      const answer = options.respond?.(call) ?? { status: 200 }
      res.writeHead(answer.status, { "content-length": Buffer.byteLength(answer.body ?? "") })
      res.end(answer.body ?? "")
    })
    req.on("error", () => {
      // the sender went away (killed mid-request): nothing to record
    })
  }
  const server: Server = createServer(handler)
  server.keepAliveTimeout = 30_000
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("receiver has no port")
  const url = `http://127.0.0.1:${address.port}/hook`

  const byTimer = () => {
    const map = new Map<string, Array<WebhookCall>>()
    for (const call of calls) {
      const id = call.body?.timerId ?? "(no body)"
      const list = map.get(id)
      if (list === undefined) map.set(id, [call])
      else list.push(call)
    }
    return map
  }

  return {
    url,
    calls,
    byTimer,
    distinctTimers: () => byTimer().size,
    waitUntil: async (predicate, timeoutMs, intervalMs = 10) => {
      const deadline = Date.now() + timeoutMs
      while (!predicate()) {
        if (Date.now() > deadline) return false
        await sleep(intervalMs)
      }
      return true
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
        setTimeout(resolve, 2_000).unref()
      })
  }
}
