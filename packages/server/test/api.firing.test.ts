/**
 * The HTTP API in-process with a local webhook receiver: a due timer is
 * delivered, shows as FIRED, and can no longer be updated.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, expectTimerShape, RFC3339_UTC_MILLIS } from "./support/expectations.js"
import { type Receiver, startReceiver, waitFor } from "./support/receiver.js"
import { useTestServer } from "./support/testServer.js"
import { FAR_FUTURE, timerApi, TIMERS } from "./support/timerApi.js"

const server = useTestServer()
const { createTimer, freshNamespace, getTimer, listAll } = timerApi(server)

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
