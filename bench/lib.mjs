// Helpers of the benchmark (plain ESM, run by node after `tsc -b`): start the
// built server on a temp directory and a free port, a local webhook receiver,
// a bounded worker pool and percentiles. Traffic goes to 127.0.0.1 only.
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer as createHttpServer } from "node:http"
import { createServer as createNetServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

export const repoRoot = resolve(fileURLToPath(new URL("..", import.meta.url)))
export const serverEntry = join(repoRoot, "packages/server/dist/main.js")

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const live = new Set()
const dirs = new Set()

/** Kills every server still running (SIGKILL) and removes the temp directories. */
export const cleanup = () => {
  for (const child of live) {
    try {
      child.kill("SIGKILL")
    } catch {}
  }
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true })
    } catch {}
  }
}
process.once("exit", cleanup)
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    cleanup()
    process.exit(130)
  })
}

const freePort = () =>
  new Promise((resolvePort, reject) => {
    const probe = createNetServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address()
      probe.close(() => resolvePort(port))
    })
  })

async function request(method, url, body, timeoutMs = 10_000) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs)
  })
  const text = await response.text()
  return { status: response.status, text }
}

/** Starts the server on a fresh temp directory; resolves once GET /readyz answers 200. */
export async function startServer(env = {}, readyTimeoutMs = 30_000) {
  if (!existsSync(serverEntry)) throw new Error(`${serverEntry} is missing: build first (tsc -b)`)
  const dir = mkdtempSync(join(tmpdir(), "timers-bench-"))
  dirs.add(dir)
  const port = await freePort()
  const baseUrl = `http://127.0.0.1:${port}`
  // BENCH_NODE_ARGS adds flags for the server processes' node (--cpu-prof, say).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean)
  const child = spawn(process.execPath, [...nodeArgs, serverEntry], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? dir,
      TIMER_HTTP_PORT: String(port),
      TIMER_HTTP_HOST: "127.0.0.1",
      TIMER_DB_URL: `sqlite:${join(dir, "timers.db")}`,
      TIMER_LOG_LEVEL: "warning",
      ...env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  live.add(child)
  const lines = []
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding("utf8")
    stream.on("data", (chunk) => {
      lines.push(...chunk.split("\n").filter(Boolean))
      if (lines.length > 200) lines.splice(0, lines.length - 200)
    })
  }
  let exitInfo = null
  const exited = new Promise((r) =>
    child.once("exit", (code, signal) => {
      exitInfo = { code, signal }
      live.delete(child)
      r(exitInfo)
    })
  )
  const tail = () => lines.slice(-40).join("\n")
  const deadline = Date.now() + readyTimeoutMs
  for (;;) {
    if (exitInfo !== null) throw new Error(`server exited before it was ready ${JSON.stringify(exitInfo)}\n${tail()}`)
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`server not ready within ${readyTimeoutMs} ms\n${tail()}`)
    }
    try {
      const r = await request("GET", `${baseUrl}/readyz`, undefined, Math.max(200, Math.min(5_000, deadline - Date.now())))
      if (r.status === 200) break
    } catch {}
    await sleep(50)
  }
  return {
    dir,
    baseUrl,
    tail,
    post: (path, body, timeoutMs) => request("POST", baseUrl + path, body, timeoutMs),
    stop: async () => {
      if (exitInfo !== null) return exitInfo
      child.kill("SIGTERM")
      const result = await Promise.race([exited, sleep(20_000).then(() => null)])
      if (result !== null) return result
      child.kill("SIGKILL")
      await Promise.race([exited, sleep(5_000)])
      return exitInfo
    }
  }
}

/** A webhook receiver on 127.0.0.1: records arrival (Date.now()), timer id and firing id; answers 200 empty. */
export async function startReceiver() {
  const calls = []
  const server = createHttpServer((req, res) => {
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      const at = Date.now()
      let timerId
      try {
        timerId = JSON.parse(Buffer.concat(chunks).toString("utf8")).timerId
      } catch {}
      calls.push({ at, timerId, firingId: req.headers["x-timer-firing-id"] })
      res.writeHead(200, { "content-length": 0 })
      res.end()
    })
    req.on("error", () => {})
  })
  server.keepAliveTimeout = 30_000
  await new Promise((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    calls,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections()
        server.close(() => r())
        setTimeout(r, 2_000).unref()
      })
  }
}

/**
 * Runs task(i) for i in 0..count-1, at most `concurrency` at once, starting
 * none after `deadline` (epoch ms). Returns how many were done and failed.
 */
export async function runPool(count, concurrency, task, deadline) {
  let next = 0
  let done = 0
  let failed = 0
  let firstError
  const worker = async () => {
    while (next < count && Date.now() < deadline) {
      const i = next++
      try {
        await task(i)
        done++
      } catch (error) {
        failed++
        firstError ??= error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  return { done, failed, firstError }
}

/** Nearest-rank percentiles, rounded to 0.1 ms. */
export function percentiles(values) {
  if (values.length === 0) return { count: 0, p50: null, p90: null, p99: null, max: null }
  const sorted = [...values].sort((a, b) => a - b)
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
  const round = (v) => Math.round(v * 10) / 10
  return { count: sorted.length, p50: round(at(50)), p90: round(at(90)), p99: round(at(99)), max: round(sorted[sorted.length - 1]) }
}
