import { describe, expect, it } from "@effect/vitest"
import { type AssignmentPlan, planAssignment, shardKey, type ShardLease, type ShardState, targetShare } from "../src/index.js"

/** Instance ids that sort differently from the order they are listed in. */
const IDS = ["node-7", "node-2", "alpha", "zulu", "node-10", "b", "node-1"]

/** Every shard of `namespaces` (name and count), never claimed. */
const freshShards = (namespaces: ReadonlyArray<readonly [string, number]>): Array<ShardState> =>
  namespaces.flatMap(([namespace, count]) =>
    Array.from({ length: count }, (_, shardId) => ({ namespace, shardId, version: 0, ownerId: undefined }))
  )

/** A small deterministic generator (mulberry32), for the order instances act in. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/**
 * A shared shard table, as the store keeps it, and instances that plan from it
 * and act on it the way the engine does: releases clear the owner at the
 * lease's version, claims succeed only at the version seen.
 */
class Cluster {
  readonly table = new Map<string, ShardState>()
  readonly held = new Map<string, Map<string, ShardLease>>()
  /** Claims the planner asked for of a shard a live other instance owned when it looked. */
  readonly takenFromLive: Array<string> = []
  rounds = 0

  constructor(shards: ReadonlyArray<ShardState>, instances: ReadonlyArray<string> = []) {
    for (const shard of shards) this.table.set(shardKey(shard), shard)
    for (const id of instances) this.join(id)
  }

  get live(): ReadonlyArray<string> {
    return Array.from(this.held.keys())
  }

  join(id: string) {
    this.held.set(id, new Map())
  }

  /** The instance stops without giving anything back (killed): it is no longer live. */
  die(id: string) {
    this.held.delete(id)
  }

  /** The instance restarts under the same id: it holds nothing, the table still names it. */
  restart(id: string) {
    this.held.set(id, new Map())
  }

  shards(): ReadonlyArray<ShardState> {
    return Array.from(this.table.values())
  }

  plan(me: string, shards = this.shards()): AssignmentPlan {
    return planAssignment({ me, live: this.live, shards, held: new Set(this.held.get(me)!.keys()) })
  }

  claim(me: string, shard: ShardState, seenVersion: number): boolean {
    const current = this.table.get(shardKey(shard))
    if (current === undefined || current.version !== seenVersion) return false
    const lease: ShardLease = { namespace: shard.namespace, shardId: shard.shardId, version: seenVersion + 1, ownerId: me }
    this.table.set(shardKey(shard), { ...lease })
    this.held.get(me)!.set(shardKey(shard), lease)
    return true
  }

  release(me: string, shard: ShardState) {
    const lease = this.held.get(me)!.get(shardKey(shard))!
    expect(lease).toBeDefined()
    this.held.get(me)!.delete(shardKey(shard))
    const current = this.table.get(shardKey(shard))!
    if (current.version === lease.version) this.table.set(shardKey(shard), { ...current, ownerId: undefined })
  }

  /**
   * One round: every live instance plans from the same snapshot of the table
   * (the worst case: they all see the same free shards), then they act one
   * after the other in a shuffled order. Returns whether anything was planned.
   */
  round(next: () => number = Math.random): boolean {
    this.rounds++
    const snapshot = this.shards()
    const live = new Set(this.live)
    const plans = this.live.map((me) => [me, this.plan(me, snapshot)] as const)
    for (const [me, plan] of plans) {
      for (const shard of plan.claim) {
        if (shard.ownerId !== undefined && shard.ownerId !== me && live.has(shard.ownerId)) {
          this.takenFromLive.push(`${me} <- ${shard.ownerId}: ${shardKey(shard)}`)
        }
      }
    }
    const order = plans.map((entry) => [next(), entry] as const).sort((a, b) => a[0] - b[0]).map(([, entry]) => entry)
    for (const [me, plan] of order) {
      for (const shard of plan.release) this.release(me, shard)
      for (const shard of plan.claim) this.claim(me, shard, shard.version)
    }
    this.checkConsistent()
    return plans.some(([, plan]) => plan.release.length > 0 || plan.claim.length > 0)
  }

  /** Runs rounds until one plans nothing; returns how many rounds acted. */
  converge(seed = 1, maxRounds = 50): number {
    const next = random(seed)
    for (let acted = 0; acted < maxRounds; acted++) {
      if (!this.round(next)) return acted
    }
    throw new Error(`no convergence within ${maxRounds} rounds`)
  }

