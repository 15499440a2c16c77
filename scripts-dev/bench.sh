#!/usr/bin/env bash
# Benchmarks against the real Redis at DXREDIS_TEST_ADDR (run through `make bench`, which starts a
# throw-away server when DXREDIS_TEST_ADDR is unset). Go benchmark output goes to $1 (default
# bench/results-go.txt) in the format benchstat reads; every dxbench workload's report goes to
# results-dxbench.txt beside it. BENCH_FLAGS (default -count=1) adds go test
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

dx_out="$(dirname "$out")/results-dxbench.txt"
echo "== go run ./cmd/dxbench -workload all (DXREDIS_TEST_ADDR=$DXREDIS_TEST_ADDR) -> $dx_out"
go run ./cmd/dxbench -addr "$DXREDIS_TEST_ADDR" -workload all | tee "$dx_out"
