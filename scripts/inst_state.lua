-- inst_state: what clients read about an instance: custom status, KV (store and current delta),
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- and the current execution's history size.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   id: instance
--   what: 'cs' | 'kv' | 'stats' | 'hold'
--   key: optional, for 'kv': the key, or '' for all
-- Reply: cs: {version, value, cleared}; kv: {store pairs, delta pairs} (one key: {store value,
--   delta value}); stats: {exists, event count, history, store pairs, delta pairs}; hold: the
--   hold note '<ms> <reason>' (orch_abandon), else '<ms> activity <id> parked ...' when one of
--   its activities here is a dead letter (work_dead), else ''.
-- Errors: none. Cost: O(KV keys) for kv, O(KV keys + history bytes) for stats, O(queued
--   activities of the instance) for hold, O(1) otherwise.
if what == 'cs' then
  return redis.call('HMGET', k_cs(id), 'v', 's', 'n')
elseif what == 'hold' then
  local h = redis.call('HGET', k_msgs(id), 'h')
  if h then return h end
  -- An activity of the instance parked as a dead letter (work_dead) in this partition.
  for _, list in ipairs(redis.call('HVALS', WQ.k_inst(id))) do
    if string.byte(list, 1) ~= 64 then -- '@<p>': an item homed in another partition
      for item in string.gmatch(list, '%S+') do
        local it = redis.call('HMGET', WQ.k_item(item), 'd', 'a')
        if it[1] then
          return string.match(it[1], '^%d+') .. ' activity ' .. tostring(it[2]) ..
            ' parked as a dead letter after too many deliveries (dxctl dead list: redrive or discard it)'
        end
      end
    end
  end
  return ''
elseif what == 'kv' then
  if key ~= '' then return { redis.call('HGET', k_kv(id), key), redis.call('HGET', k_kd(id), key) } end
  return { redis.call('HGETALL', k_kv(id)), redis.call('HGETALL', k_kd(id)) }
end
local iv = redis.call('HMGET', k_inst(id), 'exec', 'hn')
if iv[1] == false and redis.call('EXISTS', k_inst(id)) == 0 then return { 0 } end
local count, hist = 0, ''
if iv[1] then
  count = tonumber(iv[2]) or 0
  hist = redis.call('GET', k_hist(id, iv[1])) or ''
end
return { 1, count, hist, redis.call('HGETALL', k_kv(id)), redis.call('HGETALL', k_kd(id)) }
