#!/usr/bin/env bash
# Starts the local services the tests need when they are not running, and fails
# loudly when one cannot be reached: a test that needs a service never passes
# without it. Sourced by scripts/test.sh; also runnable on its own.
set -euo pipefail

# Is something listening on 127.0.0.1:$1?
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Waits up to $2 seconds for port $1.
wait_port() {
  local port=$1 deadline=$((SECONDS + $2))
  until port_open "$port"; do
    if [ $SECONDS -ge $deadline ]; then return 1; fi
    sleep 0.5
  done
}

ensure_postgres() {
  if ! port_open 5432; then
    echo "==> starting PostgreSQL"
    if ! command -v pg_ctlcluster >/dev/null; then
      echo "PostgreSQL is not installed; installing it" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    wait_port 5432 60 || { echo "PostgreSQL did not start on 127.0.0.1:5432" >&2; exit 1; }
  fi
  # The tests use database "test" as user postgres (trust authentication on this machine).
  if ! psql -h 127.0.0.1 -U postgres -d test -tAc "select 1" >/dev/null 2>&1; then
    psql -h 127.0.0.1 -U postgres -d postgres -tAc "create database test" >/dev/null
  fi
  echo "==> PostgreSQL is up on 127.0.0.1:5432"
}

# NATS with JetStream on 127.0.0.1:4222 (the broker-nats tests and the NATS end-to-end tests).
ensure_nats() {
  if ! port_open 4222; then
    echo "==> starting NATS with JetStream"
    if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then
      echo "nats-server is not installed; installing it" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
    fi
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
    wait_port 4222 30 || { echo "NATS did not start on 127.0.0.1:4222" >&2; exit 1; }
  fi
  echo "==> NATS is up on 127.0.0.1:4222"
}

# librdkafka's headers and library: the Kafka tests build a mock-cluster launcher with them.
ensure_librdkafka() {
  if [ ! -f /usr/include/librdkafka/rdkafka_mock.h ]; then
    echo "==> installing librdkafka-dev (the Kafka tests' mock cluster)"
    apt-get install -y -qq librdkafka-dev >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librdkafka-dev >/dev/null; }
  fi
  [ -f /usr/include/librdkafka/rdkafka_mock.h ] || { echo "librdkafka-dev could not be installed" >&2; exit 1; }
  echo "==> librdkafka-dev is installed"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  ensure_postgres
  ensure_nats
  ensure_librdkafka
fi
