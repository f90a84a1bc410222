/**
 * Broker message bytes to commands. A message that cannot be a command is
 * rejected with a reason that says what is wrong, for the dead-letter
 * destination; it never throws.
 */
import { Either, ParseResult, Schema } from "effect"
import { CancelTimer, ScheduleTimer, type TimerCommand } from "./Envelope.js"

/** Why a message was not taken as a command. */
export type RejectionReason = "InvalidJson" | "UnknownType" | "InvalidCommand"

/** A message that is not a command, and why. */
export interface Rejection {
  readonly reason: RejectionReason
  /** Says what is wrong, naming the field. */
  readonly message: string
}

/** The command types the service takes. */
export const COMMAND_TYPES: ReadonlyArray<string> = ["ScheduleTimer", "CancelTimer"]

const options = { errors: "all", onExcessProperty: "ignore" } as const
const decoders: Record<string, (json: unknown) => Either.Either<TimerCommand, ParseResult.ParseError>> = {
  ScheduleTimer: Schema.decodeUnknownEither(ScheduleTimer, options),
  CancelTimer: Schema.decodeUnknownEither(CancelTimer, options)
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** Decodes one message's bytes: a command, or why it is not one. */
export const decodeCommandMessage = (bytes: Uint8Array): Either.Either<TimerCommand, Rejection> => {
  let json: unknown
  try {
    json = JSON.parse(utf8.decode(bytes))
  } catch (error) {
    return Either.left({ reason: "InvalidJson", message: `not UTF-8 JSON: ${error instanceof Error ? error.message : String(error)}` })
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return Either.left({ reason: "InvalidCommand", message: "the message must be a JSON object (an envelope)" })
  }
  const type = (json as { readonly type?: unknown }).type
  if (typeof type !== "string" || !COMMAND_TYPES.includes(type)) {
    return Either.left({
      reason: "UnknownType",
      message: `type must be one of ${COMMAND_TYPES.join(", ")}, got ${type === undefined ? "none" : JSON.stringify(type)}`
    })
  }
  return Either.mapLeft(decoders[type]!(json), (error) => ({
    reason: "InvalidCommand",
    message: ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => `${issue.path.length === 0 ? "envelope" : issue.path.join(".")}: ${issue.message}`)
      .join("; ")
  }))
}
