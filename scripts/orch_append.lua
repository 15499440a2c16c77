-- orch_append: append events to an execution's history outside a turn (tests and tools).
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] instance, [3] execution, [4] byte size, then pairs (event_id, json).
-- Reply: 1. Errors (nothing written): DX_DUPLICATE event id exists or repeats.
-- Cost: O(events appended).
local id, exec, bytes = ARGV[2], ARGV[3], tonumber(ARGV[4])
local hkey = k_hist(id, exec)
local seen = {}
for i = 5, #ARGV, 2 do
  if seen[ARGV[i]] or redis.call('HEXISTS', hkey, ARGV[i]) == 1 then
    return fail('DUPLICATE', 'duplicate event_id ' .. ARGV[i] .. ' in execution ' .. exec .. ' of instance ' .. id)
  end
  seen[ARGV[i]] = true
end
for i = 5, #ARGV, 2 do redis.call('HSET', hkey, ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', k_execs(id), exec, exec)
redis.call('HINCRBY', k_exec(id, exec), 'bytes', bytes)
return 1
