/**
 * How a webhook's answer is read: the status code and the CallbackResponse
 * body {ok, nextExecuteAt?} decide the outcome of the attempt.
 */
import { DeliveryOutcome, Timestamp } from "@timer/core"
import { Either, Schema } from "effect"

const decodeTimestamp = Schema.decodeUnknownEither(Timestamp)

/** Reads a Retry-After header (seconds or an HTTP date) as milliseconds from `now`. */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined || value.trim() === "") return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  // An HTTP date (RFC 9110 IMF-fixdate, e.g. "Wed, 21 Oct 2026 07:28:00 GMT"); anything else is ignored.
  if (!/^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(trimmed)) return undefined
  const date = Date.parse(trimmed)
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined
}

const snippet = (body: string) => (body.length > 200 ? `${body.slice(0, 200)}…` : body)

/**
 * The outcome of an answered attempt:
 * - 2xx with an empty body, with {ok: true}, or with a body that is no CallbackResponse: Delivered;
 * - 2xx with {ok: false, nextExecuteAt}: Reschedule; {ok: false} alone: Retryable;
 * - 408, 429, 5xx: Retryable (Retry-After honoured on 429 and 503);
 * - any other status: Permanent.
 */
export const classifyResponse = (
  status: number,
  body: string,
  retryAfterHeader: string | undefined,
  now: number
): DeliveryOutcome => {
  if (status >= 200 && status < 300) {
    if (body.trim() === "") return DeliveryOutcome.delivered
    let parsed: unknown
    try {
      parsed = JSON.parse(body)
    } catch {
      return DeliveryOutcome.delivered
    }
    if (typeof parsed !== "object" || parsed === null || (parsed as { ok?: unknown }).ok !== false) {
      return DeliveryOutcome.delivered
    }
    const next = (parsed as { nextExecuteAt?: unknown }).nextExecuteAt
    if (next === undefined || next === null) return DeliveryOutcome.retryable(`callback answered ok: false (HTTP ${status})`)
    return Either.match(decodeTimestamp(next), {
      onLeft: () =>
        DeliveryOutcome.retryable(`callback answered ok: false with an invalid nextExecuteAt ${JSON.stringify(next)}`),
      onRight: (at) => DeliveryOutcome.reschedule(at)
    })
  }
  if (status === 408 || status === 429 || status >= 500) {
    const retryAfterMs = status === 429 || status === 503 ? parseRetryAfter(retryAfterHeader, now) : undefined
    return DeliveryOutcome.retryable(`HTTP ${status}${body.trim() === "" ? "" : `: ${snippet(body)}`}`, retryAfterMs)
  }
  return DeliveryOutcome.permanent(`HTTP ${status}${body.trim() === "" ? "" : `: ${snippet(body)}`} (not retried)`)
}
