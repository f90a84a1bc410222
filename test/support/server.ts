/**
 * Starts the built server (packages/server/dist/main.js) as a child process on
 * a temporary directory and a free port, waits until it is ready, and stops it
 * with SIGTERM or SIGKILL. Every wait is bounded; a failed start reports the
 * tail of the server's log.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository root. */
export const repoRoot = resolve(fileURLToPath(new URL("../..", import.meta.url)))

/** The built entry point; `tsc -b` must have run (scripts/test.sh does). */
export const serverEntry = join(repoRoot, "packages/server/dist/main.js")

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A free TCP port on 127.0.0.1 (freed again before it is returned). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = createServer()
    probe.unref()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      if (address === null || typeof address === "string") {
        probe.close()
        reject(new Error("no port"))
        return
      }
      probe.close(() => resolve(address.port))
    })
  })

/** A fresh temporary directory. */
export const makeTempDir = (prefix = "timers-e2e-") => mkdtempSync(join(tmpdir(), prefix))

/** Removes a directory made by `makeTempDir`, ignoring errors. */
export const removeDir = (dir: string) => {
  try {
    rmSync(dir, { recursive: true, force: true })
  } catch {
    // best effort
  }
}

/** How a child process ended. */
export interface ExitInfo {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** Options of `startServer`. */
export interface StartOptions {
  /** The directory of the database; a fresh temporary one when left out (the caller removes it). */
  readonly dir?: string
  /** Extra environment variables (TIMER_*). */
  readonly env?: Record<string, string>
  /** Longest wait for GET /readyz = 200, in ms (default 20 s). */
  readonly readyTimeoutMs?: number
  /** A file that receives every line of the process's log (the handle keeps only the last lines). */
  readonly logFile?: string
}

/** Lines of log kept per process. */
const LOG_LINES = 400

/** A running server process. */
export interface ServerHandle {
  readonly dir: string
  readonly dbPath: string
  readonly port: number
  readonly baseUrl: string
  readonly process: ChildProcess
  readonly pid: number
  /** When the process was spawned and when it answered /readyz, epoch ms. */
  readonly spawnedAt: number
  readonly readyAt: number
  /** Resolves when the process has exited. */
  readonly exited: Promise<ExitInfo>
  /** Null while running. */
  exitInfo(): ExitInfo | null
  /** The last lines of stdout and stderr. */
  logTail(lines?: number): string
  /** Sends a signal and waits (bounded) for the exit; SIGKILL follows if SIGTERM is not enough. */
  stop(signal?: "SIGTERM" | "SIGKILL", timeoutMs?: number): Promise<ExitInfo>
  /** POSTs JSON to an API path, e.g. "/api/v1/timers/create". */
  post(path: string, body: unknown, timeoutMs?: number): Promise<ApiResponse>
  /** GETs a path. */
  get(path: string, timeoutMs?: number): Promise<ApiResponse>
}

/** An HTTP answer: status and body, JSON-decoded when it is JSON. */
export interface ApiResponse {
  readonly status: number
  readonly body: any
  readonly text: string
}

const live = new Set<ChildProcess>()

// Whatever happens to the test process, no server outlives it.
process.once("exit", () => {
  for (const child of live) {
    try {
      child.kill("SIGKILL")
    } catch {
      // already gone
    }
  }
})

/** SIGKILLs every server this process started that still runs. */
export const killAllServers = async (timeoutMs = 5_000) => {
  const waits: Array<Promise<unknown>> = []
  for (const child of live) {
    waits.push(
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill("SIGKILL")
      })
    )
  }
  await Promise.race([Promise.all(waits), sleep(timeoutMs)])
}

const request = async (
  method: "GET" | "POST",
  url: string,
  body: unknown,
  timeoutMs: number
): Promise<ApiResponse> => {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(timeoutMs)
  })
  const text = await response.text()
  let parsed: unknown = undefined
  try {
    parsed = text === "" ? undefined : JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: response.status, body: parsed, text }
}

/**
 * Warns (once) when a package's sources are newer than its last build: the
 * tests run the built server, so they would test stale code.
 */
let staleChecked = false
const warnIfStale = () => {
  if (staleChecked) return
  staleChecked = true
  const newest = (dir: string): number => {
    let latest = 0
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
    }
    return latest
  }
  try {
    for (const pkg of readdirSync(join(repoRoot, "packages"))) {
      const src = join(repoRoot, "packages", pkg, "src")
      const buildInfo = join(repoRoot, "packages", pkg, "dist", ".tsbuildinfo")
      if (!existsSync(src) || !existsSync(buildInfo)) continue
      if (newest(src) > statSync(buildInfo).mtimeMs) {
        console.warn(`warning: packages/${pkg}/src is newer than its build; run \`tsc -b\` (scripts/test.sh does) or these tests run stale code`)
      }
    }
  } catch {
    // a best-effort hint only
  }
}

