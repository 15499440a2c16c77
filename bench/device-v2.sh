#!/bin/bash
# Storage format 2 on the many-core device: format 1 (dxbench-before, commit 563f790), format 2
# (dxbench-after) and go-workflows' Redis backend (gwbench-bin) alternating, Redis pinned to core 0
# and the load on cores 1-15; every result as one JSON line in $OUT/v2.jsonl. Redis CPU per
# orchestration is each run's own INFO cpu delta (used_cpu_sys + used_cpu_user over the run).
#
# $D (default .devbench) holds redis-server, redis-cli, their libraries (lib/), the loader
# ld-linux-x86-64.so.2 and the three static binaries:
#   (git archive 563f790 | tar -x -C /tmp/f1; cd /tmp/f1; CGO_ENABLED=0 go build -ldflags="-s -w" -o $D/dxbench-before ./cmd/dxbench)
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o $D/dxbench-after ./cmd/dxbench
#   (cd bench/gwbench && CGO_ENABLED=0 go build -ldflags="-s -w" -o $D/gwbench-bin .)
# PORT, SCALE (divides every -n), ROUNDS and the two builds' labels BEFORE and AFTER (format1,
# format2) and BEFORE_ARGS (more flags for dxbench-before, e.g. -no-keybytes) are optional.
D=$(cd "${D:-.devbench}" && pwd)
PORT=${PORT:-6379}; S=${SCALE:-1}; B=${BEFORE:-format1}; A=${AFTER:-format2}
R="$D/ld-linux-x86-64.so.2 --library-path $D/lib"
nproc; grep -m1 "model name" /proc/cpuinfo
taskset -c 0 $R $D/redis-server --port $PORT --save '' --appendonly no --bind 127.0.0.1 --daemonize no > $OUT/redis.log 2>&1 &
for i in $(seq 50); do $R $D/redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  echo "== $label $*"
  local line
  line=$(timeout 150 taskset -c 1-15 $D/$bin -addr 127.0.0.1:$PORT "$@" 2>>$OUT/stderr.log | tail -1)
  echo "{\"label\":\"$label\",\"bin\":\"$bin\",\"args\":\"$*\",\"result\":${line:-null}}" >> $OUT/v2.jsonl
  echo "$line" | cut -c1-400
  $R $D/redis-cli -p $PORT flushall > /dev/null
}
for i in $(seq ${ROUNDS:-2}); do
  run W1-$B dxbench-before -mode runtime -workload hello -baseline 0 -n $((20000/S)) ${BEFORE_ARGS:-}
  run W1-$A dxbench-after -mode runtime -workload hello -baseline 0 -no-keybytes -n $((20000/S))
  run W1-goworkflows gwbench-bin -done ack -n $((20000/S)) -pollers 4
done
run W2-$B dxbench-before -mode runtime -workload fanout -baseline 0 -n $((2000/S)) ${BEFORE_ARGS:-}
run W2-$A dxbench-after -mode runtime -workload fanout -baseline 0 -no-keybytes -n $((2000/S))
run W2-goworkflows gwbench-bin -done ack -n $((2000/S)) -fanout 10 -pollers 16
run W1-rate500-$B dxbench-before -mode runtime -workload hello -baseline 0 -n $((5000/S)) -rate 500 ${BEFORE_ARGS:-}
run W1-rate500-$A dxbench-after -mode runtime -workload hello -baseline 0 -no-keybytes -n $((5000/S)) -rate 500
