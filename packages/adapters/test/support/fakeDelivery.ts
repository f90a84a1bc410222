/**
 * A scripted TimerDelivery for engine tests: records every call with the
 * (test) clock time it was made at, and answers from a per-timer script.
 */
import { DeliveryOutcome, type DeliveryRequest, shardKey, TimerDelivery } from "@timer/core"
import { Clock, type Context, Deferred, Effect, FiberId } from "effect"

/** One answer of the script: an outcome at once, or an effect that decides it (say, waiting on a Deferred). */
export type ScriptStep = DeliveryOutcome | ((request: DeliveryRequest) => Effect.Effect<DeliveryOutcome>)

/** One recorded call of `deliver`. */
export interface DeliveryCall {
  readonly seq: number
  readonly request: DeliveryRequest
  readonly timerId: string
  readonly shard: string
  readonly attempt: number
  readonly firingId: string
  /** The test clock when `deliver` was called. */
  readonly at: number
  status: "in-flight" | "answered" | "interrupted"
  outcome?: DeliveryOutcome
  answeredAt?: number
}

/** A Deferred the test completes to let a blocked delivery answer. */
export type Gate = Deferred.Deferred<DeliveryOutcome>

export interface FakeDelivery {
  readonly service: Context.Tag.Service<TimerDelivery>
  /** Every call, in call order. */
  readonly calls: ReadonlyArray<DeliveryCall>
  /** The calls for one timer, in call order. */
  readonly callsOf: (timerId: string) => ReadonlyArray<DeliveryCall>
  /** Appends answers to a timer's script; once the script is used up every call is Delivered. */
  readonly script: (timerId: string, ...steps: ReadonlyArray<ScriptStep>) => void
  /** Appends a step that blocks until the returned gate is completed with an outcome. */
  readonly gate: (timerId: string) => Gate
  /** Deliveries in flight now, in one shard ("namespace/shardId") or over all. */
  readonly inFlight: (shard?: string) => number
  /** The most deliveries ever in flight at once, in one shard or over all. */
  readonly maxInFlight: (shard?: string) => number
}

/** [timerId, test clock at the call] of every delivery call given. */
export const timeline = (calls: ReadonlyArray<{ readonly timerId: string; readonly at: number }>) =>
  calls.map((call) => [call.timerId, call.at] as const)

/** Completes a gate with an outcome. */
export const open = (gate: Gate, outcome: DeliveryOutcome = DeliveryOutcome.delivered) => Deferred.succeed(gate, outcome)

export const makeFakeDelivery = (): FakeDelivery => {
  const calls: Array<DeliveryCall> = []
  const scripts = new Map<string, Array<ScriptStep>>()
  const current = new Map<string, number>()
  const highest = new Map<string, number>()
  const ALL = "*"

  const enter = (key: string) => {
    for (const k of [key, ALL]) {
      const n = (current.get(k) ?? 0) + 1
      current.set(k, n)
      highest.set(k, Math.max(highest.get(k) ?? 0, n))
    }
  }
  const leave = (key: string) => {
    for (const k of [key, ALL]) current.set(k, (current.get(k) ?? 0) - 1)
  }

  const runStep = (request: DeliveryRequest): Effect.Effect<DeliveryOutcome> => {
    const step = scripts.get(request.timer.id)?.shift() ?? DeliveryOutcome.delivered
    return typeof step === "function" ? step(request) : Effect.succeed(step)
  }

  const deliver = (request: DeliveryRequest): Effect.Effect<DeliveryOutcome> =>
    Effect.flatMap(Clock.currentTimeMillis, (at) => {
      const call: DeliveryCall = {
        seq: calls.length,
        request,
        timerId: request.timer.id,
        shard: shardKey(request.timer),
        attempt: request.attempt,
        firingId: request.timer.firingId,
        at,
        status: "in-flight"
      }
      calls.push(call)
      enter(call.shard)
      return runStep(request).pipe(
        Effect.tap((outcome) =>
          Effect.map(Clock.currentTimeMillis, (now) => {
            call.status = "answered"
            call.outcome = outcome
            call.answeredAt = now
          })
        ),
        Effect.onInterrupt(() => Effect.sync(() => (call.status = "interrupted"))),
        Effect.ensuring(Effect.sync(() => leave(call.shard)))
      )
    })

  const script = (timerId: string, ...steps: ReadonlyArray<ScriptStep>) => {
    const list = scripts.get(timerId) ?? []
    list.push(...steps)
    scripts.set(timerId, list)
  }

  return {
    service: TimerDelivery.of({ deliver }),
    calls,
    callsOf: (timerId) => calls.filter((call) => call.timerId === timerId),
    script,
    gate: (timerId) => {
      const gate = Deferred.unsafeMake<DeliveryOutcome>(FiberId.none)
      script(timerId, () => Deferred.await(gate))
      return gate
    },
    inFlight: (shard) => current.get(shard ?? ALL) ?? 0,
    maxInFlight: (shard) => highest.get(shard ?? ALL) ?? 0
  }
}
