#!/usr/bin/env bash
# Starts the service on the embedded default: SQLite at ./data/timers.db, HTTP on port 8080.
# Every TIMER_* variable of the README's configuration table applies.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
build
exec node packages/server/dist/main.js "$@"
