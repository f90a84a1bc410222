/**
 * The setting of a restart test: a database directory and a webhook receiver
 * of its own, and two servers run on that directory one after the other (the
 * second starts on what the first left). When the test fails, the tails of
 * both servers' logs are printed.
 */
import type { TestContext } from "vitest"
import { type Receiver, startReceiver } from "./receiver.js"
import { makeTempDir, removeDir, type ServerHandle, startServer } from "./server.js"

/** One restart test's directory, receiver and servers. */
export interface RestartRun {
  readonly dir: string
  readonly receiver: Receiver
  /** Starts the server that runs before the restart, on `dir`. */
  readonly startFirst: () => Promise<ServerHandle>
  /** Starts the server that runs after the restart, on `dir`. */
  readonly startSecond: () => Promise<ServerHandle>
}

/**
 * The restart runs of one test file: `start` sets one up for a test; `close`
 * (after every test) closes their receivers and removes their directories.
 */
export const restartRuns = () => {
  const dirs: Array<string> = []
  const receivers: Array<Receiver> = []
  return {
    start: async (ctx: Pick<TestContext, "onTestFailed">): Promise<RestartRun> => {
      const dir = makeTempDir()
      dirs.push(dir)
      const receiver = await startReceiver()
      receivers.push(receiver)
      let first: ServerHandle | undefined
      let second: ServerHandle | undefined
      ctx.onTestFailed(() => {
        console.error(`--- first server log ---\n${first?.logTail(40)}\n--- second server log ---\n${second?.logTail(40)}`)
      })
      return {
        dir,
        receiver,
        startFirst: async () => (first = await startServer({ dir })),
        startSecond: async () => (second = await startServer({ dir }))
      }
    },
    close: async () => {
      await Promise.all(receivers.map((receiver) => receiver.close()))
      for (const dir of dirs) removeDir(dir)
    }
  }
}
