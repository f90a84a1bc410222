/**
 * The errors of the timer service, each with what a caller needs to act on it.
 */
import { Schema } from "effect"

/** One bad field of a request, and why it is bad. */
export class FieldIssue extends Schema.Class<FieldIssue>("FieldIssue")({
  field: Schema.String,
  message: Schema.String
}) {}

/** A request that fails validation; nothing was changed. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  message: Schema.String,
  details: Schema.Array(FieldIssue)
}) {}

/** The namespace does not exist. */
export class NamespaceNotFound extends Schema.TaggedError<NamespaceNotFound>()("NamespaceNotFound", {
  namespace: Schema.String
}) {
  override get message() {
    return `namespace ${JSON.stringify(this.namespace)} does not exist`
  }
}

/** The namespace exists with another number of shards, which is fixed once created. */
export class NamespaceExists extends Schema.TaggedError<NamespaceExists>()("NamespaceExists", {
  namespace: Schema.String,
  numShards: Schema.Number,
  requestedNumShards: Schema.Number
}) {
  override get message() {
    return `namespace ${JSON.stringify(this.namespace)} exists with ${this.numShards} shards; numShards cannot change`
  }
}

/** No timer with this id in this namespace. */
export class TimerNotFound extends Schema.TaggedError<TimerNotFound>()("TimerNotFound", {
  namespace: Schema.String,
  timerId: Schema.String
}) {
  override get message() {
    return `timer ${JSON.stringify(this.timerId)} not found in namespace ${JSON.stringify(this.namespace)}`
  }
}

/** The timer is no longer SCHEDULED, so it cannot be updated; create it again to re-arm it. */
export class TimerNotPending extends Schema.TaggedError<TimerNotPending>()("TimerNotPending", {
  namespace: Schema.String,
  timerId: Schema.String,
  state: Schema.String
}) {
  override get message() {
    return `timer ${JSON.stringify(this.timerId)} is ${this.state}, not SCHEDULED; create it again to re-arm it`
  }
}

/** The payload, or the whole request body, is larger than its limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  subject: Schema.Literal("payload", "request body"),
  sizeBytes: Schema.Number,
  limitBytes: Schema.Number
}) {
  override get message() {
    return this.subject === "payload"
      ? `payload is ${this.sizeBytes} bytes encoded; the limit is ${this.limitBytes}`
      : `request body is over ${this.limitBytes} bytes (at least ${this.sizeBytes})`
  }
}

/** The store failed or could not be reached. */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message() {
    return `store operation ${this.operation} failed: ${String((this.cause as any)?.message ?? this.cause)}`
  }
}

/** Another owner claimed the shard: its version moved past the one this instance holds. */
export class ShardOwnershipLost extends Schema.TaggedError<ShardOwnershipLost>()("ShardOwnershipLost", {
  namespace: Schema.String,
  shardId: Schema.Number,
  heldVersion: Schema.Number
}) {
  override get message() {
    return `shard ${this.namespace}/${this.shardId} is no longer owned at version ${this.heldVersion}`
  }
}

/** Another instance is running on a store that allows only one (SQLite). */
export class InstanceConflict extends Schema.TaggedError<InstanceConflict>()("InstanceConflict", {
  otherId: Schema.String,
  otherHost: Schema.String,
  otherPid: Schema.Number
}) {
  override get message() {
    return `another instance (${this.otherId}, pid ${this.otherPid} on ${this.otherHost}) is running on this database; ` +
      "an SQLite database serves one instance: stop that one, or use PostgreSQL to run several"
  }
}
