# dxredis developer targets. Nothing here needs Docker; the throw-away Redis servers are started by
# scripts-dev/*.sh, which .ci/run uses too.
#
#   make test          everything, on embedded miniredis (no Redis needed)
#   make test-redis    Redis-dependent packages against a real server (DXREDIS_TEST_ADDR or a throw-away one)
#   make test-cluster  Redis-dependent packages against a throw-away 3-primary Redis Cluster
#   make test-partitions  the conformance suite, the golden histories and the dx suite on namespaces of
#                      12 partitions, on miniredis, a real server and the 3-primary cluster
#   make test-scale    resharding and failover under load (issue 34), each on a throw-away cluster:
#                      a third of the slots moved; a primary SIGKILLed with WaitReplicas 1 and 0
#   make test-race     the runtime's packages (dx, dxtest) under the race detector, on miniredis
#   make lint          gofmt, go vet, staticcheck (when installed)
#   make bench         benchmarks against a real server, results in bench/results-{go,dxbench}.txt
#   make fuzz          fuzz the wire decoders (FUZZTIME per target, default 60s)
#   make test-contrib  the metrics adapters in contrib/ (modules of their own: Prometheus, OpenTelemetry)
#   make test-browser  dxctl web in headless Chromium (a module of its own; skips without chromium unless
#                      DXCTL_WEB_REQUIRE_BROWSER=1; DXCTL_WEB_SCREENSHOTS=$$PWD/docs renews docs/web-console.md's pictures)

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# Tools installed with `go install` (e.g. staticcheck) are found without touching PATH by hand.
export PATH := $(shell go env GOPATH 2>/dev/null)/bin:$(PATH)

