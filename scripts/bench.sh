#!/usr/bin/env bash
# Benchmarks the built server over HTTP on 127.0.0.1: timers created per second
# (5000 creates at concurrency 16 and 64) and firing throughput and lag of
# timers due at one instant; then the firing engine alone (packages/server/bench).
# Prints tables; writes .bench/bench.json and .bench/engine.json.
# BENCH_CREATES, BENCH_FIRE and BENCH_PHASE_LIMIT_S change the sizes and the time bound.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
build
node bench/bench.mjs "$@"
node packages/server/bench/engineFiring.mjs
