/**
 * The HTTP API in-process: the payload limit (measured on the payload's compact
 * JSON) and the request body limit, at the default and at a small configured limit.
 */
import { describe, expect, it } from "vitest"
import { expectError, expectInvalid } from "./support/expectations.js"
import { useTestServer } from "./support/testServer.js"
import { FAR_FUTURE, NOWHERE, timerApi, TIMERS } from "./support/timerApi.js"

const DEFAULT_PAYLOAD_LIMIT = 100 * 1024

const server = useTestServer()
const { createTimer, freshNamespace, getTimer } = timerApi(server)

describe("payload size", () => {
  it("a payload of exactly 100 KiB of JSON is accepted; one byte more is 413 PAYLOAD_TOO_LARGE", async () => {
    const namespace = await freshNamespace()
    // A JSON string of n characters encodes to n + 2 bytes.
    const atLimit = "x".repeat(DEFAULT_PAYLOAD_LIMIT - 2)
    const accepted = await createTimer({ namespace, id: "big", executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: atLimit })
    expect(accepted.payload).toBe(atLimit)

    const tooLarge = await server.post(`${TIMERS}/create`, {
      namespace,
      id: "too-big",
      executeAt: FAR_FUTURE,
      callbackUrl: NOWHERE,
      payload: atLimit + "x"
    })
    const body = expectError(tooLarge, 413, "PAYLOAD_TOO_LARGE")
    expect(body.details).toEqual({ subject: "payload", sizeBytes: DEFAULT_PAYLOAD_LIMIT + 1, limitBytes: DEFAULT_PAYLOAD_LIMIT })
    expectError(await getTimer(namespace, "too-big"), 404, "TIMER_NOT_FOUND")

    // Multi-byte characters count in bytes, not characters.
    const multiByte = await server.post(`${TIMERS}/create`, {
      namespace,
      id: "too-big",
      executeAt: FAR_FUTURE,
      callbackUrl: NOWHERE,
      payload: "é".repeat(DEFAULT_PAYLOAD_LIMIT / 2)
    })
    expectError(multiByte, 413, "PAYLOAD_TOO_LARGE")
  })

  it("an update with a payload over the limit is 413 and changes nothing", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({ namespace, id: "u", executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: "small" })
    const response = await server.post(`${TIMERS}/update`, {
      namespace,
      timerId: "u",
      callbackUrl: "http://127.0.0.1:9/changed",
      payload: "x".repeat(DEFAULT_PAYLOAD_LIMIT)
    })
    expectError(response, 413, "PAYLOAD_TOO_LARGE")
    expect((await getTimer(namespace, "u")).json).toEqual(created)
  })

  it("a request body far over the limit is 413 without being read", async () => {
    const response = await server.post(`${TIMERS}/create`, {
      namespace: "default",
      id: "rejected-huge",
      executeAt: FAR_FUTURE,
      callbackUrl: NOWHERE,
      payload: "x".repeat(300 * 1024)
    })
    const body = expectError(response, 413, "PAYLOAD_TOO_LARGE")
    expect((body.details as { subject: string }).subject).toBe("request body")
    expectError(await getTimer("default", "rejected-huge"), 404, "TIMER_NOT_FOUND")
  })
})

describe("with a small configured payload limit", () => {
  const LIMIT = 64
  const BODY_LIMIT = LIMIT + 64 * 1024
  const small = useTestServer({ TIMER_MAX_PAYLOAD_BYTES: String(LIMIT) })

  const timer = (id: string, payload: unknown) => ({ namespace: "default", id, executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload })

  it("a payload at the limit is accepted, one byte over is 413, measured on its compact JSON", async () => {
    const atLimit = { text: "y".repeat(LIMIT - "{\"text\":\"\"}".length) }
    expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(LIMIT)
    const accepted = await small.post(`${TIMERS}/create`, timer("at-limit", atLimit))
    expect(accepted.status, accepted.text).toBe(200)
    expect(accepted.json.payload).toEqual(atLimit)

    // Whitespace in the request does not count against the payload.
    const pretty = await small.post(`${TIMERS}/create`, JSON.stringify(timer("pretty", atLimit), null, 8))
    expect(pretty.status, pretty.text).toBe(200)

    const over = await small.post(`${TIMERS}/create`, timer("over", { text: atLimit.text + "y" }))
    const body = expectError(over, 413, "PAYLOAD_TOO_LARGE")
    expect(body.details).toEqual({ subject: "payload", sizeBytes: LIMIT + 1, limitBytes: LIMIT })

    const update = await small.post(`${TIMERS}/update`, { namespace: "default", timerId: "at-limit", payload: { text: atLimit.text + "y" } })
    expectError(update, 413, "PAYLOAD_TOO_LARGE")
    expect((await small.post(`${TIMERS}/get`, { namespace: "default", timerId: "at-limit" })).json).toEqual(accepted.json)
    expectError(await small.post(`${TIMERS}/get`, { namespace: "default", timerId: "over" }), 404, "TIMER_NOT_FOUND")
  })

  it("a request body just under the body limit is read (and judged on its fields); just over is 413", async () => {
    const bodyOfSize = (size: number) => {
      const skeleton = JSON.stringify({ ...timer("padded", 1), padding: "" })
      const text = JSON.stringify({ ...timer("padded", 1), padding: "z".repeat(size - skeleton.length) })
      expect(Buffer.byteLength(text)).toBe(size)
      return text
    }
    const under = await small.post(`${TIMERS}/create`, bodyOfSize(BODY_LIMIT))
    expect(expectInvalid(under, "padding")).toBe("is not a known field")
    const over = await small.post(`${TIMERS}/create`, bodyOfSize(BODY_LIMIT + 1))
    const body = expectError(over, 413, "PAYLOAD_TOO_LARGE")
    expect(body.details).toMatchObject({ subject: "request body", limitBytes: BODY_LIMIT })
  })

  it("a chunked body (no Content-Length) over the limit is 413 and the server keeps serving", async () => {
    const text = JSON.stringify({ ...timer("chunked", 1), padding: "z".repeat(BODY_LIMIT) })
    const encoded = new TextEncoder().encode(text)
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let offset = 0; offset < encoded.length; offset += 8192) controller.enqueue(encoded.slice(offset, offset + 8192))
        controller.close()
      }
    })
    const response = await fetch(`${small.baseUrl}${TIMERS}/create`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stream,
      duplex: "half"
    } as RequestInit)
    const answer = { status: response.status, headers: response.headers, text: await response.text(), json: undefined as any }
    answer.json = JSON.parse(answer.text)
    expectError(answer, 413, "PAYLOAD_TOO_LARGE")

    // A chunked body within the limit is read normally.
    const small2 = new TextEncoder().encode(JSON.stringify(timer("chunked-ok", 1)))
    const ok = await fetch(`${small.baseUrl}${TIMERS}/create`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(small2.slice(0, 10))
          controller.enqueue(small2.slice(10))
          controller.close()
        }
      }),
      duplex: "half"
    } as RequestInit)
    expect(ok.status, await ok.clone().text()).toBe(200)
    expect(((await ok.json()) as { id: string }).id).toBe("chunked-ok")
    expect((await small.get("/healthz")).status).toBe(200)
  })
})
