import { defineConfig } from "vitest/config"

export default defineConfig({
  resolve: { conditions: ["@timer/source"] },
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
