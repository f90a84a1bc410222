import { defineConfig } from "vitest/config"

// Tests import the workspace packages' sources (the "@timer/source" export
// condition), not their dist/ builds, so an edit is tested without a rebuild.
const conditions = ["@timer/source", "module", "node", "development|production"]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["packages/*/test/**/*.test.ts"], testTimeout: 30_000 }
      },
      {
        extends: true,
        test: { name: "e2e", include: ["test/**/*.test.ts"], testTimeout: 180_000, hookTimeout: 120_000, fileParallelism: false }
      }
    ]
  }
})
