/**
 * Small helpers of the end-to-end tests: a bounded worker pool, percentiles,
 * paging through the timers of a namespace, and JSON reports under .bench/.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot, type ServerHandle } from "./server.js"

/**
 * Runs `task` for indexes 0..count-1 with at most `concurrency` in flight.
 * Stops starting new tasks once `deadlineMs` (epoch) has passed; the first
 * failure stops the pool and is rethrown.
 */
export const runPool = async (
  count: number,
  concurrency: number,
  task: (index: number) => Promise<void>,
  deadlineMs = Number.POSITIVE_INFINITY
): Promise<{ done: number }> => {
  let next = 0
  let done = 0
  let failure: unknown = undefined
  const worker = async () => {
    while (failure === undefined && next < count) {
      if (Date.now() > deadlineMs) {
        failure ??= new Error(`pool deadline passed after ${done} of ${count} tasks`)
        return
      }
      const index = next++
      try {
        await task(index)
        done++
      } catch (error) {
        failure ??= error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  if (failure !== undefined) throw failure
  return { done }
}

/** Percentile summary of a list of numbers (nearest rank). */
export interface Percentiles {
  readonly count: number
  readonly min: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
  readonly mean: number
}

/** Nearest-rank percentiles; NaN fields for an empty list. */
export const percentiles = (values: ReadonlyArray<number>): Percentiles => {
  if (values.length === 0) {
    return { count: 0, min: Number.NaN, p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, max: Number.NaN, mean: Number.NaN }
  }
  const sorted = [...values].sort((a, b) => a - b)
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
  const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length
  return {
    count: sorted.length,
    min: sorted[0]!,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    max: sorted[sorted.length - 1]!,
    mean: Math.round(mean * 10) / 10
  }
}

/** "p50=3 p90=5 p99=9 max=12 (n=100)". */
export const formatPercentiles = (p: Percentiles) =>
  `p50=${p.p50} p90=${p.p90} p99=${p.p99} max=${p.max} ms (n=${p.count})`

/** Every timer of a namespace, through /api/v1/timers/list, page by page (bounded). */
export const listAllTimers = async (server: ServerHandle, namespace: string, maxPages = 1000) => {
  const timers: Array<any> = []
  let cursor: string | undefined
  for (let page = 0; page < maxPages; page++) {
    const response = await server.post("/api/v1/timers/list", {
      namespace,
      limit: 1000,
      ...(cursor === undefined ? {} : { cursor })
    })
    if (response.status !== 200) throw new Error(`list failed: HTTP ${response.status} ${response.text}`)
    timers.push(...response.body.timers)
    cursor = response.body.nextCursor
    if (cursor === undefined) return timers
  }
  throw new Error(`list did not end within ${maxPages} pages`)
}

/** Writes a JSON report to .bench/<name> at the repository root; returns its path. */
export const writeReport = (name: string, report: unknown) => {
  const dir = join(repoRoot, ".bench")
  mkdirSync(dir, { recursive: true })
  const path = join(dir, name)
  writeFileSync(path, JSON.stringify(report, null, 2) + "\n")
  return path
}
