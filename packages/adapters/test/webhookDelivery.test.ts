/**
 * Webhook delivery: how an answer is classified (pure), and the real HTTP call
 * to a local receiver (node:http on 127.0.0.1, an ephemeral port) over undici.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { type DeliveryOutcome, TimerDelivery, type TimerRecord } from "@timer/core"
import { Effect, Layer } from "effect"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import {
  ATTEMPT_HEADER,
  classifyResponse,
  FIRING_ID_HEADER,
  INSTANCE_HEADER,
  layerWebhookDelivery,
  MAX_RESPONSE_BODY_BYTES,
  parseRetryAfter,
  webhookBody
} from "../src/index.js"

const NOW = Date.parse("2030-01-01T00:00:00.000Z")

describe("classifyResponse", () => {
  describe("2xx", () => {
    it.each([
      ["200 with an empty body", 200, ""],
      ["204 with an empty body", 204, ""],
      ["200 with whitespace only", 200, "  \n"],
      ["200 {ok: true}", 200, "{\"ok\":true}"],
      ["201 {ok: true, extra}", 201, "{\"ok\":true,\"note\":\"thanks\"}"],
      ["299 with an empty body", 299, ""],
      ["200 with a body that is not JSON", 200, "OK thanks"],
      ["200 with HTML", 200, "<html><body>ok</body></html>"],
      ["200 with a JSON array", 200, "[1,2]"],
      ["200 with a JSON string", 200, "\"ok\""],
      ["200 with JSON null", 200, "null"],
      ["200 with {} (no ok field)", 200, "{}"],
      ["200 with ok as the string \"false\"", 200, "{\"ok\":\"false\"}"]
    ])("%s is Delivered", (_label, status, body) => {
      expect(classifyResponse(status, body, undefined, NOW)).toEqual({ _tag: "Delivered" })
    })

    it("{ok: false, nextExecuteAt} is Reschedule at that time, in UTC", () => {
      expect(classifyResponse(200, "{\"ok\":false,\"nextExecuteAt\":\"2030-01-01T10:00:00+02:00\"}", undefined, NOW)).toEqual({
        _tag: "Reschedule",
        nextExecuteAt: Date.parse("2030-01-01T08:00:00.000Z")
      })
      expect(classifyResponse(202, "{\"ok\":false,\"nextExecuteAt\":\"2031-05-06T07:08:09.123Z\"}", undefined, NOW)).toEqual({
        _tag: "Reschedule",
        nextExecuteAt: Date.parse("2031-05-06T07:08:09.123Z")
      })
    })

    it("{ok: false} alone (or with nextExecuteAt null) is Retryable", () => {
      for (const body of ["{\"ok\":false}", "{\"ok\":false,\"nextExecuteAt\":null}"]) {
        const outcome = classifyResponse(200, body, undefined, NOW)
        expect(outcome._tag).toBe("Retryable")
        expect(outcome).toMatchObject({ error: expect.stringContaining("ok: false") })
        expect((outcome as { retryAfterMs?: number }).retryAfterMs).toBeUndefined()
      }
    })

    it.each([
      ["garbage", "\"tomorrow\""],
      ["no time zone", "\"2030-01-01T10:00:00\""],
      ["a number", "1893492000000"],
      ["an object", "{}"],
      ["an impossible month", "\"2030-13-01T00:00:00Z\""],
      ["an impossible day", "\"2030-02-30T00:00:00Z\""],
      ["an impossible hour", "\"2030-01-01T24:00:00Z\""]
    ])("{ok: false} with an invalid nextExecuteAt (%s) is Retryable", (_label, next) => {
      const outcome = classifyResponse(200, `{"ok":false,"nextExecuteAt":${next}}`, undefined, NOW)
      expect(outcome._tag).toBe("Retryable")
      expect(outcome).toMatchObject({ error: expect.stringContaining("invalid nextExecuteAt") })
    })

    it("Retry-After is ignored on 2xx", () => {
      expect(classifyResponse(200, "", "30", NOW)).toEqual({ _tag: "Delivered" })
      const outcome = classifyResponse(200, "{\"ok\":false}", "30", NOW)
      expect((outcome as { retryAfterMs?: number }).retryAfterMs).toBeUndefined()
    })
  })

  describe("errors", () => {
    it.each([400, 401, 403, 404, 405, 409, 410, 413, 422])("%i is Permanent", (status) => {
      const outcome = classifyResponse(status, "", undefined, NOW)
      expect(outcome._tag).toBe("Permanent")
      expect(outcome).toMatchObject({ error: expect.stringContaining(`HTTP ${status}`) })
    })

    it.each([408, 429, 500, 502, 503, 504])("%i is Retryable", (status) => {
      const outcome = classifyResponse(status, "", undefined, NOW)
      expect(outcome).toEqual({ _tag: "Retryable", error: `HTTP ${status}`, retryAfterMs: undefined })
    })

    it("the error quotes the start of the body", () => {
      const permanent = classifyResponse(404, "no such hook", undefined, NOW)
      expect(permanent).toMatchObject({ _tag: "Permanent", error: expect.stringContaining("HTTP 404: no such hook") })
      const long = "e".repeat(500)
      const retryable = classifyResponse(500, long, undefined, NOW) as { error: string }
      expect(retryable.error).toBe(`HTTP 500: ${"e".repeat(200)}…`)
    })
  })

  describe("Retry-After", () => {
    it.each([429, 503])("%i honours Retry-After in seconds", (status) => {
      expect(classifyResponse(status, "", "120", NOW)).toEqual({ _tag: "Retryable", error: `HTTP ${status}`, retryAfterMs: 120_000 })
      expect(classifyResponse(status, "", " 7 ", NOW)).toMatchObject({ retryAfterMs: 7_000 })
      expect(classifyResponse(status, "", "0", NOW)).toMatchObject({ retryAfterMs: 0 })
    })

    it.each([429, 503])("%i honours Retry-After as an HTTP date", (status) => {
      const inThirtySeconds = new Date(NOW + 30_000).toUTCString()
      expect(classifyResponse(status, "", inThirtySeconds, NOW)).toMatchObject({ _tag: "Retryable", retryAfterMs: 30_000 })
      // A date already past means: retry now.
      const past = new Date(NOW - 60_000).toUTCString()
      expect(classifyResponse(status, "", past, NOW)).toMatchObject({ _tag: "Retryable", retryAfterMs: 0 })
    })

    it.each([408, 500, 502, 504])("%i ignores Retry-After", (status) => {
      expect(classifyResponse(status, "", "120", NOW)).toEqual({ _tag: "Retryable", error: `HTTP ${status}`, retryAfterMs: undefined })
      expect(classifyResponse(status, "", new Date(NOW + 30_000).toUTCString(), NOW)).toMatchObject({ retryAfterMs: undefined })
    })

    it("a missing or unreadable Retry-After leaves the backoff to the retry policy", () => {
      for (const header of [undefined, "", "   ", "soon", "5s"]) {
        expect(classifyResponse(429, "", header, NOW)).toMatchObject({ _tag: "Retryable", retryAfterMs: undefined })
      }
    })

    it("parseRetryAfter reads seconds and HTTP dates", () => {
      expect(parseRetryAfter("3", NOW)).toBe(3_000)
      expect(parseRetryAfter("Tue, 01 Jan 2030 00:01:00 GMT", NOW)).toBe(60_000)
      expect(parseRetryAfter(undefined, NOW)).toBeUndefined()
      expect(parseRetryAfter("nonsense", NOW)).toBeUndefined()
    })

    it.each(["1.5", "-1", "2030-01-01T00:01:00Z", " "])("parseRetryAfter ignores %j (neither delta-seconds nor an HTTP date)", (value) => {
      expect(parseRetryAfter(value, NOW)).toBeUndefined()
    })
  })
})

// --- The real HTTP call -------------------------------------------------------

interface Call {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

interface Answer {
  readonly status: number
  readonly body?: string
  readonly headers?: Record<string, string>
  /** Milliseconds to wait before answering. */
  readonly delayMs?: number
  /** Sends the body in 8 KiB pieces with chunked transfer encoding (no Content-Length). */
  readonly chunked?: boolean
}

