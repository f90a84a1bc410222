/**
 * The API's paths, values the API tests share, and calls of the timer and
 * namespace API on a test server that assert the call succeeded.
 */
import { expect } from "vitest"
import type { TestServer } from "./testServer.js"

export const TIMERS = "/api/v1/timers"
export const NAMESPACES = "/api/v1/namespaces"

/** A callback URL nothing listens on; timers pointing here are never due in these tests. */
export const NOWHERE = "http://127.0.0.1:9/hook"
export const FAR_FUTURE = "2099-01-01T00:00:00.000Z"

/** Calls of one server's API. */
export const timerApi = (server: TestServer) => {
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

  return { freshNamespace, createTimer, getTimer, listAll }
}
