#!/usr/bin/env python3
"""Where a system's Redis instructions per orchestration go, from two callgrind runs of a
redis-server built with symbols (bench/callgrind.sh KEEP=1 REDIS_SERVER=<that build>).

  split.py SMALL.callgrind BIG.callgrind N_SMALL N_BIG

Per orchestration (the big run less the small one, over the difference in size):
  all           the whole server (serverCron included)
  scripts       FCALL/EVALSHA: luaCallFunction, inclusive
  - setup       a script call's own cost outside the Lua code: KEYS/ARGV tables, hooks, lookup
  - redis.call  the commands a script runs, with the conversion of arguments and replies
      commands    the commands themselves (scriptCall)
      bridge      argument objects, reply parsing into Lua values, the run context
  - Lua         the script's own code between its redis.calls (interpreter, strings, tables, GC)
  other         commands sent outside scripts, networking, the event loop
"""
import re, subprocess, sys

FUNCS = ("luaCallFunction", "lua_pcall", "luaRedisGenericCommand", "scriptCall", "PROGRAM TOTALS")


def inclusive(path):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        name = m.group(2)
        for f in FUNCS:
            if (f == "PROGRAM TOTALS" and name.startswith(f)) or re.search(r"[:\s]" + f + r" \[", name):
                got.setdefault(f, int(m.group(1).replace(",", "")))
    return got


a, b = inclusive(sys.argv[1]), inclusive(sys.argv[2])
n = int(sys.argv[4]) - int(sys.argv[3])
per = {f: (b.get(f, 0) - a.get(f, 0)) / n for f in FUNCS}
total, scripts, lua = per["PROGRAM TOTALS"], per["luaCallFunction"], per["lua_pcall"]
rcall, cmds = per["luaRedisGenericCommand"], per["scriptCall"]
rows = [("all", total), ("scripts", scripts), ("- setup", scripts - lua), ("- redis.call", rcall),
        ("    commands", cmds), ("    bridge", rcall - cmds), ("- Lua", lua - rcall),
        ("other", total - scripts)]
for name, v in rows:
    print("%-14s %10.0f %5.1f%%" % (name, v, 100 * v / total))
