/**
 * The wire contract with brokers (NATS JetStream, Kafka): JSON envelopes
 * {id, type, tenantId, aggregateId?, correlationId?, causationId?,
 * timestampMs, payload}, the payload tagged with the envelope's type. These
 * are the envelopes of the seed ADR's project, so its orchestration module can
 * use this service as its timer unchanged.
 */
import { Schema } from "effect"
import { formatTimestamp, Timestamp } from "../Timestamp.js"

const NonEmpty = (what: string, max: number) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `${what} must not be empty` }),
    Schema.maxLength(max, { message: () => `${what} must be at most ${max} characters` })
  )

/** A tenant's id: 1 to 100 characters. */
export const TenantId = NonEmpty("tenantId", 100).annotations({ identifier: "TenantId" })

/** A service call's id (the aggregate a timer belongs to): 1 to 100 characters. */
export const ServiceCallId = NonEmpty("serviceCallId", 100).annotations({ identifier: "ServiceCallId" })

/** Epoch milliseconds, a non-negative integer. */
const EpochMillis = Schema.Number.pipe(
  Schema.int({ message: () => "timestampMs must be an integer" }),
  Schema.nonNegative({ message: () => "timestampMs must not be negative" })
)

/** The fields every envelope has besides its type and payload. */
const envelopeFields = {
  id: NonEmpty("id", 200),
  tenantId: TenantId,
  aggregateId: Schema.optional(Schema.String),
  correlationId: Schema.optional(Schema.String),
  causationId: Schema.optional(Schema.String),
  timestampMs: EpochMillis
}

/** The payload's tenant must be the envelope's. */
const sameTenant = <A extends { readonly tenantId: string; readonly payload: { readonly tenantId: string } }>(envelope: A) =>
  envelope.payload.tenantId === envelope.tenantId ||
  `payload.tenantId ${JSON.stringify(envelope.payload.tenantId)} differs from the envelope's tenantId ${JSON.stringify(envelope.tenantId)}`

/** Arm (or move, while it has not fired) the timer of a service call. */
export const ScheduleTimer = Schema.Struct({
  ...envelopeFields,
  type: Schema.Literal("ScheduleTimer"),
  payload: Schema.TaggedStruct("ScheduleTimer", {
    tenantId: TenantId,
    serviceCallId: ServiceCallId,
    dueAt: Timestamp
  })
}).pipe(Schema.filter(sameTenant)).annotations({ identifier: "ScheduleTimer" })

/** A decoded ScheduleTimer command; dueAt in epoch milliseconds. */
export type ScheduleTimer = typeof ScheduleTimer.Type

/** Cancel the timer of a service call, if it has not fired (our addition to the contract). */
export const CancelTimer = Schema.Struct({
  ...envelopeFields,
  type: Schema.Literal("CancelTimer"),
  payload: Schema.TaggedStruct("CancelTimer", {
    tenantId: TenantId,
    serviceCallId: ServiceCallId
  })
}).pipe(Schema.filter(sameTenant)).annotations({ identifier: "CancelTimer" })

/** A decoded CancelTimer command. */
export type CancelTimer = typeof CancelTimer.Type

/** A command the service takes from a broker. */
export const TimerCommand = Schema.Union(ScheduleTimer, CancelTimer)

/** A decoded command. */
export type TimerCommand = typeof TimerCommand.Type

/** The event published when a command-made timer is due. */
export const DueTimeReached = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("DueTimeReached"),
  tenantId: TenantId,
  aggregateId: ServiceCallId,
  correlationId: Schema.optional(Schema.String),
  causationId: Schema.String,
  timestampMs: EpochMillis,
  payload: Schema.TaggedStruct("DueTimeReached", {
    tenantId: TenantId,
    serviceCallId: ServiceCallId,
    reachedAt: Schema.String
  })
}).annotations({ identifier: "DueTimeReached" })

/** A DueTimeReached envelope as published. */
export type DueTimeReached = typeof DueTimeReached.Type

/** What a command-made timer keeps of the command that armed it last. */
export interface CommandOrigin {
  readonly tenantId: string
  readonly serviceCallId: string
  /** The id of the ScheduleTimer envelope: the event's causationId. */
  readonly commandId: string
  readonly correlationId?: string | undefined
}

/** The DueTimeReached envelope of a timer armed by `origin`, reached at `reachedAt` (epoch ms). */
export const makeDueTimeReached = (
  origin: CommandOrigin,
  reached: { readonly id: string; readonly reachedAt: number; readonly now: number }
): DueTimeReached => ({
  id: reached.id,
  type: "DueTimeReached",
  tenantId: origin.tenantId,
  aggregateId: origin.serviceCallId,
  ...(origin.correlationId === undefined ? {} : { correlationId: origin.correlationId }),
  causationId: origin.commandId,
  timestampMs: reached.now,
  payload: {
    _tag: "DueTimeReached",
    tenantId: origin.tenantId,
    serviceCallId: origin.serviceCallId,
    reachedAt: formatTimestamp(reached.reachedAt)
  }
})
