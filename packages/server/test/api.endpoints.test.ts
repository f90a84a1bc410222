/**
 * The HTTP API end to end in-process (the real layers of main.ts on a temp-dir
 * SQLite file, spoken to with fetch): health, readiness and documentation,
 * namespaces, and the happy paths of create, get, update and delete.
 */
import { describe, expect, it } from "vitest"
import { expectError, expectTimerShape, RFC3339_UTC_MILLIS } from "./support/expectations.js"
import { useTestServer } from "./support/testServer.js"
import { FAR_FUTURE, NAMESPACES, NOWHERE, timerApi, TIMERS } from "./support/timerApi.js"

const server = useTestServer()
const { createTimer, freshNamespace, getTimer, listAll } = timerApi(server)

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
