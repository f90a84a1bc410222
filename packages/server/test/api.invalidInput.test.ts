/**
 * The HTTP API in-process: every kind of bad input is 400 INVALID_INPUT naming
 * the field, and a rejected request changes nothing.
 */
import { describe, expect, it } from "vitest"
import { expectError, expectInvalid } from "./support/expectations.js"
import { useTestServer } from "./support/testServer.js"
import { FAR_FUTURE, NAMESPACES, NOWHERE, timerApi, TIMERS } from "./support/timerApi.js"

const without = <T extends Record<string, unknown>>(value: T, ...keys: Array<string>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(value).filter(([key]) => !keys.includes(key)))

const server = useTestServer()
const { createTimer, freshNamespace, getTimer, listAll } = timerApi(server)

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
    ["create: callbackUrl is missing", "timers/create", without(createBody(), "callbackUrl"), "callbackUrl", /is required \(or natsSubject/],
    ["create: callbackUrl and natsSubject both", "timers/create", createBody({ natsSubject: "a.b" }), "natsSubject", /one target/],
    ["create: natsSubject has a wildcard", "timers/create", without(createBody({ natsSubject: "orders.*" }), "callbackUrl"), "natsSubject", /wildcards/],
    ["create: natsSubject has a space", "timers/create", without(createBody({ natsSubject: "a b" }), "callbackUrl"), "natsSubject", /NATS subject/],
    ["create: natsSubject and kafkaTopic both", "timers/create", without(createBody({ natsSubject: "a.b", kafkaTopic: "a.b" }), "callbackUrl"), "kafkaTopic", /one target/],
    ["create: kafkaTopic has a slash", "timers/create", without(createBody({ kafkaTopic: "orders/reminders" }), "callbackUrl"), "kafkaTopic", /Kafka topic/],
    ["create: kafkaTopic without a Kafka connection", "timers/create", without(createBody({ kafkaTopic: "orders.reminders" }), "callbackUrl"), "kafkaTopic", /TIMER_KAFKA_BROKERS/],
    ["create: natsSubject without a NATS connection", "timers/create", without(createBody({ natsSubject: "orders.reminders" }), "callbackUrl"), "natsSubject", /TIMER_NATS_URL/],
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
    ["create: retryPolicy.maxInterval is over 365d", "timers/create", createBody({ retryPolicy: { maxInterval: "366d" } }), "retryPolicy.maxInterval", /365d/],
    [
      "create: retryPolicy.maxAttemptsDuration overflows",
      "timers/create",
      createBody({ retryPolicy: { maxAttemptsDuration: `${"9".repeat(400)}d` } }),
      "retryPolicy.maxAttemptsDuration",
      /365d/
    ],
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
    ["update: callbackUrl and natsSubject both", "timers/update", updateBody({ callbackUrl: NOWHERE, natsSubject: "a.b" }), "natsSubject", /one target/],
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

describe("rejected requests change nothing", () => {
  it("a payload nested too deeply for JSON is INVALID_INPUT on payload, and nothing is written", async () => {
    const head = JSON.stringify({ namespace: "default", id: "too-deep", executeAt: FAR_FUTURE, callbackUrl: NOWHERE })
    const response = await server.post(`${TIMERS}/create`, `${head.slice(0, -1)},"payload":${nestedJson(60_000)}}`)
    const body = expectError(response, 400, "INVALID_INPUT")
    expect(JSON.stringify(body.details)).toContain("payload")
    expectError(await getTimer("default", "too-deep"), 404, "TIMER_NOT_FOUND")
  })

  it("a rejected create leaves the existing timer as it was", async () => {
    const namespace = await freshNamespace()
    const created = await createTimer({ namespace, id: "t", executeAt: FAR_FUTURE, callbackUrl: NOWHERE, payload: { v: 1 } })
    for (
      const bad of [
        { callbackTimeoutSeconds: 61 },
        { executeAt: "2030-01-01T10:00:00" },
        { retryPolicy: { maxAttempts: 0 } },
        { retryPolicy: { maxAttemptsDuration: "100000000000000000000000d" } },
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

/** The JSON text of an array nested `depth` deep: small as text, too deep to encode recursively. */
function nestedJson(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth)
}
