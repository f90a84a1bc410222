/**
 * Timestamps on the wire: RFC 3339 strings; inside the service: UTC epoch
 * milliseconds.
 */
import { ParseResult, Schema } from "effect"

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i

/** Formats epoch milliseconds as RFC 3339 UTC with milliseconds ("2026-01-01T09:00:00.000Z"). */
export const formatTimestamp = (millis: number): string => new Date(millis).toISOString()

/** An RFC 3339 timestamp with a time zone, decoded to UTC epoch milliseconds. */
export const Timestamp = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) => {
    const millis = RFC3339.test(text) ? Date.parse(text) : Number.NaN
    return Number.isFinite(millis)
      ? ParseResult.succeed(millis)
      : ParseResult.fail(
        new ParseResult.Type(ast, text, `must be an RFC 3339 timestamp with a time zone, such as "2026-01-01T09:00:00.000Z", got ${JSON.stringify(text)}`)
      )
  },
  encode: (millis, _, ast) =>
    Number.isFinite(millis) && Math.abs(millis) <= 8.64e15
      ? ParseResult.succeed(formatTimestamp(millis))
      : ParseResult.fail(new ParseResult.Type(ast, millis, "not a representable time"))
}).annotations({
  identifier: "Timestamp",
  description: "RFC 3339 timestamp; returned as UTC with milliseconds",
  examples: [1767258000000]
})
