/**
 * Runs the whole service in-process for a test file: a temp-dir SQLite file,
 * the real layers of main.ts, Node's HTTP server on 127.0.0.1 port 0.
 */
import { HttpServer } from "@effect/platform"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { makeServerLayer, ServerConfig } from "../../src/index.js"

/** A running server and helpers to talk to it. */
export interface TestServer {
  readonly baseUrl: string
  readonly dbFile: string
  /** POSTs `body` as JSON (or as given when it is a string) to `path`. */
  readonly post: (path: string, body?: unknown, init?: RequestInit) => Promise<ApiResponse>
  /** GETs `path`. */
  readonly get: (path: string) => Promise<ApiResponse>
  readonly close: () => Promise<void>
}

/** A response with its body read: JSON when it parses, else undefined. */
export interface ApiResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

const read = async (response: Response): Promise<ApiResponse> => {
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = text === "" ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

/** Starts a server; `env` holds TIMER_* settings beyond the test defaults. */
export const startTestServer = async (env: Record<string, string> = {}): Promise<TestServer> => {
  const dir = await mkdtemp(join(tmpdir(), "timer-api-test-"))
  const dbFile = join(dir, "timers.db")
  const provider = ConfigProvider.fromMap(
    new Map(Object.entries({
      TIMER_DB_URL: `sqlite:${dbFile}`,
      TIMER_HTTP_HOST: "127.0.0.1",
      TIMER_INSTANCE_ID: "api-test",
      TIMER_SQLITE_SYNCHRONOUS: "NORMAL",
      TIMER_SHUTDOWN_GRACE: "1s",
      ...env
    }))
  )
  const loaded = await Effect.runPromise(Effect.withConfigProvider(ServerConfig, provider))
  // Config.port rejects 0, so the ephemeral port is set after loading.
  const settings = { ...loaded, port: 0 }
  const runtime = ManagedRuntime.make(
    makeServerLayer(settings).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.None)))
  )
  let baseUrl: string
  try {
    const address = await runtime.runPromise(HttpServer.HttpServer.pipe(Effect.map((server) => server.address)))
    if (address._tag !== "TcpAddress") throw new Error(`unexpected server address ${JSON.stringify(address)}`)
    baseUrl = `http://127.0.0.1:${address.port}`
  } catch (error) {
    await runtime.dispose()
    await rm(dir, { recursive: true, force: true })
    throw error
  }
  const post = async (path: string, body?: unknown, init: RequestInit = {}) =>
    read(
      await fetch(`${baseUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
        ...init
      })
    )
  const get = async (path: string) => read(await fetch(`${baseUrl}${path}`))
  return {
    baseUrl,
    dbFile,
    post,
    get,
    close: async () => {
      await runtime.dispose()
      await rm(dir, { recursive: true, force: true })
    }
  }
}

/**
 * Starts a server before the tests of the enclosing file or describe block and
 * closes it after them. The handle it returns is usable inside those tests.
 */
export const useTestServer = (env: Record<string, string> = {}): TestServer => {
  let current: TestServer | undefined
  beforeAll(async () => {
    current = await startTestServer(env)
  })
  afterAll(async () => {
    await current?.close()
  })
  const started = (): TestServer => {
    if (current === undefined) throw new Error("the test server is used before it started: only use it inside a test")
    return current
  }
  return {
    get baseUrl() {
      return started().baseUrl
    },
    get dbFile() {
      return started().dbFile
    },
    post: (path, body, init) => started().post(path, body, init),
    get: (path) => started().get(path),
    close: async () => {
      await current?.close()
    }
  }
}
