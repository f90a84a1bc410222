/**
 * Assertions on the API's answers: error bodies of exactly {error, message,
 * details?}, INVALID_INPUT details naming the bad field, timers in the
 * documented shape.
 */
import { expect } from "vitest"
import type { ApiResponse } from "./testServer.js"

/** RFC 3339 UTC with milliseconds, as the API writes every timestamp. */
export const RFC3339_UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** The keys a timer may have, required ones first. */
const TIMER_REQUIRED_KEYS = [
  "id",
  "namespace",
  "executeAt",
  "callbackUrl",
  "callbackTimeoutSeconds",
  "state",
  "attempts",
  "createdAt",
  "updatedAt"
]
const TIMER_OPTIONAL_KEYS = ["payload", "retryPolicy", "executedAt", "lastError"]

/** A detail of an INVALID_INPUT answer. */
export interface FieldIssue {
  readonly field: string
  readonly message: string
}

/** Asserts an error answer: status, JSON, exactly {error, message, details?}, the code. Returns the body. */
export const expectError = (
  response: ApiResponse,
  status: number,
  code: string
): { error: string; message: string; details?: unknown } => {
  const context = `${response.status} ${response.text.slice(0, 500)}`
  expect(response.status, context).toBe(status)
  expect(response.headers.get("content-type") ?? "", context).toMatch(/^application\/json/)
  expect(response.json, context).toBeTypeOf("object")
  expect(response.json, context).not.toBeNull()
  const keys = Object.keys(response.json).sort()
  expect(keys, context).toEqual(keys.includes("details") ? ["details", "error", "message"] : ["error", "message"])
  expect(response.json.error, context).toBe(code)
  expect(response.json.message, context).toBeTypeOf("string")
  expect(response.json.message.length, context).toBeGreaterThan(0)
  return response.json
}

/**
 * Asserts a 400 INVALID_INPUT whose details are {field, message} entries, one
 * of them naming `field`. Returns that entry's message.
 */
export const expectInvalid = (response: ApiResponse, field: string): string => {
  const body = expectError(response, 400, "INVALID_INPUT")
  const context = response.text.slice(0, 1000)
  expect(Array.isArray(body.details), context).toBe(true)
  const details = body.details as Array<FieldIssue>
  expect(details.length, context).toBeGreaterThan(0)
  for (const detail of details) {
    expect(Object.keys(detail).sort(), context).toEqual(["field", "message"])
    expect(detail.field, context).toBeTypeOf("string")
    expect(detail.message, context).toBeTypeOf("string")
    // An optional field's union must not leak a second, meaningless issue.
    expect(detail.message, context).not.toMatch(/^Expected undefined, actual/)
  }
  const issue = details.find((detail) => detail.field === field)
  expect(issue, `no detail names ${field}: ${context}`).toBeDefined()
  return issue!.message
}

/** Asserts a timer in the documented shape, timestamps RFC 3339 UTC with milliseconds. */
export const expectTimerShape = (timer: any) => {
  expect(timer).toBeTypeOf("object")
  const keys = Object.keys(timer)
  for (const key of TIMER_REQUIRED_KEYS) expect(keys, `missing ${key}`).toContain(key)
  for (const key of keys) expect([...TIMER_REQUIRED_KEYS, ...TIMER_OPTIONAL_KEYS], `unexpected ${key}`).toContain(key)
  expect(timer.id).toBeTypeOf("string")
  expect(timer.namespace).toBeTypeOf("string")
  expect(timer.callbackUrl).toBeTypeOf("string")
  expect(Number.isInteger(timer.callbackTimeoutSeconds)).toBe(true)
  expect(["SCHEDULED", "FIRED", "FAILED"]).toContain(timer.state)
  expect(Number.isInteger(timer.attempts)).toBe(true)
  for (const key of ["executeAt", "createdAt", "updatedAt", "executedAt"]) {
    if (key in timer) expect(timer[key], key).toMatch(RFC3339_UTC_MILLIS)
  }
  if ("lastError" in timer) expect(timer.lastError).toBeTypeOf("string")
}
