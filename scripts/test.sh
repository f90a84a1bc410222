#!/usr/bin/env bash
# Runs every test: unit, store contract, engine (TestClock), HTTP API and end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. scripts/services.sh
ensure_postgres
ensure_nats
ensure_librdkafka
ensure_deps
build
typecheck_tests
report=$(mktemp -t vitest-report-XXXXXX.json)
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
# One plain closing line, whatever the runner printed above.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
  if (r.numTotalTests === 0) { console.error("no test ran"); process.exit(1) }
' "$report" || status=1
rm -f "$report"
exit $status
