/**
 * The HTTP API in-process: timers/list, its order, filters and paging by cursor.
 */
import { beforeAll, describe, expect, it } from "vitest"
import { expectError, expectTimerShape } from "./support/expectations.js"
import { type ApiResponse, useTestServer } from "./support/testServer.js"
import { NOWHERE, timerApi, TIMERS } from "./support/timerApi.js"

const server = useTestServer()
const { createTimer, freshNamespace, listAll } = timerApi(server)

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
