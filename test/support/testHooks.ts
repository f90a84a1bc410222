/**
 * The hooks of an end-to-end test file: clean-up steps deferred by a test run
 * after it, last first (and every server process is killed); steps for a
 * failed test only (keep its logs, say); and a report of figures written to
 * .bench/<name> after the file's tests.
 */
import { cpus } from "node:os"
import { afterAll, afterEach } from "vitest"
import { killAllServers } from "./server.js"
import { writeReport } from "./util.js"

/** Registers the hooks; returns the report and the ways to defer steps. */
export const useTestHooks = (reportName: string) => {
  let steps: Array<() => Promise<void>> = []
  let ifFailed: Array<() => void> = []
  const report: Record<string, unknown> = {
    generatedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version }
  }

  afterEach(async (ctx) => {
    if (ctx.task.result?.state === "fail") for (const step of ifFailed) step()
    ifFailed = []
    const run = steps.reverse()
    steps = []
    for (const step of run) await step().catch((error) => console.error(`cleanup step failed: ${String(error)}`))
    await killAllServers()
  })

  afterAll(async () => {
    await killAllServers()
    if (Object.keys(report).length > 2) console.log(`e2e report written to ${writeReport(reportName, report)}`)
  })

  return {
    report,
    /** Runs `step` after the test, before the steps deferred earlier. */
    defer: (step: () => Promise<void>) => void steps.push(step),
    /** Runs `step` after the test if it failed, before the clean-up. */
    ifFailed: (step: () => void) => void ifFailed.push(step)
  }
}