  /** No shard is held twice, and every held lease is the shard's current claim. */
  checkConsistent() {
    const holders = new Map<string, string>()
    for (const [id, leases] of this.held) {
      for (const [key, lease] of leases) {
        expect(holders.get(key), `${key} held by ${holders.get(key)} and ${id}`).toBeUndefined()
        holders.set(key, id)
        expect(this.table.get(key)).toStrictEqual({ ...lease })
      }
    }
  }

  /** Every live instance holds its target, and the held shards are all the shards. */
  checkBalanced() {
    const total = this.table.size
    let sum = 0
    for (const [id, leases] of this.held) {
      expect(leases.size, `shards of ${id}`).toBe(targetShare(id, this.live, total))
      sum += leases.size
    }
    expect(sum).toBe(total)
    expect(this.takenFromLive).toStrictEqual([])
  }

  count(id: string): number {
    return this.held.get(id)?.size ?? 0
  }
}

describe("targetShare", () => {
  it("over any live set, the targets sum to the shard count and differ by at most one", () => {
    const violations: Array<unknown> = []
    for (let instances = 1; instances <= IDS.length; instances++) {
      const live = IDS.slice(0, instances)
      for (let shardCount = 1; shardCount <= 4096; shardCount++) {
        const targets = live.map((me) => targetShare(me, live, shardCount))
        const sum = targets.reduce((a, b) => a + b, 0)
        const even = targets.every((t) => t === Math.floor(shardCount / instances) || t === Math.ceil(shardCount / instances))
        if (sum !== shardCount || Math.max(...targets) - Math.min(...targets) > 1 || !even) {
          violations.push({ instances, shardCount, targets })
        }
      }
    }
    expect(violations).toStrictEqual([])
  })

  it("counts the planning instance whether listed or not, once, whatever the order of the list", () => {
    const others = ["node-2", "alpha", "zulu"]
    for (const shardCount of [1, 2, 3, 4, 5, 7, 64, 1000, 4096]) {
      for (const me of ["b", "node-1", "zzz"]) {
        const expected = targetShare(me, [...others, me].sort(), shardCount)
        expect(targetShare(me, others, shardCount)).toBe(expected)
        expect(targetShare(me, [me, ...others.slice().reverse(), me, "alpha"], shardCount)).toBe(expected)
        // The sum over all four, each planning with only the others listed.
        const all = [...others, me]
        const sum = all.reduce((acc, id) => acc + targetShare(id, all.filter((other) => other !== id), shardCount), 0)
        expect(sum).toBe(shardCount)
      }
    }
  })

  it("a lone instance's target is every shard; the remainder goes to the first instances by id", () => {
    expect(targetShare("a", [], 4096)).toBe(4096)
    expect(targetShare("a", ["a"], 7)).toBe(7)
    expect(["c", "a", "b"].map((me) => targetShare(me, ["b", "c", "a"], 11))).toStrictEqual([3, 4, 4])
    expect(["a", "b", "c"].map((me) => targetShare(me, ["a", "b", "c"], 2))).toStrictEqual([1, 1, 0])
  })
})

