/**
 * Several server processes on one PostgreSQL schema: each started with its
 * own TIMER_INSTANCE_ID, a temporary working directory and a free port; every
 * process ever started is kept (a restarted instance is a new process with
 * the same id), so that their logs can be printed when a test fails.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { makeTempDir, removeDir, type ServerHandle, type StartOptions, startServer } from "./server.js"

/** One process of the cluster. */
export interface ClusterProcess {
  readonly id: string
  readonly handle: ServerHandle
}

/** The processes of one test. */
export interface Cluster {
  readonly url: string
  /** Starts instance `id` (again, when it ran before) and waits for its /readyz. */
  start(id: string, options?: Omit<StartOptions, "dir">): Promise<ServerHandle>
  /** Starts several at once. */
  startAll(ids: ReadonlyArray<string>, options?: Omit<StartOptions, "dir">): Promise<Array<ServerHandle>>
  /** The latest process of instance `id`. */
  get(id: string): ServerHandle
  /** The processes still running, latest first per id. */
  running(): Array<ClusterProcess>
  /** Every process started, in order. */
  readonly processes: Array<ClusterProcess>
  /** The tails of every process's log. */
  logs(lines?: number): string
  /** The directory holding every process's whole log (`<id>-<n>.log`). */
  readonly logDir: string
  /** Lines of each process's whole log (by "<id>-<n>") that match `pattern`; only processes with a match are listed. */
  countInLogs(pattern: RegExp): Record<string, number>
  /** Keeps the log directory when the cluster is closed (a failed test calls it). */
  keepLogs(): void
  /** SIGKILLs every process still running (bounded) and removes the working directories (and the logs unless kept). */
  close(): Promise<void>
}

/** A cluster on the database at `url`; `env` is added to every process's environment. */
export const makeCluster = (url: string, env: Record<string, string> = {}): Cluster => {
  const processes: Array<ClusterProcess> = []
  const dirs: Array<string> = []
  const latest = new Map<string, ServerHandle>()
  const logDir = makeTempDir("timers-e2e-logs-")
  let keep = false

  const start = async (id: string, options: Omit<StartOptions, "dir"> = {}) => {
    const dir = makeTempDir(`timers-e2e-${id}-`)
    dirs.push(dir)
    const logFile = join(logDir, `${id}-${processes.filter((p) => p.id === id).length + 1}.log`)
    const handle = await startServer({
      ...options,
      dir,
      logFile,
      env: { TIMER_DB_URL: url, TIMER_INSTANCE_ID: id, ...env, ...options.env }
    })
    processes.push({ id, handle })
    latest.set(id, handle)
    return handle
  }

  return {
    url,
    start,
    startAll: (ids, options) => Promise.all(ids.map((id) => start(id, options))),
    get: (id) => {
      const handle = latest.get(id)
      if (handle === undefined) throw new Error(`no instance ${id} was started`)
      return handle
    },
    running: () => processes.filter((p) => p.handle.exitInfo() === null),
    processes,
    logs: (lines = 40) =>
      processes
        .map((p) => `--- ${p.id} (pid ${p.handle.pid}, exit ${JSON.stringify(p.handle.exitInfo())}) ---\n${p.handle.logTail(lines)}`)
        .join("\n"),
    logDir,
    countInLogs: (pattern) => {
      const counts: Record<string, number> = {}
      const seen = new Map<string, number>()
      for (const p of processes) {
        const n = (seen.get(p.id) ?? 0) + 1
        seen.set(p.id, n)
        const file = join(logDir, `${p.id}-${n}.log`)
        if (!existsSync(file)) continue
        const count = readFileSync(file, "utf8").split("\n").filter((line) => pattern.test(line)).length
        if (count > 0) counts[`${p.id}-${n}`] = count
      }
      return counts
    },
    keepLogs: () => {
      keep = true
    },
    close: async () => {
      await Promise.all(
        processes.map(async (p) => {
          try {
            await p.handle.stop("SIGKILL", 5_000)
          } catch {
            // reported by killAllServers' caller if it matters
          }
        })
      )
      for (const dir of dirs) removeDir(dir)
      if (!keep) removeDir(logDir)
    }
  }
}
