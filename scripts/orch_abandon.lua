-- orch_abandon: release an instance lock without committing.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   delay: delay ms (0 = visible at once)
--   ignore: '1' = ignore attempt
--   reason: optional: why the runtime holds the instance (a hold: HoldOrchestrationItem), kept in
--     the message hash's field h as '<ms> <reason>' until an ack consumes the messages (which
--     deletes it); a reason starting "poison:" also lists the instance in oq:dead (dead letters)
-- Only the messages this token locked are delayed / counted (duroxide 0.1.31); messages that
-- arrived during the lock are untouched. An expired but unreclaimed lock may still be abandoned.
-- Reply: 1. Errors: DX_INVALID_TOKEN unknown or superseded token.
-- Cost: O(locked messages).
local now = now_ms()
local id, lk = oq_held(token, now, false)
if not id then return lk end
local seqs = words(lk[3])
-- The delivery counts as an attempt unless ignore_attempt (the fetch wrote no count: oq_unlock).
if not ignore then oq_count_attempt(id, seqs) end
if delay > 0 then
  -- The locked messages that still exist become visible at now + delay: their t<s> is the type
  -- code, then that time (lib.lua, oq_messages).
  local names = {}
  for i, s in ipairs(seqs) do names[i] = 't' .. s end
  local types, at, f = call_chunked('HMGET', k_msgs(id), names), d(now + delay), {}
  for i = 1, #names do
    if types[i] then f[#f + 1], f[#f + 2] = names[i], string.sub(types[i], 1, 1) .. at end
  end
  call_chunked('HSET', k_msgs(id), f)
end
if reason then
  redis.call('HSET', k_msgs(id), 'h', now_s() .. ' ' .. reason)
  -- A poison hold (dx.Options.OnPoison) is a dead letter: listed until redriven (work_dead); an
  -- entry whose hold is gone is dropped by the listing.
  if string.sub(reason, 1, 7) == 'poison:' then redis.call('ZADD', P .. 'oq:dead', now_s(), id) end
end
local pin = oq_unlock(id, now)
if pin then wake_orch(pin, 1) end
return 1
