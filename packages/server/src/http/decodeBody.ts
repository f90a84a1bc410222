/**
 * Reads and validates a JSON request body: a body that is too large is
 * PAYLOAD_TOO_LARGE, one that is not JSON or fails the schema is INVALID_INPUT
 * naming each bad field.
 */
import type { HttpServerRequest } from "@effect/platform"
import { FieldIssue, InvalidInput, PayloadTooLarge } from "@timer/core"
import { Effect, Either, ParseResult, Schema, Stream } from "effect"

const issueMessage = (issue: ParseResult.ArrayFormatterIssue): string =>
  issue._tag === "Missing" ? "is required" : issue._tag === "Unexpected" ? "is not a known field" : issue.message

const fieldOf = (issue: ParseResult.ArrayFormatterIssue): string =>
  issue.path.length === 0 ? "(body)" : issue.path.join(".")

/**
 * An optional field decodes as a union of its schema and `undefined`, so a bad
 * value there also yields "Expected undefined, actual …" at the same path. That
 * second issue says nothing useful; it is dropped when another issue names the
 * same field or one inside it.
 */
const isUndefinedAlternative = (issue: ParseResult.ArrayFormatterIssue, all: ReadonlyArray<ParseResult.ArrayFormatterIssue>) =>
  issue._tag === "Type" &&
  issue.message.startsWith("Expected undefined, actual ") &&
  all.some((other) =>
    other !== issue &&
    other.path.length >= issue.path.length &&
    issue.path.every((key, i) => other.path[i] === key) &&
    !other.message.startsWith("Expected undefined, actual ")
  )

/** Turns a schema failure into InvalidInput with one FieldIssue per bad field. */
export const invalidInputOf = (error: ParseResult.ParseError): InvalidInput => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const details = issues.filter((issue) => !isUndefinedAlternative(issue, issues)).map(
    (issue) => new FieldIssue({ field: fieldOf(issue), message: issueMessage(issue) })
  )
  const summary = details.map((d) => `${d.field} ${d.message}`).join("; ")
  return new InvalidInput({ message: `invalid request: ${summary}`, details })
}

/** Decodes `body` with `schema`, reporting every bad field and rejecting unknown ones. */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, body: unknown): Either.Either<A, InvalidInput> =>
  Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(body).pipe(
    Either.mapLeft(invalidInputOf)
  )

/**
 * Reads the body as UTF-8 text, keeping at most `maxBytes`. A body without a
 * Content-Length that grows past the limit is read to its end and dropped, so
 * the 413 answer reaches the client: cutting the read short (as the platform's
 * max-body-size option does) destroys the socket before any answer is written.
 */
const readText = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  request.stream.pipe(
    Stream.runFold({ chunks: [] as Array<Uint8Array>, size: 0 }, (acc, chunk) => {
      acc.size += chunk.length
      if (acc.size <= maxBytes) acc.chunks.push(chunk)
      return acc
    }),
    Effect.mapError((error) =>
      new InvalidInput({
        message: `request body could not be read: ${error.message}`,
        details: [new FieldIssue({ field: "(body)", message: "could not be read" })]
      })
    ),
    Effect.filterOrFail(
      (acc) => acc.size <= maxBytes,
      (acc) => new PayloadTooLarge({ subject: "request body", sizeBytes: acc.size, limitBytes: maxBytes })
    ),
    Effect.map((acc) => Buffer.concat(acc.chunks).toString("utf8"))
  )

/** Reads the request body as JSON (at most `maxBytes`) and decodes it with `schema`. */
export const decodeBody = <A, I>(request: HttpServerRequest.HttpServerRequest, schema: Schema.Schema<A, I>, maxBytes: number) =>
  Effect.gen(function*() {
    const declared = Number(request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > maxBytes) {
      return yield* new PayloadTooLarge({ subject: "request body", sizeBytes: declared, limitBytes: maxBytes })
    }
    const text = yield* readText(request, maxBytes)
    let json: unknown
    try {
      json = text.trim() === "" ? undefined : JSON.parse(text)
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error)
      return yield* new InvalidInput({
        message: `request body is not valid JSON: ${reason}`,
        details: [new FieldIssue({ field: "(body)", message: `is not valid JSON: ${reason}` })]
      })
    }
    if (json === undefined) {
      return yield* new InvalidInput({
        message: "request body is empty; a JSON object is required",
        details: [new FieldIssue({ field: "(body)", message: "is empty; a JSON object is required" })]
      })
    }
    return yield* decodeWith(schema, json)
  })
