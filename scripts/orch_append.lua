-- orch_append: append events to an execution's history outside a turn (tests and tools).
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] instance, [3] execution, then pairs (event_id, json).
-- Reply: 1. Errors (nothing written): DX_DUPLICATE event id exists or repeats.
-- Cost: O(events appended).
local id, exec = ARGV[2], ARGV[3]
local hist = {}
for i = 4, #ARGV, 2 do hist[#hist + 1] = { ARGV[i], ARGV[i + 1] } end
local dup = history_check(id, exec, hist)
if dup then return dup end
local added = history_append(id, exec, hist)
redis.call('ZADD', k_execs(id), exec, exec)
-- The instance record counts the current execution's events (see orch_ack).
local cur = redis.call('HMGET', k_inst(id), 'exec', 'hn', 'hb')
if cur[1] == exec and cur[2] then
  redis.call('HSET', k_inst(id), 'hn', tonumber(cur[2]) + #hist, 'hb', (tonumber(cur[3]) or 0) + added)
end
return 1
