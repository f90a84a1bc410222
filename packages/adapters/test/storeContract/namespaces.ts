/**
 * The store contract, namespaces: createNamespace, getNamespace and
 * listNamespaces, and creating a namespace that exists.
 */
import { describe, expect } from "@effect/vitest"
import { NamespaceExists } from "@timer/core"
import { Effect, Option } from "effect"
import { type ContractTest, namespace, services } from "./fixtures.js"

/** Registers the namespace tests. */
export const namespacesContract = (test: ContractTest) => {
  describe("namespaces", () => {
    test("createNamespace stores a namespace that getNamespace reads back", Effect.gen(function*() {
      const { store } = yield* services
      expect(Option.isNone(yield* store.getNamespace("alpha"))).toBe(true)
      const created = yield* store.createNamespace(namespace("alpha", 8, 1234))
      expect(created).toStrictEqual(namespace("alpha", 8, 1234))
      expect(yield* store.getNamespace("alpha")).toStrictEqual(Option.some(namespace("alpha", 8, 1234)))
      expect(Option.isNone(yield* store.getNamespace("beta"))).toBe(true)
    }))

    test("listNamespaces returns every namespace ordered by name", Effect.gen(function*() {
      const { store } = yield* services
      expect(yield* store.listNamespaces).toStrictEqual([])
      // Names whose order is the same under any collation.
      for (const name of ["zeta", "alpha2", "mid.x", "b", "alpha", "beta"]) yield* store.createNamespace(namespace(name))
      const names = (yield* store.listNamespaces).map((ns) => ns.name)
      expect(names).toStrictEqual(["alpha", "alpha2", "b", "beta", "mid.x", "zeta"])
      expect((yield* store.listNamespaces)[0]).toStrictEqual(namespace("alpha"))
    }))

    test("creating an existing namespace with the same numShards returns the stored one", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.createNamespace(namespace("alpha", 16, 1000))
      const again = yield* store.createNamespace(namespace("alpha", 16, 9999))
      expect(again).toStrictEqual(namespace("alpha", 16, 1000))
      expect(yield* store.listNamespaces).toStrictEqual([namespace("alpha", 16, 1000)])
    }))

    test("creating an existing namespace with another numShards fails with NamespaceExists", Effect.gen(function*() {
      const { store } = yield* services
      yield* store.createNamespace(namespace("alpha", 16, 1000))
      const error = yield* Effect.flip(store.createNamespace(namespace("alpha", 4, 2000)))
      expect(error).toBeInstanceOf(NamespaceExists)
      expect(error).toMatchObject({ _tag: "NamespaceExists", namespace: "alpha", numShards: 16, requestedNumShards: 4 })
      expect(yield* store.getNamespace("alpha")).toStrictEqual(Option.some(namespace("alpha", 16, 1000)))
    }))
  })
}