GO          ?= go
# -parallel 8: most tests wait on timers and polls, each on its own namespace (DESIGN.md S9), so
# more of them run at once than the machine has cores. Budget: make test within 60 s warm and
# 5 min cold (empty GOCACHE) on 2 vCPUs.
TEST_FLAGS  ?= -count=1 -timeout 10m -parallel 8
FUZZTIME    ?= 60s
# staticcheck runs only when on PATH; STATICCHECK may name another command (see lint's message).
STATICCHECK ?= staticcheck
STATICCHECK_PKG := honnef.co/go/tools/cmd/staticcheck
STATICCHECK_VERSION := v0.8.2
BENCH_OUT   ?= bench/results-go.txt
BENCH_FLAGS ?= -count=1
export BENCH_FLAGS
# Packages that talk to Redis; ./cmd/... only once cmd/ exists.
REDIS_PKGS  := ./redisprovider/... ./dx/... $(if $(wildcard cmd/*),./cmd/...)

.PHONY: all test test-race test-redis test-cluster test-partitions test-scale test-contrib test-browser lint bench fuzz

all: lint test

# The two longest packages first: go test runs packages in the order named, two at a time here, and
# redisprovider (about 55 s alone, most of it the deep fsck's worlds) started last makes the run
# longer. make test takes about 90 s on 2 vCPUs.
test:
	$(GO) test $(TEST_FLAGS) ./redisprovider/ ./dx/ ./...

# The runtime's goroutines (pollers, slots, lock renewals, acks in batches) under the race
# detector: about 5 minutes on 2 vCPUs, one package at a time (-p 1: the two packages side by side
# on a slow VM starved each other's real-time waits, in the old code as in the new). (redisprovider
# passes too, in about 4 more: go test -race ./redisprovider/.)
test-race:
	$(GO) test -race -p 1 $(TEST_FLAGS) ./dx/ ./dxtest/

test-contrib:
	@for d in contrib/*/; do \
		echo "== $$d"; \
		(cd $$d && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...) || exit 1; \
	done

test-browser:
	cd cmd/dxctl/web/browsertest && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) -v ./...

test-redis:
	scripts-dev/redis-server.sh run -- $(GO) test $(TEST_FLAGS) $(REDIS_PKGS)

test-cluster:
	scripts-dev/redis-cluster.sh run -- $(GO) test $(TEST_FLAGS) ./redisprovider/...

# Namespaces of 12 partitions (DXREDIS_TEST_PARTITIONS; docs/testing.md lists the tests that hold
# for one partition only): the packages whose tests run on providers, on each backend.
PARTITION_PKGS := ./redisprovider/ ./dx/ ./dxtest/ ./examples/...
test-partitions:
	DXREDIS_TEST_PARTITIONS=12 $(GO) test $(TEST_FLAGS) $(PARTITION_PKGS)
	DXREDIS_TEST_PARTITIONS=12 scripts-dev/redis-server.sh run -- $(GO) test $(TEST_FLAGS) ./redisprovider/ ./dx/
	DXREDIS_TEST_PARTITIONS=12 scripts-dev/redis-cluster.sh run -- bash -c '$(GO) test $(TEST_FLAGS) ./redisprovider/... && $(GO) test $(TEST_FLAGS) -run "TestSigkill" ./dx/'
	DXREDIS_CLUSTER_NODES=1 DXREDIS_TEST_PARTITIONS=12 scripts-dev/redis-cluster.sh run -- $(GO) test $(TEST_FLAGS) -run 'TestConformance|TestPartition|TestForward|TestCrossSlot' ./redisprovider/

# Each test changes its cluster (moves slots, kills a primary): one throw-away cluster each
# (DXREDIS_TEST_CLUSTER_DISPOSABLE). DXREDIS_LONG_TESTS=1 lengthens the resharding run and adds the
# soak (TestSoak: 10 minutes, DXREDIS_SOAK_FOR to change it).
SCALE_RUN := DXREDIS_TEST_CLUSTER_DISPOSABLE=1 scripts-dev/redis-cluster.sh run -- $(GO) test $(TEST_FLAGS) -v ./dx/ -run
test-scale:
	$(SCALE_RUN) '^TestReshardUnderLoad$$'
	DXREDIS_TEST_CLUSTER_DISPOSABLE=1 scripts-dev/redis-cluster.sh run -- $(GO) test $(TEST_FLAGS) -v -run '^TestScriptWaitsForSlotMigration$$' ./redisprovider/
	DXREDIS_CLUSTER_REPLICAS=1 DXREDIS_CLUSTER_NODE_TIMEOUT=2000 $(SCALE_RUN) '^TestClusterFailover$$'
	DXREDIS_FAILOVER_WAIT=0 DXREDIS_CLUSTER_REPLICAS=1 DXREDIS_CLUSTER_NODE_TIMEOUT=2000 $(SCALE_RUN) '^TestClusterFailover$$'
	if [ -n "$${DXREDIS_LONG_TESTS:-}" ]; then DXREDIS_CLUSTER_REPLICAS=1 DXREDIS_CLUSTER_NODE_TIMEOUT=2000 $(SCALE_RUN) '^TestSoak$$' -timeout 30m; fi

lint:
	@echo '== gofmt -l'
	@out=$$(gofmt -l .); if [[ -n $$out ]]; then echo "$$out"; echo 'gofmt: the files above need gofmt -w'; exit 1; fi
	@echo '== go vet ./...'
	@$(GO) vet ./...
	@if command -v $(firstword $(STATICCHECK)) >/dev/null; then \
		echo '== $(STATICCHECK) ./...'; $(STATICCHECK) ./...; \
	else \
		echo '== staticcheck: skipped (not on PATH; go install $(STATICCHECK_PKG)@$(STATICCHECK_VERSION),'; \
		echo '   or make lint STATICCHECK="go run $(STATICCHECK_PKG)@$(STATICCHECK_VERSION)")'; \
	fi

bench:
	@mkdir -p $(dir $(BENCH_OUT))
	scripts-dev/redis-server.sh run -- scripts-dev/bench.sh $(BENCH_OUT)

fuzz:
	$(GO) test ./provider -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME)
	$(GO) test ./provider -run '^$$' -fuzz '^FuzzDecodeWorkItem$$' -fuzztime $(FUZZTIME)
