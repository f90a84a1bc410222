# Shared helpers of the start, test and bench scripts. Sourced, not run.
# Needs only Node 20 and npm: pnpm itself is run through npx, at a pinned version.

PNPM_VERSION=10.34.9

pnpm() { npx --yes "pnpm@${PNPM_VERSION}" "$@"; }

# Installs dependencies when node_modules is missing or older than the lockfile.
ensure_deps() {
  if [ ! -f node_modules/.modules.yaml ] || [ pnpm-lock.yaml -nt node_modules/.modules.yaml ]; then
    echo "==> installing dependencies (pnpm ${PNPM_VERSION}; better-sqlite3 compiles once, about a minute)"
    pnpm install --frozen-lockfile
  fi
}

# Compiles the TypeScript packages to dist/.
build() {
  echo "==> building"
  pnpm exec tsc -b
}

# Type-checks the tests, which `tsc -b` does not cover.
typecheck_tests() {
  echo "==> type-checking tests"
  pnpm exec tsc -p tsconfig.test.json
}
