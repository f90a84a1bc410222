/**
 * Reads and validates a JSON request body: a body that is too large is
 * PAYLOAD_TOO_LARGE, one that is not JSON or fails the schema is INVALID_INPUT
 * naming each bad field.
 */
import { HttpIncomingMessage, type HttpServerRequest } from "@effect/platform"
import { FieldIssue, InvalidInput, PayloadTooLarge } from "@timer/core"
import { Effect, Either, Option, ParseResult, Schema } from "effect"

const issueMessage = (issue: ParseResult.ArrayFormatterIssue): string =>
  issue._tag === "Missing" ? "is required" : issue._tag === "Unexpected" ? "is not a known field" : issue.message

/** Turns a schema failure into InvalidInput with one FieldIssue per bad field. */
export const invalidInputOf = (error: ParseResult.ParseError): InvalidInput => {
  const details = ParseResult.ArrayFormatter.formatErrorSync(error).map(
    (issue) => new FieldIssue({ field: issue.path.length === 0 ? "(body)" : issue.path.join("."), message: issueMessage(issue) })
  )
  const summary = details.map((d) => `${d.field} ${d.message}`).join("; ")
  return new InvalidInput({ message: `invalid request: ${summary}`, details })
}

/** Decodes `body` with `schema`, reporting every bad field and rejecting unknown ones. */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, body: unknown): Either.Either<A, InvalidInput> =>
  Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(body).pipe(
    Either.mapLeft(invalidInputOf)
  )

/** Reads the request body as JSON (at most `maxBytes`) and decodes it with `schema`. */
export const decodeBody = <A, I>(request: HttpServerRequest.HttpServerRequest, schema: Schema.Schema<A, I>, maxBytes: number) =>
  Effect.gen(function*() {
    const declared = Number(request.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(declared) && declared > maxBytes) {
      return yield* new PayloadTooLarge({ sizeBytes: declared, limitBytes: maxBytes })
    }
    const text = yield* request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(maxBytes)),
      Effect.mapError(() => new PayloadTooLarge({ sizeBytes: maxBytes + 1, limitBytes: maxBytes }))
    )
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
