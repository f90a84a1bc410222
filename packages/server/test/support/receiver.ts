/**
 * A local webhook receiver: node:http on 127.0.0.1, an ephemeral port, every
 * request recorded, each answered as `respond` says (200 with no body by default).
 */
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"

/** One request the receiver got. */
export interface ReceivedCall {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/** How the receiver answers a call. */
export interface ReceiverAnswer {
  readonly status: number
  readonly body?: string
  readonly headers?: Record<string, string>
}

/** A running receiver. */
export interface Receiver {
  readonly url: string
  readonly calls: ReadonlyArray<ReceivedCall>
  respond: (call: ReceivedCall) => ReceiverAnswer
  readonly close: () => Promise<void>
}

/** Starts a receiver. */
export const startReceiver = async (): Promise<Receiver> => {
  const calls: Array<ReceivedCall> = []
  const receiver: { respond: (call: ReceivedCall) => ReceiverAnswer } = { respond: () => ({ status: 200 }) }
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const call: ReceivedCall = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8")
      }
      calls.push(call)
      const answer = receiver.respond(call)
      res.writeHead(answer.status, answer.headers ?? {})
      res.end(answer.body ?? "")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hook`,
    calls,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      })
  })
}

/** Polls `check` until it returns a value other than undefined, failing after `timeoutMs`. */
export const waitFor = async <A>(
  what: string,
  check: () => Promise<A | undefined>,
  timeoutMs = 10_000,
  intervalMs = 50
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
