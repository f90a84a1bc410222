/**
 * Timers planned by the end-to-end tests: ids, due times spread over a
 * window and payloads that must come back byte for byte; and their creation
 * through the HTTP API of one or more servers.
 */
import type { ServerHandle } from "./server.js"
import { runPool } from "./util.js"

/** One planned timer. */
export interface Planned {
  readonly id: string
  readonly executeAtMs: number
  readonly executeAt: string
  readonly payload: unknown
  /** When the create call returned, epoch ms. */
  createdAt: number
}

/** `count` timers `<prefix>-00000`..., due evenly over [start, start + windowMs). */
export const plan = (count: number, prefix: string, start: number, windowMs: number): Array<Planned> =>
  Array.from({ length: count }, (_, i) => {
    const executeAtMs = start + Math.floor((i * windowMs) / count)
    return {
      id: `${prefix}-${String(i).padStart(5, "0")}`,
      executeAtMs,
      executeAt: new Date(executeAtMs).toISOString(),
      // Distinct, nested, with a string that needs escaping: it must come back byte for byte equal.
      payload: { index: i, tag: `${prefix}/${i}`, nested: { odd: i % 2 === 1, list: [i, `é"${i}\n`] } },
      createdAt: 0
    }
  })

/** How to create planned timers. */
export interface CreateOptions {
  /** Round-robin over these. */
  readonly servers: ReadonlyArray<ServerHandle>
  readonly namespace: string
  readonly callbackUrl: string
  /** Creates in flight at most. */
  readonly concurrency: number
  /** No create starts after this, epoch ms. */
  readonly deadlineMs: number
}

/** Creates the timers (a failed create throws); returns how long it took, in ms. */
export const createPlanned = async (timers: Array<Planned>, options: CreateOptions) => {
  const start = Date.now()
  await runPool(
    timers.length,
    options.concurrency,
    async (i) => {
      const t = timers[i]!
      const response = await options.servers[i % options.servers.length]!.post("/api/v1/timers/create", {
        namespace: options.namespace,
        id: t.id,
        executeAt: t.executeAt,
        callbackUrl: options.callbackUrl,
        payload: t.payload
      })
      if (response.status !== 200) throw new Error(`create ${t.id}: HTTP ${response.status} ${response.text}`)
      t.createdAt = Date.now()
    },
    options.deadlineMs
  )
  return Date.now() - start
}
