#!/usr/bin/env bash
# Benchmarks the built server over HTTP on 127.0.0.1: timers created per second
# (5000 creates at concurrency 16 and 64) and firing throughput and lag of
# timers due at one instant, on SQLite; then the firing engine alone
# (packages/server/bench); then firing on PostgreSQL with one and with three
# instances (bench/pgFiring.mjs; starts the local PostgreSQL if it is stopped);
# then commands in and DueTimeReached out over NATS (packages/broker-nats/bench;
# starts the local NATS if it is stopped) and over Kafka (packages/broker-kafka/bench,
# against librdkafka's mock cluster).
# Prints tables; writes .bench/bench.json, .bench/engine.json, .bench/pg-firing.json,
# .bench/nats.json and .bench/kafka.json.
# BENCH_CREATES, BENCH_FIRE, BENCH_PHASE_LIMIT_S, BENCH_ENGINE_TIMERS, BENCH_PG_FIRE,
# BENCH_PG_INSTANCES, BENCH_NATS_COMMANDS and BENCH_KAFKA_COMMANDS change the sizes.
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
ensure_librdkafka
node packages/broker-kafka/bench/kafkaBench.mjs
