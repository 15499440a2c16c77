#!/usr/bin/env bash
# lua-line-profile.sh: where the scripts' time goes, line by line (a development tool, not CI).
#
# Builds redis-server 7.0.15 with a Lua line hook (scripts-dev/lua-line-profile.patch: each line of
# the Functions library is charged the cycles until the next line runs, rdtsc, so a line's
# redis.calls and C functions count on it; a function's return charges its caller's line again),
# runs dxbench against it and prints the costliest lines of the library and the cost per command.
# x86-64 only. Needs make, a C compiler and git (the Redis sources come from GitHub unless
# REDIS_SRC points at a 7.0.15 tree).
#
#   scripts-dev/lua-line-profile.sh -mode provider -workload hello -n 3000
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${LUAPROF_DIR:-/tmp/dxredis-luaprof}
mkdir -p "$work"
if [ ! -x "$work/redis/src/redis-server" ]; then
  if [ -n "${REDIS_SRC:-}" ]; then cp -r "$REDIS_SRC" "$work/redis"; else git clone -q --depth 1 -b 7.0.15 https://github.com/redis/redis "$work/redis"; fi
  (cd "$work/redis" && patch -p1 < "$root/scripts-dev/lua-line-profile.patch" && make -j"$(nproc)" >/dev/null)
fi
(cd "$root" && go build -o "$work/dxbench" ./cmd/dxbench)
# The library as loaded (its line numbers are the profile's).
cat > "$work/dump_test.go" <<'GO'
package dxredis_test

import (
	"os"
	"testing"

	_ "github.com/duroxide-go/dxredis" // registers the scripts
	"github.com/duroxide-go/dxredis/internal/luascripts"
)

func TestDumpLibrary(t *testing.T) { os.WriteFile(os.Getenv("LUAPROF_OUT"), []byte(luascripts.FunctionLibrary()), 0o644) }
GO
cp "$work/dump_test.go" "$root/zz_luaprof_dump_test.go"
trap 'rm -f "$root/zz_luaprof_dump_test.go"' EXIT
(cd "$root" && LUAPROF_OUT="$work/library.lua" go test -count=1 -run TestDumpLibrary . >/dev/null)

port=${LUAPROF_PORT:-6399}
rm -f /tmp/luaprof.txt
"$work/redis/src/redis-server" --port "$port" --save '' --appendonly no --busy-reply-threshold 0 >/dev/null 2>&1 &
for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$work/dxbench" -addr "127.0.0.1:$port" -baseline 0 "$@" | tail -1
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait
python3 - "$work/library.lua" <<'PY'
import collections, re, sys
lines = open(sys.argv[1]).read().split('\n')
rows, per = [], collections.Counter()
for l in open('/tmp/luaprof.txt'):
    ln, hits, cyc = map(int, l.split())
    rows.append((cyc, hits, ln))
    m = re.search(r"redis\.call\('(\w+)'", lines[ln - 1])
    per[m.group(1) if m else '(lua)'] += cyc
total = sum(r[0] for r in rows)
print(f"cycles in scripts: {total:,} (the hook adds ~200 per line run)")
for cyc, hits, ln in sorted(rows, reverse=True)[:30]:
    print(f"{100 * cyc / total:5.1f}% {hits:8d} runs  L{ln}: {lines[ln - 1].strip()[:100]}")
print("by command:")
for k, cyc in per.most_common(20):
    print(f"  {k:16s} {100 * cyc / total:5.1f}%")
PY
