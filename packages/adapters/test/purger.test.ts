import { describe, expect, it } from "@effect/vitest"
import { EngineConfig, Namespace, Purger, TimerStore, type TimerRecord } from "@timer/core"
import { Effect, Layer, Option, TestClock } from "effect"
import { layerSqliteStore } from "../src/index.js"

const HOUR = 3_600_000
const DAY = 24 * HOUR

const timer = (id: string, state: TimerRecord["state"], updatedAt: number): TimerRecord => ({
  namespace: "default",
  id,
  shardId: 0,
  executeAt: 0,
  nextFireAt: 0,
  callbackUrl: "http://127.0.0.1:9/hook",
  callbackTimeoutSeconds: 10,
  state,
  attempts: state === "SCHEDULED" ? 0 : 1,
  firingId: `f-${id}`,
  createdAt: 0,
  updatedAt
})

const TestLayer = Purger.layer.pipe(
  Layer.provideMerge(EngineConfig.layer({ retentionMs: 7 * DAY, purgeIntervalMs: HOUR, purgeBatchSize: 2 })),
  Layer.provideMerge(layerSqliteStore({ filename: ":memory:" }))
)

describe("Purger", () => {
  it.scoped("deletes finished timers once the retention period has passed, in batches, and keeps scheduled ones", () =>
    Effect.gen(function*() {
      const store = yield* TimerStore
      yield* store.createNamespace(new Namespace({ name: "default", numShards: 1, createdAt: 0 }))
      // Five finished timers updated at day 0, one finished at day 3, one still scheduled.
      for (const id of ["a", "b", "c", "d", "e"]) yield* store.upsertTimer(timer(id, id === "e" ? "FAILED" : "FIRED", 0))
      yield* store.upsertTimer(timer("late", "FIRED", 3 * DAY))
      yield* store.upsertTimer(timer("pending", "SCHEDULED", 0))

      const ids = store.listTimers({ namespace: "default", limit: 100 }).pipe(
        Effect.map((page) => page.timers.map((t) => t.id).sort())
      )

      // Before the retention period ends nothing goes, however often the purge runs.
      yield* TestClock.adjust(7 * DAY - HOUR)
      expect(yield* ids).toEqual(["a", "b", "c", "d", "e", "late", "pending"])

      // Past 7 days after day 0: the five go (three batches of at most 2), "late" and "pending" stay.
      yield* TestClock.adjust(2 * HOUR)
      expect(yield* ids).toEqual(["late", "pending"])

      // Past 7 days after day 3: "late" goes; a SCHEDULED timer is never purged.
      yield* TestClock.adjust(3 * DAY)
      expect(yield* ids).toEqual(["pending"])
      expect(Option.isSome(yield* store.getTimer({ namespace: "default", id: "pending" }))).toBe(true)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("purgeOnce reports how many it deleted", () =>
    Effect.gen(function*() {
      const store = yield* TimerStore
      const purger = yield* Purger
      yield* store.createNamespace(new Namespace({ name: "default", numShards: 1, createdAt: 0 }))
      // Move past the background run first, so that only purgeOnce can delete these.
      yield* TestClock.setTime(8 * DAY)
      for (const id of ["a", "b", "c"]) yield* store.upsertTimer(timer(id, "FIRED", 0))
      expect(yield* purger.purgeOnce).toBe(3)
      expect(yield* purger.purgeOnce).toBe(0)
    }).pipe(Effect.provide(TestLayer)))
})
