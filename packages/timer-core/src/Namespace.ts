/**
 * Namespaces scope timer ids and fix the number of shards their timers are
 * spread over.
 */
import { Schema } from "effect"

/** A namespace name: 1 to 64 characters of a-z, 0-9, '.', '_' and '-'. */
export const NamespaceName = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9._-]{1,64}$/, {
    message: () => "must be 1 to 64 characters of a-z, 0-9, '.', '_' or '-'"
  }),
  Schema.annotations({ identifier: "NamespaceName", description: "1 to 64 characters of a-z 0-9 . _ -" })
)

/** The number of shards of a namespace: an integer from 1 to 4096. */
export const NumShards = Schema.Number.pipe(
  Schema.int({ message: () => "must be an integer" }),
  Schema.between(1, 4096, { message: () => "must be between 1 and 4096" }),
  Schema.annotations({ identifier: "NumShards", description: "Number of shards, 1 to 4096, fixed once created" })
)

/** A namespace as stored and returned. */
export class Namespace extends Schema.Class<Namespace>("Namespace")({
  name: NamespaceName,
  numShards: NumShards,
  createdAt: Schema.Number
}) {}

/** The namespace that exists after the first start. */
export const DEFAULT_NAMESPACE = "default"
