import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { decodeCommandMessage } from "../../src/broker/CommandDecoding.js"
import { DueTimeReached, makeDueTimeReached } from "../../src/broker/Envelope.js"

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value))

const schedule = {
  id: "cmd-1",
  type: "ScheduleTimer",
  tenantId: "t1",
  aggregateId: "sc1",
  correlationId: "corr-1",
  timestampMs: 1_767_225_600_000,
  payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId: "sc1", dueAt: "2026-01-01T00:00:05.000Z" }
}

const rejection = (value: unknown) => Either.getLeft(decodeCommandMessage(bytes(value)))

describe("decodeCommandMessage", () => {
  it("decodes ScheduleTimer, dueAt to epoch milliseconds, ignoring unknown fields", () => {
    const decoded = decodeCommandMessage(bytes({ ...schedule, extra: 1 }))
    expect(Either.getOrThrow(decoded)).toStrictEqual({
      id: "cmd-1",
      type: "ScheduleTimer",
      tenantId: "t1",
      aggregateId: "sc1",
      correlationId: "corr-1",
      timestampMs: 1_767_225_600_000,
      payload: { _tag: "ScheduleTimer", tenantId: "t1", serviceCallId: "sc1", dueAt: 1_767_225_605_000 }
    })
  })

  it("decodes CancelTimer", () => {
    const cancel = { id: "cmd-2", type: "CancelTimer", tenantId: "t1", timestampMs: 1, payload: { _tag: "CancelTimer", tenantId: "t1", serviceCallId: "sc1" } }
    expect(Either.getOrThrow(decodeCommandMessage(bytes(cancel)))).toStrictEqual(cancel)
  })

  it("rejects bytes that are not UTF-8 JSON", () => {
    expect(rejection("{not json")).toMatchObject({ _tag: "Some", value: { reason: "InvalidJson" } })
    expect(Either.getLeft(decodeCommandMessage(new Uint8Array([0x7b, 0xff, 0x7d])))).toMatchObject({ value: { reason: "InvalidJson" } })
  })

  it("rejects an unknown or missing type, naming it", () => {
    expect(rejection({ ...schedule, type: "FireNow" })).toMatchObject({
      value: { reason: "UnknownType", message: 'type must be one of ScheduleTimer, CancelTimer, got "FireNow"' }
    })
    expect(rejection({ id: "x" })).toMatchObject({ value: { reason: "UnknownType", message: expect.stringContaining("got none") } })
    expect(rejection([1, 2])).toMatchObject({ value: { reason: "InvalidCommand" } })
  })

  it("rejects a command that fails the schema, naming each wrong field", () => {
    const bad = { ...schedule, timestampMs: -1, payload: { ...schedule.payload, dueAt: "tomorrow", serviceCallId: "" } }
    const message = Either.getLeft(decodeCommandMessage(bytes(bad))).pipe((o) => (o._tag === "Some" ? o.value.message : ""))
    expect(message).toContain("timestampMs: timestampMs must not be negative")
    expect(message).toContain("payload.dueAt: must be an RFC 3339 timestamp")
    expect(message).toContain("payload.serviceCallId: serviceCallId must not be empty")
  })

  it("rejects a payload whose tag or tenant differs from the envelope's", () => {
    expect(rejection({ ...schedule, payload: { ...schedule.payload, _tag: "CancelTimer" } })).toMatchObject({ value: { reason: "InvalidCommand" } })
    expect(rejection({ ...schedule, payload: { ...schedule.payload, tenantId: "t2" } })).toMatchObject({
      value: { reason: "InvalidCommand", message: expect.stringContaining("differs from the envelope's tenantId") }
    })
  })
})

describe("makeDueTimeReached", () => {
  it("builds the event of the contract, which the strict schema accepts", () => {
    const event = makeDueTimeReached(
      { tenantId: "t1", serviceCallId: "sc1", commandId: "cmd-1", correlationId: "corr-1" },
      { id: "0190c2a4-0000-7000-8000-000000000000", reachedAt: 1_767_225_605_012, now: 1_767_225_605_020 }
    )
    expect(event).toStrictEqual({
      id: "0190c2a4-0000-7000-8000-000000000000",
      type: "DueTimeReached",
      tenantId: "t1",
      aggregateId: "sc1",
      correlationId: "corr-1",
      causationId: "cmd-1",
      timestampMs: 1_767_225_605_020,
      payload: { _tag: "DueTimeReached", tenantId: "t1", serviceCallId: "sc1", reachedAt: "2026-01-01T00:00:05.012Z" }
    })
    expect(Schema.decodeUnknownSync(DueTimeReached, { onExcessProperty: "error" })(event)).toStrictEqual(event)
  })
})
