/**
 * Durations written as strings such as "500ms", "30s", "5m", "1h" or "7d".
 */
import { Option, ParseResult, Schema } from "effect"

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/

/** Parses "30s" into milliseconds, or None when the text is not a duration. */
export const parseDurationMillis = (text: string): Option.Option<number> => {
  const match = PATTERN.exec(text.trim())
  if (match === null) return Option.none()
  return Option.some(Math.round(Number(match[1]) * UNITS[match[2]!]!))
}

/** Formats milliseconds as the largest whole unit that divides them ("90s", "5m", "250ms"). */
export const formatDurationMillis = (millis: number): string => {
  for (const unit of ["d", "h", "m", "s"] as const) {
    const size = UNITS[unit]!
    if (millis >= size && millis % size === 0) return `${millis / size}${unit}`
  }
  return `${millis}ms`
}

/** The longest duration accepted: 365 days. */
export const MAX_DURATION_MILLIS = 365 * UNITS.d!

/** A duration string decoded to a positive number of milliseconds, at most 365 days. */
export const DurationMillis = Schema.transformOrFail(Schema.String, Schema.Number, {
  strict: true,
  decode: (text, _, ast) =>
    Option.match(parseDurationMillis(text), {
      onNone: () =>
        ParseResult.fail(
          new ParseResult.Type(ast, text, `must be a duration such as "500ms", "30s", "5m", "1h" or "7d", got ${JSON.stringify(text)}`)
        ),
      onSome: (millis) =>
        millis <= 0
          ? ParseResult.fail(new ParseResult.Type(ast, text, "must be greater than zero"))
          : millis > MAX_DURATION_MILLIS
          ? ParseResult.fail(new ParseResult.Type(ast, text, "must be at most 365d"))
          : ParseResult.succeed(millis)
    }),
  encode: (millis) => ParseResult.succeed(formatDurationMillis(millis))
}).annotations({ identifier: "Duration", description: "A duration such as \"500ms\", \"30s\", \"5m\", \"1h\" or \"7d\"" })