describe("planAssignment", () => {
  const shards = freshShards([["alpha", 10], ["beta", 6]])

  it("a lone instance claims every free shard, at the version seen", () => {
    const seen = shards.map((shard, i) => ({ ...shard, version: i % 3 }))
    const plan = planAssignment({ me: "a", live: [], shards: seen, held: new Set() })
    expect(plan.target).toBe(16)
    expect(plan.release).toStrictEqual([])
    expect(plan.claim.map(shardKey).sort()).toStrictEqual(seen.map(shardKey).sort())
    // The claims carry the rows as seen, so the compare-and-set is at their version.
    for (const shard of plan.claim) expect(seen).toContainEqual(shard)
  })

  it("never plans a shard held by a live instance, even below target", () => {
    const owned = shards.map((shard, i) => ({ ...shard, version: 1, ownerId: i < 12 ? "b" : "c" }))
    const plan = planAssignment({ me: "a", live: ["b", "c"], shards: owned, held: new Set() })
    expect(plan.target).toBeGreaterThan(0)
    expect(plan).toStrictEqual({ target: plan.target, release: [], claim: [] })
  })

  it("claims the shards of a dead owner (one not live)", () => {
    const withDead = shards.map((shard, i) => ({ ...shard, version: 2, ownerId: i % 2 === 0 ? "b" : "dead" }))
    const plan = planAssignment({ me: "a", live: ["a", "b"], shards: withDead, held: new Set() })
    expect(plan.target).toBe(8)
    expect(plan.release).toStrictEqual([])
    expect(plan.claim.map(shardKey).sort()).toStrictEqual(withDead.filter((s) => s.ownerId === "dead").map(shardKey).sort())
    // Once "b" is dead too, its shards are claimable as well.
    const alone = planAssignment({ me: "a", live: [], shards: withDead, held: new Set() })
    expect(alone.claim.map(shardKey).sort()).toStrictEqual(withDead.map(shardKey).sort())
  })

  it("claims no more than the target less what it holds, and never a shard it holds", () => {
    // It holds the three shards it prefers most, which it would claim first.
    const preferred = planAssignment({ me: "a", live: ["a", "b"], shards, held: new Set() }).claim
    const mine = new Set(preferred.slice(0, 3).map(shardKey))
    const state = shards.map((shard) => mine.has(shardKey(shard)) ? { ...shard, version: 1, ownerId: "a" } : shard)
    const plan = planAssignment({ me: "a", live: ["a", "b"], shards: state, held: mine })
    expect(plan.target).toBe(8)
    expect(plan.release).toStrictEqual([])
    expect(plan.claim).toHaveLength(5)
    for (const shard of plan.claim) expect(mine.has(shardKey(shard))).toBe(false)
    // At its target: nothing to do.
    const full = new Set(shards.slice(0, 8).map(shardKey))
    const done = shards.map((shard) => full.has(shardKey(shard)) ? { ...shard, version: 1, ownerId: "a" } : shard)
    expect(planAssignment({ me: "a", live: ["b"], shards: done, held: full })).toStrictEqual({ target: 8, release: [], claim: [] })
  })

  it("an instance holding too many releases exactly the excess, of its own shards, and claims nothing", () => {
    for (const [heldCount, live] of [[16, ["b"]], [12, ["b", "c"]], [7, ["b", "c"]], [16, ["b", "c", "d", "e", "f", "g"]]] as const) {
      const held = new Set(shards.slice(0, heldCount).map(shardKey))
      const state = shards.map((shard) => held.has(shardKey(shard)) ? { ...shard, version: 4, ownerId: "a" } : shard)
      const plan = planAssignment({ me: "a", live, shards: state, held })
      const target = targetShare("a", live, shards.length)
      expect(plan.target).toBe(target)
      expect(plan.release).toHaveLength(heldCount - target)
      expect(new Set(plan.release.map(shardKey)).size).toBe(heldCount - target)
      for (const shard of plan.release) expect(held.has(shardKey(shard))).toBe(true)
      expect(plan.claim).toStrictEqual([])
    }
  })

  it("its own shards that it does not hold (a restart under the same id) are claimable", () => {
    const mine = shards.slice(0, 8)
    const state = shards.map((shard, i) =>
      i < 8 ? { ...shard, version: 3, ownerId: "a" } : { ...shard, version: 1, ownerId: "b" }
    )
    const plan = planAssignment({ me: "a", live: ["a", "b"], shards: state, held: new Set() })
    expect(plan.release).toStrictEqual([])
    expect(plan.claim.map(shardKey).sort()).toStrictEqual(mine.map(shardKey).sort())
    for (const shard of plan.claim) expect(shard).toMatchObject({ version: 3, ownerId: "a" })
  })

  it("a shard stored as its own but not held is claimed back even at or above target, so it is never stranded", () => {
    // a holds its 8 of 16; the store also names a as the owner of one of b's shards (a claim
    // whose answer a never got). No one else takes a shard from a live owner, so a must.
    const held = new Set(shards.slice(0, 8).map(shardKey))
    const stranded = shards[12]!
    const state = shards.map((shard, i) =>
      i < 8 || shard === stranded ? { ...shard, version: 2, ownerId: "a" } : { ...shard, version: 1, ownerId: "b" }
    )
    const atTarget = planAssignment({ me: "a", live: ["a", "b"], shards: state, held })
    expect(atTarget.claim.map(shardKey)).toStrictEqual([shardKey(stranded)])
    // Above target too: it releases its excess and still claims the stranded one.
    const over = planAssignment({ me: "a", live: ["a", "b", "c"], shards: state, held })
    expect(over.release.length).toBeGreaterThan(0)
    expect(over.claim.map(shardKey)).toStrictEqual([shardKey(stranded)])
  })
})

