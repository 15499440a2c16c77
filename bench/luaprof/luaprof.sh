#!/bin/bash
# Where the Lua of dxredis's scripts spends its work, by function and by line: a redis-server
# built with lineprof.patch counts the Lua VM instructions each line of the library runs and the
# calls each line makes; one dxbench workload runs against it; agg.py sums the counts per Lua
# function of the library (and lists the busiest lines), per orchestration.
#
#   REDIS_SRC=<a redis 7.0 source tree> bench/luaprof/luaprof.sh [dxbench flags]
#   REDIS_SRC=<a redis 7.0 source tree> bench/luaprof/luaprof.sh floor2   # bench/floor -layout 2
#
# Default flags: -workload hello -n 1000; floor2 plays 1000 hellos. The source tree is copied, not changed (a git checkout
# of redis/redis at 7.0.15 is what the patch was made against). VM instructions are not machine
# instructions: a VM instruction of a table or string operation costs more than one that moves a
# local, and the calls (string.format, a concatenation's string, redis.call) cost most of all;
# bench/luaprof/split.py, over two callgrind runs, says how much of a turn the Lua is.
# Needs gcc, make, python3, Go; LINES=N lists the N busiest lines (default 40).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${REDIS_SRC:?set REDIS_SRC to a redis 7.0 source tree}"
WORK=$(mktemp -d /tmp/luaprof.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp -r "$REDIS_SRC" "$WORK/redis"
(cd "$WORK/redis" && patch -p1 <"$OLDPWD/bench/luaprof/lineprof.patch" >/dev/null && make -j"$(nproc)" >"$WORK/build.log" 2>&1) ||
	{ echo "luaprof.sh: build failed, see the end of the log:" >&2; tail -20 "$WORK/build.log" >&2; exit 1; }
go build -o "$WORK/dxbench" ./cmd/dxbench
go build -o "$WORK/floor" ./bench/floor
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DXPROF="$WORK/prof.txt" "$WORK/redis/src/redis-server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$WORK/server.log" 2>&1 &
for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-workload hello -n 1000)
if [ "${flags[0]}" = floor2 ]; then
	client=("$WORK/floor" -addr "127.0.0.1:$port" -layout 2 -n 1000)
else
	client=("$WORK/dxbench" -addr "127.0.0.1:$port" -baseline 0 -keep -no-keybytes "${flags[@]}")
fi
"${client[@]}" >"$WORK/client.log" 2>&1 ||
	{ echo "luaprof.sh: ${client[0]##*/} failed:" >&2; tail -5 "$WORK/client.log" >&2; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; exit 1; }
n=1000
[ "${flags[0]}" = floor2 ] || n=$(grep -o '"completed":[0-9]*' "$WORK/client.log" | tail -1 | cut -d: -f2)
redis-cli -p "$port" --raw FUNCTION LIST WITHCODE | sed -n '/^#!lua/,$p' >"$WORK/code.lua"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait
python3 bench/luaprof/agg.py "$WORK/code.lua" "$WORK/prof.txt" "$n" "${LINES:-40}"
