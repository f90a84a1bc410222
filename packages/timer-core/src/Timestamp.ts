/**
 * Timestamps on the wire: RFC 3339 strings; inside the service: UTC epoch
 * milliseconds.
 */
import { ParseResult, Schema } from "effect"

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i

/** Epoch milliseconds of an RFC 3339 text, or NaN when it is malformed or names no real date ("2030-02-30"). */
const parseRfc3339 = (text: string): number => {
  const match = RFC3339.exec(text)
  if (match === null) return Number.NaN
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const calendar = new Date(Date.UTC(year, month - 1, day))
  const real = calendar.getUTCFullYear() === year && calendar.getUTCMonth() === month - 1 && calendar.getUTCDate() === day
  return real && hour < 24 && minute < 60 && second < 60 ? Date.parse(text) : Number.NaN
}

/** Formats epoch milliseconds as RFC 3339 UTC with milliseconds ("2026-01-01T09:00:00.000Z"). */
export const formatTimestamp = (millis: number): string => new Date(millis).toISOString()

/** An RFC 3339 timestamp with a time zone, decoded to UTC epoch milliseconds. */
export const Timestamp = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) => {
    const millis = parseRfc3339(text)
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
