/**
 * The HTTP API end to end in-process: the real layers of main.ts on a temp-dir
 * SQLite file, Node's HTTP server on an ephemeral port, spoken to with fetch.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, expectInvalid, expectTimerShape, RFC3339_UTC_MILLIS } from "./support/expectations.js"
import { type Receiver, startReceiver, waitFor } from "./support/receiver.js"
import { type ApiResponse, startTestServer, type TestServer } from "./support/testServer.js"

const TIMERS = "/api/v1/timers"
const NAMESPACES = "/api/v1/namespaces"
const DEFAULT_PAYLOAD_LIMIT = 100 * 1024

/** A callback URL nothing listens on; timers pointing here are never due in these tests. */
const NOWHERE = "http://127.0.0.1:9/hook"
const FAR_FUTURE = "2099-01-01T00:00:00.000Z"

const without = <T extends Record<string, unknown>>(value: T, ...keys: Array<string>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(value).filter(([key]) => !keys.includes(key)))

let server: TestServer
let namespaceCounter = 0

/** Creates a namespace of its own for one test, so tests do not see each other's timers. */
const freshNamespace = async (numShards = 2): Promise<string> => {
  const name = `ns-${process.pid}-${++namespaceCounter}`
  const response = await server.post(`${NAMESPACES}/create`, { name, numShards })
  expect(response.status, response.text).toBe(200)
  return name
}

const createTimer = async (body: Record<string, unknown>) => {
  const response = await server.post(`${TIMERS}/create`, body)
  expect(response.status, response.text).toBe(200)
  return response.json
}

const getTimer = (namespace: string, timerId: string) => server.post(`${TIMERS}/get`, { namespace, timerId })

const listAll = async (namespace: string, filters: Record<string, unknown> = {}) => {
  const response = await server.post(`${TIMERS}/list`, { namespace, limit: 1000, ...filters })
  expect(response.status, response.text).toBe(200)
  expect(response.json.nextCursor).toBeUndefined()
  return response.json.timers as Array<any>
}

beforeAll(async () => {
  server = await startTestServer()
})

afterAll(async () => {
  await server?.close()
})

describe("health, readiness and documentation", () => {
  it("GET /healthz answers 200 ok", async () => {
    const response = await server.get("/healthz")
    expect(response.status).toBe(200)
    expect(response.json).toEqual({ status: "ok" })
  })

  it("GET /readyz answers 200 ready with the count of owned shards", async () => {
    const response = await server.get("/readyz")
    expect(response.status).toBe(200)
    expect(Object.keys(response.json).sort()).toEqual(["shards", "status"])
    expect(response.json.status).toBe("ready")
    expect(Number.isInteger(response.json.shards)).toBe(true)
    // The default namespace's 16 shards at least; other tests may have made more.
    expect(response.json.shards).toBeGreaterThanOrEqual(16)
  })

  it("GET /api/v1/openapi.json is an OpenAPI 3 document of every endpoint whose references resolve", async () => {
    const response = await server.get("/api/v1/openapi.json")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    const doc = response.json
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/)
    expect(doc.info.title).toBeTypeOf("string")
    expect(doc.info.version).toBeTypeOf("string")
    for (
      const path of [
        "/api/v1/timers/create",
        "/api/v1/timers/get",
        "/api/v1/timers/update",
        "/api/v1/timers/delete",
        "/api/v1/timers/list",
        "/api/v1/namespaces/create",
        "/api/v1/namespaces/get",
        "/api/v1/namespaces/list"
      ]
    ) {
      expect(doc.paths[path]?.post, path).toBeDefined()
      expect(Object.keys(doc.paths[path].post.responses).length, path).toBeGreaterThan(0)
    }
    expect(doc.paths["/healthz"]?.get).toBeDefined()
    expect(doc.paths["/readyz"]?.get).toBeDefined()
    expect(doc.paths["/api/v1/timers/create"].post.requestBody.content["application/json"].schema).toBeDefined()
    // Every $ref points at a schema the document defines.
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]*"/g) ?? []
    expect(refs.length).toBeGreaterThan(0)
    for (const ref of refs) {
      const target = JSON.parse(`{${ref}}`).$ref as string
      expect(target).toMatch(/^#\/components\/schemas\//)
      expect(doc.components.schemas[target.slice("#/components/schemas/".length)], target).toBeDefined()
    }
  })

  it("GET /docs serves an HTML page", async () => {
    const response = await server.get("/docs")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/html/)
    expect(response.text).toMatch(/<html/i)
  })

  it("unknown routes answer 404 with a JSON error body", async () => {
    for (
      const response of [
        await server.post("/api/v1/timers/nope", {}),
        await server.post("/api/v2/timers/create", {}),
        await server.get("/nope"),
        // The API's calls are POSTs; a GET does not match them.
        await server.get("/api/v1/timers/create")
      ]
    ) {
      const body = expectError(response, 404, "NOT_FOUND")
      expect(body.details).toBeUndefined()
    }
  })
})

