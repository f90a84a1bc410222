/**
 * The setting of the multi-instance end-to-end tests: a fresh PostgreSQL
 * schema, an ownership poller, a webhook receiver and a cluster of server
 * processes per test, all torn down after it (a failed test keeps every
 * process's whole log and prints where); and a report of figures written to
 * .bench/<name> after the file's tests.
 */
import { loadavg } from "node:os"
import { expect } from "vitest"
import { type Cluster, makeCluster } from "./cluster.js"
import { ALL_SHARDS, NAMESPACE, NUM_SHARDS } from "./multiScenario.js"
import { countByOwner, type OwnershipPoller, startOwnershipPoller, waitBalanced } from "./ownership.js"
import { createSchema, type TestSchema } from "./postgres.js"
import { type Receiver, startReceiver } from "./receiver.js"
import { useTestHooks } from "./testHooks.js"

/** What one test runs against. */
export interface Setting {
  readonly schema: TestSchema
  readonly poller: OwnershipPoller
  readonly receiver: Receiver
  readonly cluster: Cluster
}

/** The 1-, 5- and 15-minute load averages, rounded (other work on the machine skews every figure). */
export const load = () => loadavg().map((l) => Math.round(l * 100) / 100)

/**
 * Registers the hooks of a test file and returns its `setUp` and its report,
 * written to .bench/`reportName` after the file's tests.
 */
export const useMultiSetting = (reportName: string) => {
  const { defer, ifFailed, report } = useTestHooks(reportName)

  /** A fresh schema, poller, receiver and cluster (every process gets `env`), torn down after the test. */
  const setUp = async (ctx: { onTestFailed: (f: () => void) => void }, env: Record<string, string> = {}): Promise<Setting> => {
    const schema = await createSchema()
    defer(() => schema.drop())
    const poller = await startOwnershipPoller(schema.url)
    defer(() => poller.stop())
    const receiver = await startReceiver()
    defer(() => receiver.close())
    const cluster = makeCluster(schema.url, { TIMER_LOG_LEVEL: "info", ...env })
    defer(() => cluster.close())
    // A failed test keeps its processes' whole logs (the path is printed).
    ifFailed(() => cluster.keepLogs())
    ctx.onTestFailed(() => {
      console.error(`--- schema ${schema.schema}; shards now: ${JSON.stringify(Object.fromEntries(countByOwner(poller.current())))} ---`)
      console.error(`--- instance events: ${JSON.stringify(poller.instanceEvents)}`)
      console.error(`--- heartbeats: ${JSON.stringify(poller.heartbeats())}`)
      console.error(cluster.logs(60))
      console.error(`--- whole logs kept in ${cluster.logDir} ---`)
    })
    return { schema, poller, receiver, cluster }
  }

  return { setUp, report }
}

/** Starts `ids`, creates NAMESPACE through the first and waits until the shards are spread over all of them. */
export const startBalanced = async (setting: Setting, ids: ReadonlyArray<string>) => {
  const startedAt = Date.now()
  const handles = await setting.cluster.startAll(ids)
  const created = await handles[0]!.post("/api/v1/namespaces/create", { name: NAMESPACE, numShards: NUM_SHARDS })
  expect(created.status, created.text).toBe(200)
  const balancedMs = await waitBalanced(setting.poller, ids, ALL_SHARDS, 20_000)
  expect(
    balancedMs,
    `shards not spread over ${ids.join(", ")} within 20 s: ${JSON.stringify(Object.fromEntries(countByOwner(setting.poller.current())))}`
  ).toBeDefined()
  return { handles, startToBalancedMs: Date.now() - startedAt }
}
