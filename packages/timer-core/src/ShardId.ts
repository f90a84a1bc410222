/**
 * Shard placement: shardId = CRC32 (IEEE, as zlib) of the timer id's UTF-8
 * bytes, modulo the namespace's number of shards.
 */
import { crc32 } from "node:zlib"

/** CRC32 (IEEE/zlib polynomial) of a string's UTF-8 bytes, as an unsigned 32-bit integer. */
export const crc32Of = (value: string): number => crc32(Buffer.from(value, "utf8")) >>> 0

/** The shard a timer id lives in, for a namespace with `numShards` shards. */
export const shardIdOf = (timerId: string, numShards: number): number => crc32Of(timerId) % numShards

/** A shard of one namespace: the unit of ownership and of firing. */
export interface ShardRef {
  readonly namespace: string
  readonly shardId: number
}

/** A stable string key for a shard, for maps and logs. */
export const shardKey = (shard: ShardRef): string => `${shard.namespace}/${shard.shardId}`