describe("namespaces", () => {
  it("list contains the default namespace with 16 shards, with or without a body", async () => {
    for (const response of [await server.post(`${NAMESPACES}/list`, {}), await server.post(`${NAMESPACES}/list`)]) {
      expect(response.status, response.text).toBe(200)
      expect(Object.keys(response.json)).toEqual(["namespaces"])
      const found = (response.json.namespaces as Array<any>).find((namespace) => namespace.name === "default")
      expect(found).toBeDefined()
      expect(found.numShards).toBe(16)
      expect(found.createdAt).toMatch(RFC3339_UTC_MILLIS)
    }
  })

  it("create answers 200, again 200 with the same namespace, with another numShards 409 NAMESPACE_EXISTS", async () => {
    const name = `created-${process.pid}`
    const created = await server.post(`${NAMESPACES}/create`, { name, numShards: 3 })
    expect(created.status, created.text).toBe(200)
    expect(Object.keys(created.json).sort()).toEqual(["createdAt", "name", "numShards"])
    expect(created.json.name).toBe(name)
    expect(created.json.numShards).toBe(3)
    expect(created.json.createdAt).toMatch(RFC3339_UTC_MILLIS)

    const again = await server.post(`${NAMESPACES}/create`, { name, numShards: 3 })
    expect(again.status, again.text).toBe(200)
    expect(again.json).toEqual(created.json)

    const conflict = await server.post(`${NAMESPACES}/create`, { name, numShards: 4 })
    const body = expectError(conflict, 409, "NAMESPACE_EXISTS")
    expect(body.details).toEqual({ namespace: name, numShards: 3, requestedNumShards: 4 })

    // The rejected request changed nothing.
    const read = await server.post(`${NAMESPACES}/get`, { name })
    expect(read.status).toBe(200)
    expect(read.json).toEqual(created.json)

    const list = await server.post(`${NAMESPACES}/list`, {})
    expect((list.json.namespaces as Array<any>).filter((namespace) => namespace.name === name)).toEqual([created.json])
  })

  it("a created namespace takes timers at once", async () => {
    const namespace = await freshNamespace(1)
    const timer = await createTimer({ namespace, id: "t", executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    expect(timer.namespace).toBe(namespace)
  })

  it("get answers the namespace, 404 NAMESPACE_NOT_FOUND for an unknown one", async () => {
    const response = await server.post(`${NAMESPACES}/get`, { name: "default" })
    expect(response.status).toBe(200)
    expect(response.json.name).toBe("default")
    expect(response.json.numShards).toBe(16)

    const missing = await server.post(`${NAMESPACES}/get`, { name: "no-such-namespace" })
    const body = expectError(missing, 404, "NAMESPACE_NOT_FOUND")
    expect(body.details).toEqual({ namespace: "no-such-namespace" })
  })
})

describe("timers: happy paths", () => {
  it("create answers the timer in the documented shape: UTC timestamps with milliseconds, default timeout 10", async () => {
    const namespace = await freshNamespace()
    const before = Date.now()
    const response = await server.post(`${TIMERS}/create`, {
      namespace,
      id: "shape",
      executeAt: "2030-01-01T10:00:00+02:00",
      callbackUrl: "https://example.com/hook?x=1"
    })
    expect(response.status, response.text).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    const timer = response.json
    expectTimerShape(timer)
    expect(Object.keys(timer).sort()).toEqual(
      ["attempts", "callbackTimeoutSeconds", "callbackUrl", "createdAt", "executeAt", "id", "namespace", "state", "updatedAt"]
    )
    expect(timer).toMatchObject({
      id: "shape",
      namespace,
      executeAt: "2030-01-01T08:00:00.000Z",
      callbackUrl: "https://example.com/hook?x=1",
      callbackTimeoutSeconds: 10,
      state: "SCHEDULED",
      attempts: 0
    })
    expect(timer.createdAt).toBe(timer.updatedAt)
    expect(Date.parse(timer.createdAt)).toBeGreaterThanOrEqual(before - 1000)
    expect(Date.parse(timer.createdAt)).toBeLessThanOrEqual(Date.now() + 1000)
  })

  it("create keeps payload, retryPolicy and callbackTimeoutSeconds; sub-millisecond digits are cut", async () => {
    const namespace = await freshNamespace()
    const payload = { order: 42, tags: ["a", "b"], nested: { ok: true, nothing: null }, text: "héllo ✓" }
    const timer = await createTimer({
      namespace,
      id: "full",
      executeAt: "2030-06-01T12:30:45.123456Z",
      callbackUrl: NOWHERE,
      payload,
      retryPolicy: { maxAttempts: 3, initialInterval: "1500ms", backoffMultiplier: 1.5, maxInterval: "1m", maxAttemptsDuration: "1h" },
      callbackTimeoutSeconds: 60
    })
    expectTimerShape(timer)
    expect(timer.executeAt).toBe("2030-06-01T12:30:45.123Z")
    expect(timer.payload).toEqual(payload)
    expect(timer.retryPolicy).toEqual({
      maxAttempts: 3,
      initialInterval: "1500ms",
      backoffMultiplier: 1.5,
      maxInterval: "1m",
      maxAttemptsDuration: "1h"
    })
    expect(timer.callbackTimeoutSeconds).toBe(60)

    // Any JSON value is a payload, null and scalars included.
    for (const [id, value] of [["null", null], ["number", 7], ["string", "s"], ["array", [1, 2]]] as const) {
      const other = await createTimer({ namespace, id, executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: value })
      expect(other.payload).toEqual(value)
      expect((await getTimer(namespace, id)).json.payload).toEqual(value)
    }
  })

  it("create again with the same id replaces the timer (an upsert): one timer, same createdAt", async () => {
    const namespace = await freshNamespace()
    const first = await createTimer({
      namespace,
      id: "upsert",
      executeAt: "2030-01-01T00:00:00Z",
      callbackUrl: NOWHERE,
      payload: { v: 1 },
      callbackTimeoutSeconds: 5
    })
    const second = await createTimer({ namespace, id: "upsert", executeAt: "2031-01-01T00:00:00Z", callbackUrl: "http://127.0.0.1:9/other" })
    expect(second.id).toBe("upsert")
    expect(second.executeAt).toBe("2031-01-01T00:00:00.000Z")
    expect(second.callbackUrl).toBe("http://127.0.0.1:9/other")
    // Fields left out of the second create are not carried over from the first.
    expect(second.payload).toBeUndefined()
    expect(second.callbackTimeoutSeconds).toBe(10)
    expect(second.createdAt).toBe(first.createdAt)
    expect(Date.parse(second.updatedAt)).toBeGreaterThanOrEqual(Date.parse(first.updatedAt))

    const timers = await listAll(namespace)
    expect(timers.map((timer) => timer.id)).toEqual(["upsert"])
    expect(timers[0]).toEqual(second)
    expect((await getTimer(namespace, "upsert")).json).toEqual(second)
  })

  it("an id of 255 characters is accepted everywhere", async () => {
    const namespace = await freshNamespace()
    const id = "i".repeat(255)
    const timer = await createTimer({ namespace, id, executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    expect(timer.id).toBe(id)
    expect((await getTimer(namespace, id)).json.id).toBe(id)
    expect((await server.post(`${TIMERS}/update`, { namespace, timerId: id, payload: 1 })).status).toBe(200)
    expect((await listAll(namespace)).map((t) => t.id)).toEqual([id])
    expect((await server.post(`${TIMERS}/delete`, { namespace, timerId: id })).status).toBe(204)
  })

  it("a callbackUrl of 2048 characters is accepted", async () => {
    const namespace = await freshNamespace()
    const base = "http://127.0.0.1:9/"
    const url = base + "p".repeat(2048 - base.length)
    const timer = await createTimer({ namespace, id: "long-url", executeAt: FAR_FUTURE, callbackUrl: url })
    expect(timer.callbackUrl).toBe(url)
  })

  it("get answers the timer; 404 TIMER_NOT_FOUND and NAMESPACE_NOT_FOUND otherwise", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({ namespace, id: "g", executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: [1] })
    const response = await getTimer(namespace, "g")
    expect(response.status).toBe(200)
    expect(response.json).toEqual(created)

    const missing = expectError(await getTimer(namespace, "nope"), 404, "TIMER_NOT_FOUND")
    expect(missing.details).toEqual({ namespace, timerId: "nope" })
    const noNamespace = expectError(await getTimer("no-such-namespace", "g"), 404, "NAMESPACE_NOT_FOUND")
    expect(noNamespace.details).toEqual({ namespace: "no-such-namespace" })
  })

  it("update changes the fields given and keeps the others", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({
      namespace,
      id: "u",
      executeAt: "2030-01-01T00:00:00Z",
      callbackUrl: NOWHERE,
      payload: { v: 1 },
      retryPolicy: { maxAttempts: 2 },
      callbackTimeoutSeconds: 5
    })

    const payloadOnly = await server.post(`${TIMERS}/update`, { namespace, timerId: "u", payload: { v: 2 } })
    expect(payloadOnly.status, payloadOnly.text).toBe(200)
    expectTimerShape(payloadOnly.json)
    expect(payloadOnly.json).toEqual({ ...created, payload: { v: 2 }, updatedAt: payloadOnly.json.updatedAt })

    const everything = await server.post(`${TIMERS}/update`, {
      namespace,
      timerId: "u",
      executeAt: "2032-03-04T05:06:07.890-01:00",
      callbackUrl: "https://example.org/new",
      payload: "new",
      retryPolicy: { maxAttempts: 7, initialInterval: "2s" },
      callbackTimeoutSeconds: 1
    })
    expect(everything.status, everything.text).toBe(200)
    expect(everything.json).toEqual({
      ...created,
      executeAt: "2032-03-04T06:06:07.890Z",
      callbackUrl: "https://example.org/new",
      payload: "new",
      retryPolicy: { maxAttempts: 7, initialInterval: "2s" },
      callbackTimeoutSeconds: 1,
      updatedAt: everything.json.updatedAt
    })
    expect(everything.json.createdAt).toBe(created.createdAt)
    expect(everything.json.updatedAt).toMatch(RFC3339_UTC_MILLIS)
    expect(Date.parse(everything.json.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.updatedAt))
    expect((await getTimer(namespace, "u")).json).toEqual(everything.json)

    const missing = expectError(await server.post(`${TIMERS}/update`, { namespace, timerId: "nope", payload: 1 }), 404, "TIMER_NOT_FOUND")
    expect(missing.details).toEqual({ namespace, timerId: "nope" })
    expectError(
      await server.post(`${TIMERS}/update`, { namespace: "no-such-namespace", timerId: "u", payload: 1 }),
      404,
      "NAMESPACE_NOT_FOUND"
    )
  })

  it("delete answers 204 with no body, then 404", async () => {
    const namespace = await freshNamespace()
    await createTimer({ namespace, id: "d", executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    await createTimer({ namespace, id: "keep", executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    const deleted = await server.post(`${TIMERS}/delete`, { namespace, timerId: "d" })
    expect(deleted.status).toBe(204)
    expect(deleted.text).toBe("")

    expectError(await server.post(`${TIMERS}/delete`, { namespace, timerId: "d" }), 404, "TIMER_NOT_FOUND")
    expectError(await getTimer(namespace, "d"), 404, "TIMER_NOT_FOUND")
    expectError(await server.post(`${TIMERS}/delete`, { namespace: "no-such-namespace", timerId: "d" }), 404, "NAMESPACE_NOT_FOUND")
    expect((await listAll(namespace)).map((timer) => timer.id)).toEqual(["keep"])
  })
})

describe("timers: list", () => {
  // executeAt of each id; equal times are ordered by id. Offsets are normalised.
  const plan: Array<[string, string]> = [
    ["c", "2030-01-01T10:00:00Z"],
    ["a", "2030-01-01T12:00:00+02:00"],
    ["b", "2030-01-01T09:00:00Z"],
    ["d", "2030-01-01T11:00:00Z"],
    ["e", "2030-01-01T10:30:00Z"],
    ["aa", "2030-01-01T10:00:00.000Z"],
    ["f", "2030-01-01T10:30:00Z"]
  ]
  const ordered = ["b", "a", "aa", "c", "e", "f", "d"]
  let namespace: string

  beforeAll(async () => {
    namespace = await freshNamespace(4)
    for (const [id, executeAt] of plan) await createTimer({ namespace, id, executeAt, callbackUrl: NOWHERE })
  })

  it("orders timers by executeAt then id", async () => {
    const response = await server.post(`${TIMERS}/list`, { namespace })
    expect(response.status).toBe(200)
    expect(Object.keys(response.json)).toEqual(["timers"])
    const timers = response.json.timers as Array<any>
    expect(timers.map((timer) => timer.id)).toEqual(ordered)
    for (const timer of timers) expectTimerShape(timer)
    expect(timers[1].executeAt).toBe("2030-01-01T10:00:00.000Z")
  })

  it("filters by executeAtFrom (inclusive) and executeAtTo (exclusive)", async () => {
    const between = await listAll(namespace, { executeAtFrom: "2030-01-01T10:00:00Z", executeAtTo: "2030-01-01T11:00:00Z" })
    expect(between.map((timer) => timer.id)).toEqual(["a", "aa", "c", "e", "f"])
    const from = await listAll(namespace, { executeAtFrom: "2030-01-01T12:30:00+02:00" })
    expect(from.map((timer) => timer.id)).toEqual(["e", "f", "d"])
    const to = await listAll(namespace, { executeAtTo: "2030-01-01T10:00:00.001Z" })
    expect(to.map((timer) => timer.id)).toEqual(["b", "a", "aa", "c"])
    expect(await listAll(namespace, { executeAtFrom: "2031-01-01T00:00:00Z" })).toEqual([])
  })

  it("filters by state", async () => {
    expect((await listAll(namespace, { state: "SCHEDULED" })).map((timer) => timer.id)).toEqual(ordered)
    expect(await listAll(namespace, { state: "FIRED" })).toEqual([])
    expect(await listAll(namespace, { state: "FAILED" })).toEqual([])
  })

  it("limit bounds the page and gives a nextCursor when more remain", async () => {
    const page = await server.post(`${TIMERS}/list`, { namespace, limit: 3 })
    expect(page.status).toBe(200)
    expect(page.json.timers.map((timer: any) => timer.id)).toEqual(ordered.slice(0, 3))
    expect(page.json.nextCursor).toBeTypeOf("string")

    const exact = await server.post(`${TIMERS}/list`, { namespace, limit: ordered.length })
    expect(exact.json.timers).toHaveLength(ordered.length)
    expect(exact.json.nextCursor).toBeUndefined()

    const max = await server.post(`${TIMERS}/list`, { namespace, limit: 1000 })
    expect(max.status).toBe(200)
    expect(max.json.timers).toHaveLength(ordered.length)
  })

  it.each([1, 2, 3, 6])("paging with limit %i through nextCursor returns every timer exactly once, in order", async (limit) => {
    const seen: Array<string> = []
    let cursor: string | undefined
    let pages = 0
    do {
      const response: ApiResponse = await server.post(`${TIMERS}/list`, {
        namespace,
        limit,
        ...(cursor === undefined ? {} : { cursor })
      })
      expect(response.status, response.text).toBe(200)
      const ids = (response.json.timers as Array<any>).map((timer) => timer.id)
      expect(ids.length).toBeLessThanOrEqual(limit)
      seen.push(...ids)
      cursor = response.json.nextCursor
      pages++
      expect(pages).toBeLessThanOrEqual(ordered.length + 1)
    } while (cursor !== undefined)
    expect(seen).toEqual(ordered)
    expect(pages).toBe(Math.ceil(ordered.length / limit))
  })

  it("paging combines with filters", async () => {
    const seen: Array<string> = []
    let cursor: string | undefined
    do {
      const response: ApiResponse = await server.post(`${TIMERS}/list`, {
        namespace,
        state: "SCHEDULED",
        executeAtFrom: "2030-01-01T10:00:00Z",
        executeAtTo: "2030-01-01T11:00:00Z",
        limit: 2,
        ...(cursor === undefined ? {} : { cursor })
      })
      expect(response.status, response.text).toBe(200)
      seen.push(...(response.json.timers as Array<any>).map((timer) => timer.id))
      cursor = response.json.nextCursor
    } while (cursor !== undefined)
    expect(seen).toEqual(["a", "aa", "c", "e", "f"])
  })

  it("an unknown namespace is 404 NAMESPACE_NOT_FOUND", async () => {
    const body = expectError(await server.post(`${TIMERS}/list`, { namespace: "no-such-namespace" }), 404, "NAMESPACE_NOT_FOUND")
    expect(body.details).toEqual({ namespace: "no-such-namespace" })
  })
})

describe("timers: firing", () => {
  let receiver: Receiver

  beforeAll(async () => {
    receiver = await startReceiver()
  })

  afterAll(async () => {
    await receiver?.close()
  })

  it("a due timer is delivered and becomes FIRED; update then answers 409 TIMER_NOT_PENDING and changes nothing", async () => {
    const namespace = await freshNamespace()
    await createTimer({ namespace, id: "later", executeAt: FAR_FUTURE, callbackUrl: receiver.url })
    const executeAt = new Date(Date.now() + 200).toISOString()
    await createTimer({ namespace, id: "soon", executeAt, callbackUrl: receiver.url, payload: { hello: "world" } })

    const fired = await waitFor("the timer to be FIRED", async () => {
      const response = await getTimer(namespace, "soon")
      return response.json.state === "FIRED" ? response.json : undefined
    })
    expectTimerShape(fired)
    expect(fired.attempts).toBe(1)
    expect(fired.executedAt).toMatch(RFC3339_UTC_MILLIS)
    expect(Date.parse(fired.executedAt)).toBeGreaterThanOrEqual(Date.parse(executeAt))
    expect(fired.lastError).toBeUndefined()

    const calls = receiver.calls.filter((call) => JSON.parse(call.body).namespace === namespace)
    expect(calls).toHaveLength(1)
    expect(calls[0]!.method).toBe("POST")
    expect(JSON.parse(calls[0]!.body)).toMatchObject({ namespace, timerId: "soon", executeAt, payload: { hello: "world" }, attempt: 1 })

    const rejected = await server.post(`${TIMERS}/update`, { namespace, timerId: "soon", executeAt: FAR_FUTURE, payload: 2 })
    const body = expectError(rejected, 409, "TIMER_NOT_PENDING")
    expect(body.details).toEqual({ namespace, timerId: "soon", state: "FIRED" })
    expect((await getTimer(namespace, "soon")).json).toEqual(fired)

    expect((await listAll(namespace, { state: "FIRED" })).map((timer) => timer.id)).toEqual(["soon"])
    expect((await listAll(namespace, { state: "SCHEDULED" })).map((timer) => timer.id)).toEqual(["later"])
    expect(await listAll(namespace, { state: "FAILED" })).toEqual([])

    // Creating it again re-arms it.
    const rearmed = await createTimer({ namespace, id: "soon", executeAt: FAR_FUTURE, callbackUrl: receiver.url })
    expect(rearmed.state).toBe("SCHEDULED")
    expect(rearmed.attempts).toBe(0)
    expect(rearmed.executedAt).toBeUndefined()
  })
})

describe("bad input", () => {
  const createBody = (overrides: Record<string, unknown> = {}) => ({
    namespace: "default",
    id: "rejected-create",
    executeAt: "2030-01-01T10:00:00Z",
    callbackUrl: NOWHERE,
    ...overrides
  })
  const updateBody = (overrides: Record<string, unknown> = {}) => ({ namespace: "default", timerId: "rejected-update", ...overrides })
  const selection = (overrides: Record<string, unknown> = {}) => ({ namespace: "default", timerId: "rejected-get", ...overrides })
  const listBody = (overrides: Record<string, unknown> = {}) => ({ namespace: "default", ...overrides })
  const longUrl = "http://127.0.0.1:9/" + "p".repeat(2049 - "http://127.0.0.1:9/".length)

  const cases: Array<[string, string, unknown, string, RegExp?]> = [
    // timers/create
    ["create: id is a number", "timers/create", createBody({ id: 5 }), "id"],
    ["create: id is empty", "timers/create", createBody({ id: "" }), "id"],
    ["create: id has 256 characters", "timers/create", createBody({ id: "r".repeat(256) }), "id", /255/],
    ["create: namespace is missing", "timers/create", without(createBody(), "namespace"), "namespace", /is required/],
    ["create: id is missing", "timers/create", without(createBody(), "id"), "id", /is required/],
    ["create: executeAt is missing", "timers/create", without(createBody(), "executeAt"), "executeAt", /is required/],
    ["create: callbackUrl is missing", "timers/create", without(createBody(), "callbackUrl"), "callbackUrl", /is required/],
    ["create: namespace is not a valid name", "timers/create", createBody({ namespace: "Not Valid" }), "namespace"],
    ["create: executeAt has no time zone", "timers/create", createBody({ executeAt: "2030-01-01T10:00:00" }), "executeAt", /RFC 3339/],
    ["create: executeAt is garbage", "timers/create", createBody({ executeAt: "tomorrow" }), "executeAt", /RFC 3339/],
    ["create: executeAt has month 13", "timers/create", createBody({ executeAt: "2030-13-01T10:00:00Z" }), "executeAt"],
    ["create: executeAt is a number", "timers/create", createBody({ executeAt: 1893492000000 }), "executeAt"],
    ["create: executeAt is February 30th", "timers/create", createBody({ executeAt: "2030-02-30T10:00:00Z" }), "executeAt", /RFC 3339/],
    ["create: callbackUrl is ftp", "timers/create", createBody({ callbackUrl: "ftp://example.com/hook" }), "callbackUrl", /http/],
    ["create: callbackUrl is relative", "timers/create", createBody({ callbackUrl: "/hook" }), "callbackUrl"],
    ["create: callbackUrl is not a URL", "timers/create", createBody({ callbackUrl: "not a url" }), "callbackUrl"],
    ["create: callbackUrl has 2049 characters", "timers/create", createBody({ callbackUrl: longUrl }), "callbackUrl", /2048/],
    ["create: callbackUrl is a number", "timers/create", createBody({ callbackUrl: 42 }), "callbackUrl"],
    ["create: callbackTimeoutSeconds is 0", "timers/create", createBody({ callbackTimeoutSeconds: 0 }), "callbackTimeoutSeconds", /1 and 60/],
    ["create: callbackTimeoutSeconds is 61", "timers/create", createBody({ callbackTimeoutSeconds: 61 }), "callbackTimeoutSeconds", /1 and 60/],
    ["create: callbackTimeoutSeconds is 1.5", "timers/create", createBody({ callbackTimeoutSeconds: 1.5 }), "callbackTimeoutSeconds", /integer/],
    ["create: callbackTimeoutSeconds is a string", "timers/create", createBody({ callbackTimeoutSeconds: "10" }), "callbackTimeoutSeconds"],
    ["create: retryPolicy.maxAttempts is 0", "timers/create", createBody({ retryPolicy: { maxAttempts: 0 } }), "retryPolicy.maxAttempts"],
    ["create: retryPolicy.maxAttempts is 1.5", "timers/create", createBody({ retryPolicy: { maxAttempts: 1.5 } }), "retryPolicy.maxAttempts"],
    [
      "create: retryPolicy.initialInterval is 5x",
      "timers/create",
      createBody({ retryPolicy: { initialInterval: "5x" } }),
      "retryPolicy.initialInterval",
      /duration/
    ],
    ["create: retryPolicy.maxInterval is 0s", "timers/create", createBody({ retryPolicy: { maxInterval: "0s" } }), "retryPolicy.maxInterval"],
    [
      "create: retryPolicy.maxAttemptsDuration is a number",
      "timers/create",
      createBody({ retryPolicy: { maxAttemptsDuration: 5 } }),
      "retryPolicy.maxAttemptsDuration"
    ],
    [
      "create: retryPolicy.backoffMultiplier is 0.5",
      "timers/create",
      createBody({ retryPolicy: { backoffMultiplier: 0.5 } }),
      "retryPolicy.backoffMultiplier"
    ],
    ["create: retryPolicy has an unknown field", "timers/create", createBody({ retryPolicy: { jitter: true } }), "retryPolicy.jitter", /is not a known field/],
    ["create: retryPolicy is a string", "timers/create", createBody({ retryPolicy: "fast" }), "retryPolicy"],
    ["create: an unknown field", "timers/create", createBody({ color: "blue" }), "color", /^is not a known field$/],
    ["create: state is not settable", "timers/create", createBody({ state: "FIRED" }), "state", /^is not a known field$/],
    ["create: the body is an array", "timers/create", [createBody()], "(body)"],
    ["create: the body is a string", "timers/create", "\"text\"", "(body)"],
    ["create: the body is null", "timers/create", "null", "(body)"],
    // timers/update
    ["update: timerId is missing", "timers/update", without(updateBody(), "timerId"), "timerId", /is required/],
    ["update: id instead of timerId", "timers/update", { namespace: "default", id: "x" }, "id", /is not a known field/],
    ["update: timerId is a number", "timers/update", updateBody({ timerId: 5 }), "timerId"],
    ["update: timerId has 256 characters", "timers/update", updateBody({ timerId: "r".repeat(256) }), "timerId"],
    ["update: namespace is missing", "timers/update", without(updateBody(), "namespace"), "namespace", /is required/],
    ["update: executeAt has no time zone", "timers/update", updateBody({ executeAt: "2030-01-01 10:00:00" }), "executeAt"],
    ["update: callbackUrl is relative", "timers/update", updateBody({ callbackUrl: "hook" }), "callbackUrl"],
    ["update: callbackTimeoutSeconds is 61", "timers/update", updateBody({ callbackTimeoutSeconds: 61 }), "callbackTimeoutSeconds"],
    ["update: retryPolicy.maxAttempts is 0", "timers/update", updateBody({ retryPolicy: { maxAttempts: 0 } }), "retryPolicy.maxAttempts"],
    ["update: an unknown field", "timers/update", updateBody({ state: "SCHEDULED" }), "state", /^is not a known field$/],
    // timers/get and timers/delete
    ...(["get", "delete"] as const).flatMap((op): Array<[string, string, unknown, string, RegExp?]> => [
      [`${op}: timerId is missing`, `timers/${op}`, without(selection(), "timerId"), "timerId", /is required/],
      [`${op}: timerId is a number`, `timers/${op}`, selection({ timerId: 5 }), "timerId"],
      [`${op}: timerId has 256 characters`, `timers/${op}`, selection({ timerId: "r".repeat(256) }), "timerId"],
      [`${op}: namespace is missing`, `timers/${op}`, without(selection(), "namespace"), "namespace", /is required/],
      [`${op}: namespace is not a valid name`, `timers/${op}`, selection({ namespace: "UPPER" }), "namespace"],
      [`${op}: id instead of timerId`, `timers/${op}`, { namespace: "default", id: "x" }, "id", /is not a known field/]
    ]),
    // timers/list
    ["list: namespace is missing", "timers/list", {}, "namespace", /is required/],
    ["list: limit is 0", "timers/list", listBody({ limit: 0 }), "limit", /1 and 1000/],
    ["list: limit is 1001", "timers/list", listBody({ limit: 1001 }), "limit", /1 and 1000/],
    ["list: limit is 1.5", "timers/list", listBody({ limit: 1.5 }), "limit", /integer/],
    ["list: limit is a string", "timers/list", listBody({ limit: "10" }), "limit"],
    ["list: state is unknown", "timers/list", listBody({ state: "DONE" }), "state"],
    ["list: executeAtFrom is garbage", "timers/list", listBody({ executeAtFrom: "yesterday" }), "executeAtFrom"],
    ["list: executeAtTo has no time zone", "timers/list", listBody({ executeAtTo: "2030-01-01T10:00:00" }), "executeAtTo"],
    ["list: cursor is a number", "timers/list", listBody({ cursor: 5 }), "cursor"],
    ["list: cursor is garbage", "timers/list", listBody({ cursor: "not a cursor!" }), "cursor"],
    ["list: cursor is base64 of another shape", "timers/list", listBody({ cursor: Buffer.from("{\"a\":1}").toString("base64url") }), "cursor"],
    ["list: cursor is base64 of a short array", "timers/list", listBody({ cursor: Buffer.from("[1]").toString("base64url") }), "cursor"],
    ["list: an unknown field", "timers/list", listBody({ offset: 10 }), "offset", /^is not a known field$/],
    // namespaces/create
    ["namespaces/create: name is missing", "namespaces/create", { numShards: 2 }, "name", /is required/],
    ["namespaces/create: numShards is missing", "namespaces/create", { name: "rejected-ns" }, "numShards", /is required/],
    ["namespaces/create: numShards is a string", "namespaces/create", { name: "rejected-ns", numShards: "x" }, "numShards"],
    ["namespaces/create: numShards is 0", "namespaces/create", { name: "rejected-ns", numShards: 0 }, "numShards", /1 and 4096/],
    ["namespaces/create: numShards is 4097", "namespaces/create", { name: "rejected-ns", numShards: 4097 }, "numShards", /1 and 4096/],
    ["namespaces/create: numShards is 1.5", "namespaces/create", { name: "rejected-ns", numShards: 1.5 }, "numShards", /integer/],
    ["namespaces/create: name has capitals", "namespaces/create", { name: "Rejected", numShards: 2 }, "name"],
    ["namespaces/create: name has 65 characters", "namespaces/create", { name: "n".repeat(65), numShards: 2 }, "name"],
    ["namespaces/create: name is empty", "namespaces/create", { name: "", numShards: 2 }, "name"],
    ["namespaces/create: name is a number", "namespaces/create", { name: 5, numShards: 2 }, "name"],
    ["namespaces/create: an unknown field", "namespaces/create", { name: "rejected-ns", numShards: 2, replicas: 3 }, "replicas", /^is not a known field$/],
    // namespaces/get
    ["namespaces/get: name is missing", "namespaces/get", {}, "name", /is required/],
    ["namespaces/get: name is a number", "namespaces/get", { name: 5 }, "name"],
    ["namespaces/get: name is not valid", "namespaces/get", { name: "a b" }, "name"],
    ["namespaces/get: an unknown field", "namespaces/get", { name: "default", numShards: 16 }, "numShards", /^is not a known field$/]
  ]

  it.each(cases)("%s → 400 INVALID_INPUT naming the field", async (_label, path, body, field, message) => {
    const response = await server.post(`/api/v1/${path}`, body)
    const issue = expectInvalid(response, field)
    if (message !== undefined) expect(issue).toMatch(message)
    // The summary names the field too.
    expect(response.json.message).toContain(field)
  })

  it("every bad field of one request is reported", async () => {
    const response = await server.post(`${TIMERS}/create`, {
      namespace: "default",
      id: 5,
      executeAt: "2030-01-01T10:00:00",
      callbackUrl: "ftp://x",
      callbackTimeoutSeconds: 0,
      retryPolicy: { maxAttempts: 0, initialInterval: "5x" },
      extra: 1
    })
    expectInvalid(response, "id")
    const fields = (response.json.details as Array<{ field: string }>).map((detail) => detail.field).sort()
    expect(fields).toEqual(
      ["callbackTimeoutSeconds", "callbackUrl", "executeAt", "extra", "id", "retryPolicy.initialInterval", "retryPolicy.maxAttempts"]
    )
  })

  const bodyEndpoints = [
    "timers/create",
    "timers/get",
    "timers/update",
    "timers/delete",
    "timers/list",
    "namespaces/create",
    "namespaces/get"
  ]

  it.each(bodyEndpoints)("%s: an empty body is 400 INVALID_INPUT", async (path) => {
    for (const response of [await server.post(`/api/v1/${path}`), await server.post(`/api/v1/${path}`, "   \n")]) {
      expect(expectInvalid(response, "(body)")).toMatch(/empty/)
    }
  })

  it.each(bodyEndpoints)("%s: a body that is not JSON is 400 INVALID_INPUT", async (path) => {
    expect(expectInvalid(await server.post(`/api/v1/${path}`, "{\"namespace\": \"default\","), "(body)")).toMatch(/not valid JSON/)
    const plain = await server.post(`/api/v1/${path}`, "hello", { headers: { "content-type": "text/plain" } })
    expect(expectInvalid(plain, "(body)")).toMatch(/not valid JSON/)
  })

  it("no rejected request above created or changed anything", async () => {
    const timers = await listAll("default")
    expect(timers.filter((timer) => timer.id.startsWith("rejected"))).toEqual([])
    expectError(await server.post(`${NAMESPACES}/get`, { name: "rejected-ns" }), 404, "NAMESPACE_NOT_FOUND")
  })
})

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

describe("rejected requests change nothing", () => {
  it("a rejected create leaves the existing timer as it was", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({ namespace, id: "t", executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: { v: 1 } })
    for (
      const bad of [
        { callbackTimeoutSeconds: 61 },
        { executeAt: "2030-01-01T10:00:00" },
        { retryPolicy: { maxAttempts: 0 } },
        { unknown: true }
      ]
    ) {
      const response = await server.post(`${TIMERS}/create`, {
        namespace,
        id: "t",
        executeAt: "2031-01-01T00:00:00Z",
        callbackUrl: "http://127.0.0.1:9/changed",
        payload: { v: 2 },
        ...bad
      })
      expectError(response, 400, "INVALID_INPUT")
    }
    expect((await getTimer(namespace, "t")).json).toEqual(created)
    expect(await listAll(namespace)).toEqual([created])
  })

  it("a rejected create of a new id creates nothing", async () => {
    const namespace = await freshNamespace()
    const response = await server.post(`${TIMERS}/create`, {
      namespace,
      id: "new",
      executeAt: FAR_FUTURE,
      callbackUrl: "ftp://nope"
    })
    expectError(response, 400, "INVALID_INPUT")
    expectError(await getTimer(namespace, "new"), 404, "TIMER_NOT_FOUND")
    expect(await listAll(namespace)).toEqual([])
  })

  it("a rejected update leaves the timer as it was, even when other fields were valid", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({
      namespace,
      id: "t",
      executeAt: FAR_FUTURE,
      callbackUrl: NOWHERE,
      payload: { v: 1 },
      retryPolicy: { maxAttempts: 2 }
    })
    for (
      const bad of [
        { executeAt: "soon" },
        { callbackTimeoutSeconds: 0 },
        { retryPolicy: { initialInterval: "5x" } },
        { callbackUrl: "ftp://x" },
        { id: "t" }
      ]
    ) {
      const response = await server.post(`${TIMERS}/update`, {
        namespace,
        timerId: "t",
        payload: { v: 2 },
        callbackUrl: "http://127.0.0.1:9/changed",
        ...bad
      })
      expectError(response, 400, "INVALID_INPUT")
    }
    expect((await getTimer(namespace, "t")).json).toEqual(created)
    expect(await listAll(namespace)).toEqual([created])
  })

  it("a rejected delete or get leaves the timer in place", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({ namespace, id: "t", executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    expectError(await server.post(`${TIMERS}/delete`, { namespace, timerId: "t", extra: 1 }), 400, "INVALID_INPUT")
    expectError(await server.post(`${TIMERS}/delete`, "{"), 400, "INVALID_INPUT")
    expect((await getTimer(namespace, "t")).json).toEqual(created)
  })
})

describe("with a small configured payload limit", () => {
  const LIMIT = 64
  const BODY_LIMIT = LIMIT + 64 * 1024
  let small: TestServer

  beforeAll(async () => {
    small = await startTestServer({ TIMER_MAX_PAYLOAD_BYTES: String(LIMIT) })
  })

  afterAll(async () => {
    await small?.close()
  })

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
