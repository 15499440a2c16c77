#!/usr/bin/env bash
# Benchmarks against the real Redis at DXREDIS_TEST_ADDR (run through `make bench`, which starts a
# throw-away server when DXREDIS_TEST_ADDR is unset). Go benchmark output goes to $1 (default
# bench/results-go.txt) in the format benchstat reads.
set -euo pipefail
: "${DXREDIS_TEST_ADDR:?DXREDIS_TEST_ADDR must point at a Redis server; use make bench}"
out=${1:-bench/results-go.txt}
mkdir -p "$(dirname "$out")"

echo "== go test -bench (DXREDIS_TEST_ADDR=$DXREDIS_TEST_ADDR) -> $out"
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version) redis $(redis-cli -u "redis://$DXREDIS_TEST_ADDR" info server 2>/dev/null | tr -d '\r' | sed -n 's/^redis_version://p')"
	go test -count=1 -timeout 60m -run '^$' -bench . -benchmem ./...
} | tee "$out"

# PLACEHOLDER(dxbench): the dxbench workloads run here once cmd/dxbench exists; give it its real
# flags (workloads, durations, report file under bench/) when it lands.
if [[ -d cmd/dxbench ]]; then
	echo "== go run ./cmd/dxbench"
	go run ./cmd/dxbench
else
	echo "== dxbench: skipped (cmd/dxbench does not exist yet)"
fi
