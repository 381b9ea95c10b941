#!/usr/bin/env bash
# Bus round-trip latency: N (default 1000) sequential nb_bus_call()s to a
# one-thread listener, over AMQP (RabbitMQ, through scripts/rabbitmq-up.sh)
# and in-process, with the ratio. Prints figures; asserts nothing about time.
# Runs the unit-test binary's bench mode (tests/unit/test_bus.c).
# Usage: bash bench/bench_bus.sh [BUILD_DIR (default build)] [N] [TRANSPORT_URL]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-1000}
[ -x "$build/tests/unit/test_bus" ] || ninja -C "$build" tests/unit/test_bus >/dev/null
bash scripts/rabbitmq-up.sh 2>/dev/null
exec "$build/tests/unit/test_bus" --bench "$n" ${3:+"$3"} 2>/dev/null