describe("planAssignment, rounds of instances over a shared shard table", () => {
  const layouts: ReadonlyArray<ReadonlyArray<readonly [string, number]>> = [
    [["default", 1]],
    [["default", 2]],
    [["default", 7]],
    [["default", 64], ["other", 5]],
    [["default", 4096]]
  ]
  const describeLayout = (layout: ReadonlyArray<readonly [string, number]>) => layout.map(([ns, n]) => `${ns}:${n}`).join(",")

  it("a lone instance claims every shard in one round", () => {
    for (const layout of layouts) {
      const cluster = new Cluster(freshShards(layout), ["solo"])
      expect(cluster.converge()).toBe(1)
      cluster.checkBalanced()
    }
  })

  for (const layout of layouts) {
    it(`instances starting together converge in a few rounds (${describeLayout(layout)})`, () => {
      for (const instances of [2, 3, 5, 7]) {
        for (let seed = 1; seed <= 2; seed++) {
          const cluster = new Cluster(freshShards(layout), IDS.slice(0, instances))
          const rounds = cluster.converge(seed)
          expect(rounds, `${instances} instances, seed ${seed}`).toBeLessThanOrEqual(5)
          cluster.checkBalanced()
        }
      }
    })
  }

  it("a second instance joining a lone one converges: the first releases, the second claims", () => {
    const cluster = new Cluster(freshShards([["default", 64], ["other", 3]]), ["a"])
    cluster.converge()
    expect(cluster.count("a")).toBe(67)
    cluster.join("b")
    const rounds = cluster.converge()
    expect(rounds).toBeLessThanOrEqual(5)
    cluster.checkBalanced()
    expect([cluster.count("a"), cluster.count("b")]).toStrictEqual([34, 33])
  })

  it("a joining third instance takes shards only as the others release them", () => {
    for (const layout of layouts.slice(2)) {
      const cluster = new Cluster(freshShards(layout), ["a", "b"])
      cluster.converge()
      const before = new Map(Array.from(cluster.held, ([id, leases]) => [id, new Set(leases.keys())]))
      cluster.join("c")
      // In the first round "c" sees no free shard: the others only release.
      const snapshot = cluster.shards()
      expect(snapshot.every((shard) => shard.ownerId === "a" || shard.ownerId === "b")).toBe(true)
      expect(cluster.plan("c").claim).toStrictEqual([])
      const rounds = cluster.converge()
      expect(rounds, describeLayout(layout)).toBeLessThanOrEqual(5)
      cluster.checkBalanced()
      // The old instances only gave shards up: none changed hands between them.
      for (const id of ["a", "b"]) {
        for (const key of cluster.held.get(id)!.keys()) expect(before.get(id)!.has(key)).toBe(true)
      }
    }
  })

  it("the shards of a dead instance are claimed by the live ones", () => {
    for (const layout of layouts.slice(1)) {
      const cluster = new Cluster(freshShards(layout), ["a", "b", "c"])
      cluster.converge()
      const orphans = Array.from(cluster.held.get("b")!.keys())
      cluster.die("b")
      const rounds = cluster.converge()
      expect(rounds, describeLayout(layout)).toBeLessThanOrEqual(5)
      cluster.checkBalanced()
      for (const key of orphans) expect(["a", "c"]).toContain(cluster.table.get(key)!.ownerId)
    }
  })

  it("an instance restarted under the same id claims its own shards back", () => {
    const cluster = new Cluster(freshShards([["default", 64]]), ["a", "b"])
    cluster.converge()
    const before = new Set(cluster.held.get("a")!.keys())
    cluster.restart("a")
    expect(cluster.count("a")).toBe(0)
    const rounds = cluster.converge()
    expect(rounds).toBeLessThanOrEqual(5)
    cluster.checkBalanced()
    expect(new Set(cluster.held.get("a")!.keys())).toStrictEqual(before)
  })

  it("the cluster stays consistent as instances come and go", () => {
    const next = random(42)
    const cluster = new Cluster(freshShards([["default", 256], ["other", 17]]), ["node-1"])
    cluster.converge()
    const events: ReadonlyArray<(c: Cluster) => void> = [
      (c) => c.join("node-2"),
      (c) => c.join("node-3"),
      (c) => c.die("node-1"),
      (c) => c.join("node-4"),
      (c) => c.restart("node-3"),
      (c) => c.join("node-1"),
      (c) => c.die("node-4"),
      (c) => c.die("node-2")
    ]
    for (const event of events) {
      event(cluster)
      // A couple of rounds between changes, sometimes not enough to converge.
      cluster.round(next)
      if (next() < 0.5) cluster.round(next)
    }
    expect(cluster.converge(7)).toBeLessThanOrEqual(5)
    cluster.checkBalanced()
  })
})
