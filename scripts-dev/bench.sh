#!/usr/bin/env bash
# Benchmarks against the real Redis at DXREDIS_TEST_ADDR (run through `make bench`, which starts a
# throw-away server when DXREDIS_TEST_ADDR is unset). Go benchmark output goes to $1 (default
# bench/results-go.txt) in the format benchstat reads. BENCH_FLAGS (default -count=1) adds go test
# flags, e.g. BENCH_FLAGS="-count=6 -benchtime=2s" for benchstat comparisons.
set -euo pipefail
: "${DXREDIS_TEST_ADDR:?DXREDIS_TEST_ADDR must point at a Redis server; use make bench}"
out=${1:-bench/results-go.txt}
mkdir -p "$(dirname "$out")"

echo "== go test -bench (DXREDIS_TEST_ADDR=$DXREDIS_TEST_ADDR) -> $out"
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ), $(go version)"
	# A benchstat configuration line, so results from different Redis versions are told apart.
	echo "redis-version: $(redis-cli -u "redis://$DXREDIS_TEST_ADDR" info server 2>/dev/null | tr -d '\r' | sed -n 's/^redis_version://p')"
	# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
	go test ${BENCH_FLAGS:--count=1} -timeout 60m -run '^$' -bench . -benchmem ./...
} | tee "$out"

# PLACEHOLDER(dxbench): the dxbench workloads run here once cmd/dxbench exists; give it its real
# flags (workloads, durations, report file under bench/) when it lands.
if [[ -d cmd/dxbench ]]; then
	echo "== go run ./cmd/dxbench"
	go run ./cmd/dxbench
else
	echo "== dxbench: skipped (cmd/dxbench does not exist yet)"
fi
