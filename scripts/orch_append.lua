-- orch_append: append events to an execution's history outside a turn (tests and tools).
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   id: instance
--   exec: execution
--   hist[event_id, json]...: the events, to the end
-- Reply: 1. Errors (nothing written): DX_DUPLICATE event id exists or repeats.
-- Cost: O(events appended).
-- The execution's record says whether its ids are dense (lib.lua); one without a record has a set.
-- The record is in the instance hash or in the execution hash; one read of the instance hash
-- (REC_FIELDS, then hb) serves both.
local fields = { unpack(REC_FIELDS) }
fields[#fields + 1] = 'hb'
local i = redis.call('HMGET', k_inst(id), unpack(fields))
local cur = { i[1], i[6], i[#fields], i[7] } -- exec, hn, hb, hd
local in_hash = cur[1] == exec and cur[4]
local rec = exec_record(id, exec, i)
local dense = nil
if rec[6] == '1' then dense = tonumber(rec[5]) end
local dup = history_check(id, exec, hist, dense)
if dup then return dup end
local added, still = history_append(id, exec, hist, nil, dense)
if cur[1] ~= exec and execs_add(id, exec) == 1 then
  redis.call('HDEL', k_lock(id), 'x') -- a lock's note of the current execution (oq_held) is stale
end
-- The record counts the execution's events (see orch_ack); the instance hash also the current
-- execution's bytes.
local hd = (dense and not still) and '0' or nil
if cur[1] == exec and cur[2] then
  local f = { 'hn', d(tonumber(cur[2]) + #hist), 'hb', d((tonumber(cur[3]) or 0) + added) }
  if hd and in_hash then f[#f + 1], f[#f + 2] = 'hd', hd end
  redis.call('HSET', k_inst(id), unpack(f))
end
if not in_hash and rec[5] then
  local f = { 'hn', d(tonumber(rec[5]) + #hist) }
  if hd then f[#f + 1], f[#f + 2] = 'hd', hd end
  redis.call('HSET', k_exec(id, exec), unpack(f))
end
return 1
