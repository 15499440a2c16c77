#!/usr/bin/env python3
"""Sum bench/luaprof's line counts per Lua function of the library, per orchestration.

  agg.py CODE PROF N [LINES]

CODE: the library's code (FUNCTION LIST WITHCODE, from its '#!lua' line); PROF: the patched
server's counts ("<line> <vm instructions> <calls>"); N: orchestrations run. A line belongs to
the last function definition at or above it (a closure defined inside a function counts as its own).
"""
import collections, re, sys

code = open(sys.argv[1]).read().split("\n")
n = float(sys.argv[3])
lines = int(sys.argv[4]) if len(sys.argv) > 4 else 40
owner, cur = {}, "(chunk)"
for i, l in enumerate(code, 1):
    m = re.match(r"^(?:local\s+)?function\s+([\w.:]+)|^([\w.]+)\s*=\s*function|^local\s+(\w+)\s*=\s*function", l)
    if m:
        cur = "%s (line %d)" % (m.group(1) or m.group(2) or m.group(3), i)
    owner[i] = cur
vm, calls, per_line = collections.Counter(), collections.Counter(), []
for row in open(sys.argv[2]):
    ln, v, c = map(int, row.split())
    o = owner.get(ln, "?")
    vm[o] += v
    calls[o] += c
    per_line.append((v, c, ln))
tv, tc = sum(vm.values()), sum(calls.values())
print("per orchestration: %.0f Lua VM instructions, %.0f calls" % (tv / n, tc / n))
print("\n   vm/orch  share  calls/orch  function")
for o, v in vm.most_common(40):
    print("%10.0f %5.1f%% %10.1f  %s" % (v / n, 100 * v / tv, calls[o] / n, o))
print("\n   vm/orch  calls/orch  line")
for v, c, ln in sorted(per_line, reverse=True)[:lines]:
    text = code[ln - 1].strip() if ln <= len(code) else "?"
    print("%10.1f %10.1f  %5d  %s" % (v / n, c / n, ln, text[:100]))
