#!/usr/bin/env bash
# Benchmarks the built server over HTTP on 127.0.0.1: timers created per second
# (5000 creates at concurrency 16 and 64) and firing throughput and lag of
# timers due at one instant, on SQLite; then the firing engine alone
# (packages/server/bench); then firing on PostgreSQL with one and with three
# instances (bench/pgFiring.mjs; starts the local PostgreSQL if it is stopped);
# then commands in and DueTimeReached out over NATS (packages/broker-nats/bench;
# starts the local NATS if it is stopped).
# Prints tables; writes .bench/bench.json, .bench/engine.json, .bench/pg-firing.json
# and .bench/nats.json.
# BENCH_CREATES, BENCH_FIRE, BENCH_PHASE_LIMIT_S, BENCH_ENGINE_TIMERS, BENCH_PG_FIRE,
# BENCH_PG_INSTANCES and BENCH_NATS_COMMANDS change the sizes and the time bound.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. scripts/services.sh
ensure_deps
build
node bench/bench.mjs "$@"
node packages/server/bench/engineFiring.mjs
ensure_postgres
node bench/pgFiring.mjs
ensure_nats
node packages/broker-nats/bench/natsBench.mjs