class StartFailed extends Error {
  constructor(message: string, readonly addressInUse: boolean) {
    super(message)
  }
}

const startOnce = async (dir: string, options: StartOptions): Promise<ServerHandle> => {
  if (!existsSync(serverEntry)) {
    throw new Error(`${serverEntry} is missing: build first (npx pnpm exec tsc -b)`)
  }
  warnIfStale()
  const port = await freePort()
  const dbPath = join(dir, "timers.db")
  const baseUrl = `http://127.0.0.1:${port}`
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? dir,
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    TIMER_HTTP_PORT: String(port),
    TIMER_HTTP_HOST: "127.0.0.1",
    TIMER_DB_URL: `sqlite:${dbPath}`,
    TIMER_LOG_LEVEL: "info",
    TIMER_LOG_FORMAT: "json",
    ...options.env
  }
  const spawnedAt = Date.now()
  const child = spawn(process.execPath, [serverEntry], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] })
  live.add(child)

  const lines: Array<string> = []
  const collect = (stream: NodeJS.ReadableStream | null, tag: string) => {
    let partial = ""
    stream?.setEncoding("utf8")
    stream?.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n")
      partial = parts.pop() ?? ""
      for (const line of parts) {
        lines.push(tag === "err" ? `[stderr] ${line}` : line)
        if (options.logFile !== undefined) {
          try {
            appendFileSync(options.logFile, (tag === "err" ? `[stderr] ${line}` : line) + "\n")
          } catch {
            // best effort
          }
        }
        if (lines.length > LOG_LINES) lines.shift()
      }
    })
    stream?.on("end", () => {
      if (partial !== "") lines.push(partial)
    })
  }
  collect(child.stdout, "out")
  collect(child.stderr, "err")

  let exitInfo: ExitInfo | null = null
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once("exit", (code, signal) => {
      exitInfo = { code, signal }
      live.delete(child)
      resolve(exitInfo)
    })
    child.once("error", (error) => {
      lines.push(`[spawn error] ${String(error)}`)
    })
  })
  const logTail = (n = 60) => lines.slice(-n).join("\n")

  const stop = async (signal: "SIGTERM" | "SIGKILL" = "SIGTERM", timeoutMs = 20_000): Promise<ExitInfo> => {
    if (exitInfo !== null) return exitInfo
    child.kill(signal)
    const result = await Promise.race([exited, sleep(timeoutMs).then(() => null)])
    if (result !== null) return result
    child.kill("SIGKILL")
    await Promise.race([exited, sleep(5_000)])
    throw new Error(`server pid ${child.pid} did not exit within ${timeoutMs} ms of ${signal}\n${logTail()}`)
  }

  // Bounded wait for readiness; a process that exits first fails at once.
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000
  const deadline = Date.now() + readyTimeoutMs
  let lastProblem = "no answer yet"
  let readyAt = 0
  while (readyAt === 0) {
    if (exitInfo !== null) {
      const tail = logTail()
      throw new StartFailed(
        `server exited before it was ready (${JSON.stringify(exitInfo)})\n--- server log tail ---\n${tail}`,
        /EADDRINUSE/.test(tail)
      )
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      await Promise.race([exited, sleep(5_000)])
      throw new StartFailed(
        `server not ready within ${readyTimeoutMs} ms (last: ${lastProblem})\n--- server log tail ---\n${logTail()}`,
        false
      )
    }
    try {
      // A server busy firing a backlog can take seconds to answer: give each probe time.
      const probeTimeout = Math.max(200, Math.min(5_000, deadline - Date.now()))
      const response = await request("GET", `${baseUrl}/readyz`, undefined, probeTimeout)
      if (response.status === 200) readyAt = Date.now()
      else lastProblem = `HTTP ${response.status} ${response.text}`
    } catch (error) {
      lastProblem = String((error as Error).message ?? error)
    }
    if (readyAt === 0) await sleep(50)
  }

  return {
    dir,
    dbPath,
    port,
    baseUrl,
    process: child,
    pid: child.pid!,
    spawnedAt,
    readyAt,
    exited,
    exitInfo: () => exitInfo,
    logTail,
    stop,
    post: (path, body, timeoutMs = 10_000) => request("POST", baseUrl + path, body, timeoutMs),
    get: (path, timeoutMs = 10_000) => request("GET", baseUrl + path, undefined, timeoutMs)
  }
}

/**
 * Starts the server on `options.dir` (or a fresh temporary directory) and a
 * free port, and waits for GET /readyz = 200. Retries on another port if the
 * chosen one was taken in between.
 */
export const startServer = async (options: StartOptions = {}): Promise<ServerHandle> => {
  const dir = options.dir ?? makeTempDir()
  for (let attempt = 1;; attempt++) {
    try {
      return await startOnce(dir, options)
    } catch (error) {
      if (error instanceof StartFailed && error.addressInUse && attempt < 3) continue
      if (options.dir === undefined) removeDir(dir)
      throw error
    }
  }
}
