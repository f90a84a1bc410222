import { describe, expect, it } from "@effect/vitest"
import { crc32Of, shardIdOf, shardKey } from "../src/index.js"

/** A plain bitwise CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), independent of zlib. */
const referenceCrc32 = (text: string): number => {
  let crc = 0xffffffff
  for (const byte of Buffer.from(text, "utf8")) {
    crc ^= byte
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1
  }
  return (crc ^ 0xffffffff) >>> 0
}

describe("shard placement", () => {
  it("CRC32 of \"user-reminder-123\" is 0x5878D496", () => {
    expect(crc32Of("user-reminder-123")).toBe(0x5878d496)
  })

  it("shardIdOf(\"user-reminder-123\", 1024) is 150", () => {
    expect(shardIdOf("user-reminder-123", 1024)).toBe(150)
  })

  it("matches the CRC-32 check value and a reference implementation, on UTF-8 bytes", () => {
    expect(crc32Of("123456789")).toBe(0xcbf43926)
    expect(crc32Of("")).toBe(0)
    for (const id of ["a", "timer-1", "été", "日本語のタイマー", "emoji-🚀", "x".repeat(255)]) {
      expect(crc32Of(id)).toBe(referenceCrc32(id))
    }
    // Unsigned: a CRC with the top bit set stays positive.
    const high = ["a", "b", "c", "d", "e", "f", "g", "h"].map(crc32Of).find((crc) => crc >= 0x80000000)
    expect(high).toBeGreaterThan(0)
  })

  it("is the CRC modulo the number of shards, always within [0, numShards)", () => {
    for (const numShards of [1, 2, 7, 16, 1024, 4096]) {
      for (let i = 0; i < 200; i++) {
        const id = `timer-${i}`
        const shard = shardIdOf(id, numShards)
        expect(shard).toBe(referenceCrc32(id) % numShards)
        expect(shard).toBeGreaterThanOrEqual(0)
        expect(shard).toBeLessThan(numShards)
      }
    }
    expect(shardIdOf("anything", 1)).toBe(0)
  })

  it("spreads ids over the shards", () => {
    const counts = new Array<number>(16).fill(0)
    for (let i = 0; i < 1600; i++) counts[shardIdOf(`timer-${i}`, 16)]!++
    expect(Math.min(...counts)).toBeGreaterThan(50)
  })

  it("keys a shard as namespace/shardId", () => {
    expect(shardKey({ namespace: "billing", shardId: 7 })).toBe("billing/7")
  })
})