/** A local webhook receiver that records every call and answers as `answer` says. */
const makeReceiver = Effect.gen(function*() {
  const calls: Array<Call> = []
  const state: { answer: (call: Call) => Answer } = { answer: () => ({ status: 200 }) }
  const timers = new Set<NodeJS.Timeout>()
  const server: Server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const call = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") }
      calls.push(call)
      const answer = state.answer(call)
      const send = () => {
        if (res.destroyed) return
        res.writeHead(answer.status, answer.headers ?? {})
        const body = answer.body ?? ""
        if (answer.chunked === true) {
          for (let at = 0; at < body.length; at += 8192) res.write(body.slice(at, at + 8192))
          return res.end()
        }
        res.end(body)
      }
      if (answer.delayMs === undefined) return send()
      const timer = setTimeout(() => (timers.delete(timer), send()), answer.delayMs)
      timers.add(timer)
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
    () =>
      Effect.async<void>((resume) => {
        for (const timer of timers) clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    answerWith: (answer: (call: Call) => Answer) => {
      state.answer = answer
    }
  }
})

/** A port with nothing listening on it: bound, then closed. */
const closedPort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const timerFor = (callbackUrl: string, overrides: Partial<TimerRecord> = {}): TimerRecord => ({
  namespace: "orders",
  id: "order-42",
  shardId: 3,
  executeAt: Date.parse("2030-01-01T08:00:00.000Z"),
  nextFireAt: Date.parse("2030-01-01T08:00:00.000Z"),
  callbackUrl,
  payload: { order: 42, items: ["a", "b"] },
  callbackTimeoutSeconds: 5,
  state: "SCHEDULED",
  attempts: 0,
  firingId: "firing-7f3a",
  createdAt: Date.parse("2029-12-31T00:00:00.000Z"),
  updatedAt: Date.parse("2029-12-31T00:00:00.000Z"),
  ...overrides
})

const deliver = (timer: TimerRecord, attempt: number, firedAt = Date.parse("2030-01-01T08:00:00.250Z")) =>
  Effect.flatMap(TimerDelivery, (delivery) => delivery.deliver({ timer, attempt, firedAt, instanceId: "instance-a" }))

const errorOf = (outcome: DeliveryOutcome): string => (outcome._tag === "Retryable" || outcome._tag === "Permanent" ? outcome.error : "")

// Real time throughout: the receiver, the sockets and callbackTimeoutSeconds run on the wall clock.
layer(layerWebhookDelivery.pipe(Layer.provide(NodeHttpClient.layerUndici)), { excludeTestServices: true })("layerWebhookDelivery", (it) => {
  it.scoped("POSTs exactly {namespace, timerId, executeAt, payload, attempt, firedAt} with the firing headers", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      const timer = timerFor(`${receiver.url}/hooks/orders?source=timers`)

      const first = yield* deliver(timer, 1, Date.parse("2030-01-01T08:00:00.250Z"))
      const second = yield* deliver(timer, 2, Date.parse("2030-01-01T08:00:05.500Z"))
      expect(first).toEqual({ _tag: "Delivered" })
      expect(second).toEqual({ _tag: "Delivered" })

      expect(receiver.calls).toHaveLength(2)
      const [call1, call2] = receiver.calls as [Call, Call]
      for (const call of [call1, call2]) {
        expect(call.method).toBe("POST")
        expect(call.url).toBe("/hooks/orders?source=timers")
        expect(call.headers["content-type"]).toMatch(/^application\/json/)
        // The same firing keeps its id over every attempt.
        expect(call.headers[FIRING_ID_HEADER]).toBe("firing-7f3a")
      }
      expect(call1.headers[ATTEMPT_HEADER]).toBe("1")
      expect(call2.headers[ATTEMPT_HEADER]).toBe("2")
      expect(call1.headers[INSTANCE_HEADER]).toBe("instance-a")

      const body1 = JSON.parse(call1.body)
      expect(Object.keys(body1).sort()).toEqual(["attempt", "executeAt", "firedAt", "namespace", "payload", "timerId"])
      expect(body1).toEqual({
        namespace: "orders",
        timerId: "order-42",
        executeAt: "2030-01-01T08:00:00.000Z",
        payload: { order: 42, items: ["a", "b"] },
        attempt: 1,
        firedAt: "2030-01-01T08:00:00.250Z"
      })
      expect(JSON.parse(call2.body)).toEqual({ ...body1, attempt: 2, firedAt: "2030-01-01T08:00:05.500Z" })
      expect(webhookBody({ timer, attempt: 1, firedAt: Date.parse("2030-01-01T08:00:00.250Z"), instanceId: "instance-a" })).toEqual(body1)
    }))

  it.scoped("a timer without a payload sends payload null; another firing sends its own firing id", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      const { payload: _payload, ...withoutPayload } = timerFor(receiver.url)
      yield* deliver({ ...withoutPayload, firingId: "firing-other" }, 1)
      expect(receiver.calls).toHaveLength(1)
      const call = receiver.calls[0]!
      expect(JSON.parse(call.body)).toMatchObject({ payload: null, attempt: 1 })
      expect(Object.keys(JSON.parse(call.body))).toContain("payload")
      expect(call.headers[FIRING_ID_HEADER]).toBe("firing-other")
    }))

  it.scoped("the receiver's answer is classified: reschedule, retry with Retry-After, permanent, non-JSON 2xx", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      const timer = timerFor(receiver.url)

      receiver.answerWith(() => ({
        status: 200,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ok: false, nextExecuteAt: "2030-02-01T00:00:00Z" })
      }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Reschedule", nextExecuteAt: Date.parse("2030-02-01T00:00:00Z") })

      receiver.answerWith(() => ({ status: 200, body: JSON.stringify({ ok: false }) }))
      expect((yield* deliver(timer, 1))._tag).toBe("Retryable")

      receiver.answerWith(() => ({ status: 503, headers: { "retry-after": "7" }, body: "busy" }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Retryable", error: "HTTP 503: busy", retryAfterMs: 7_000 })

      receiver.answerWith(() => ({ status: 410, body: "gone" }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Permanent", error: "HTTP 410: gone (not retried)" })

      receiver.answerWith(() => ({ status: 200, headers: { "content-type": "text/plain" }, body: "thanks!" }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Delivered" })

      receiver.answerWith(() => ({ status: 204 }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Delivered" })
    }))

  it.scoped("only the first 64 KiB of an answer are read: a longer 2xx body is no CallbackResponse", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      const timer = timerFor(receiver.url)
      const answer = (padding: number) => JSON.stringify({ ok: false, padding: "x".repeat(padding) })
      receiver.answerWith(() => ({ status: 200, body: answer(MAX_RESPONSE_BODY_BYTES - 100) }))
      expect((yield* deliver(timer, 1))._tag).toBe("Retryable")
      receiver.answerWith(() => ({ status: 200, body: answer(MAX_RESPONSE_BODY_BYTES + 100) }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Delivered" })
      // The same without a Content-Length: read piece by piece, and no further than the limit.
      receiver.answerWith(() => ({ status: 200, chunked: true, body: answer(MAX_RESPONSE_BODY_BYTES - 100) }))
      expect((yield* deliver(timer, 1))._tag).toBe("Retryable")
      receiver.answerWith(() => ({ status: 200, chunked: true, body: answer(4 * MAX_RESPONSE_BODY_BYTES) }))
      expect(yield* deliver(timer, 1)).toEqual({ _tag: "Delivered" })
    }))

  it.scoped("a receiver slower than callbackTimeoutSeconds gives Retryable \"timed out\"", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      receiver.answerWith(() => ({ status: 200, delayMs: 5_000 }))
      const started = Date.now()
      const outcome = yield* deliver(timerFor(receiver.url, { callbackTimeoutSeconds: 1 }), 1)
      const elapsed = Date.now() - started
      expect(outcome._tag).toBe("Retryable")
      expect(errorOf(outcome)).toMatch(/timed out/)
      expect(errorOf(outcome)).toMatch(/1s/)
      expect(elapsed).toBeGreaterThanOrEqual(900)
      expect(elapsed).toBeLessThan(4_000)
      expect(receiver.calls).toHaveLength(1)
    }), 15_000)

  it.scoped("a receiver within callbackTimeoutSeconds is not cut short", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver
      receiver.answerWith(() => ({ status: 200, delayMs: 300 }))
      expect(yield* deliver(timerFor(receiver.url, { callbackTimeoutSeconds: 1 }), 1)).toEqual({ _tag: "Delivered" })
    }), 15_000)

  it.scoped("connection refused gives Retryable", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const outcome = yield* deliver(timerFor(`http://127.0.0.1:${port}/hook`), 1)
      expect(outcome._tag).toBe("Retryable")
      expect(errorOf(outcome)).toMatch(/ECONNREFUSED/)
      expect((outcome as { retryAfterMs?: number }).retryAfterMs).toBeUndefined()
    }), 15_000)

  it.scoped("an unresolvable host gives Retryable", () =>
    Effect.gen(function*() {
      const outcome = yield* deliver(timerFor("http://no-such-host.invalid/hook", { callbackTimeoutSeconds: 5 }), 1)
      expect(outcome._tag).toBe("Retryable")
      expect(errorOf(outcome).length).toBeGreaterThan(0)
    }), 15_000)
})
