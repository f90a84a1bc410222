import * as Core from "@timer/core"
import { describe, expect, it } from "vitest"
import * as CoreSource from "../../timer-core/src/index.js"

describe("test module resolution", () => {
  it("imports of @timer/core load its sources, not a possibly stale dist/ build", () => {
    expect(Core.Engine).toBe(CoreSource.Engine)
    expect(Core.TimerStore).toBe(CoreSource.TimerStore)
  })
})
