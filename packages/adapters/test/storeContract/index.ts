/**
 * The store contract: what every TimerStore and ShardOwnership adapter must do,
 * written against the ports only (no SQL). An adapter's test file calls
 * `storeContractSuite` with a factory of fresh, empty stores. The tests are in
 * the modules beside this one, a part of the ports each.
 */
import { describe } from "@effect/vitest"
import type { ShardOwnership, TimerStore } from "@timer/core"
import { Effect, type Layer } from "effect"
import { commandsContract } from "./commands.js"
import { dueContract } from "./due.js"
import { firingContract } from "./firing.js"
import { contractTest, services } from "./fixtures.js"
import { instancesContract } from "./instances.js"
import { listContract } from "./list.js"
import { namespacesContract } from "./namespaces.js"
import { ownershipContract } from "./ownership.js"
import { purgeContract } from "./purge.js"
import { timersContract } from "./timers.js"
import { updateScheduledContract } from "./updateScheduled.js"

/**
 * Registers the contract tests. `makeLayer` must return a layer that builds a
 * new, empty store each time it is built (every test builds its own), e.g. a
 * fresh SQLite file or a fresh PostgreSQL schema.
 */
export const storeContractSuite = (
  name: string,
  makeLayer: () => Layer.Layer<TimerStore | ShardOwnership, unknown>
) =>
  describe(`store contract: ${name}`, () => {
    const test = contractTest(makeLayer)

    namespacesContract(test)
    timersContract(test)
    updateScheduledContract(test)
    listContract(test)
    dueContract(test)
    instancesContract(test)
    ownershipContract(test)
    firingContract(test)
    commandsContract(test)
    purgeContract(test)

    test("ping succeeds", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.ping
    }))
  })
