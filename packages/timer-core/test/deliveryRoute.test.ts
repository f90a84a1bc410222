import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { DeliveryOutcome, layerDeliveryRoute, TimerDelivery } from "../src/TimerDelivery.js"
import type { TimerRecord } from "../src/Timer.js"

const timer = (id: string, natsSubject?: string): TimerRecord => ({
  namespace: "default",
  id,
  shardId: 0,
  executeAt: 0,
  nextFireAt: 0,
  ...(natsSubject === undefined ? { callbackUrl: "http://127.0.0.1:9/" } : { natsSubject }),
  callbackTimeoutSeconds: 10,
  state: "SCHEDULED",
  attempts: 0,
  firingId: `f-${id}`,
  createdAt: 0,
  updatedAt: 0
})

describe("layerDeliveryRoute", () => {
  it.effect("sends the timers it handles through its delivery and the others through the one behind it", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const record = (by: string) => ({
        deliver: (request: { readonly timer: TimerRecord }) =>
          Effect.sync(() => (seen.push(`${by}:${request.timer.id}`), DeliveryOutcome.delivered))
      })
      const others = Layer.succeed(TimerDelivery, TimerDelivery.of(record("webhook")))
      const routed = layerDeliveryRoute((t) => t.natsSubject !== undefined, Effect.succeed(TimerDelivery.of(record("nats"))), others)
      const delivery = yield* Effect.provide(TimerDelivery, routed)
      for (const t of [timer("a", "x.y"), timer("b"), timer("c", "z")]) {
        yield* delivery.deliver({ timer: t, attempt: 1, firedAt: 0, instanceId: "i" })
      }
      expect(seen).toEqual(["nats:a", "webhook:b", "nats:c"])
    }))
})
