-- orch_abandon: release an instance lock without committing.
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] lock token, [3] delay ms (0 = visible at once), [4] '1' = ignore attempt.
-- Only the messages this token locked are delayed / decremented (duroxide 0.1.31); messages that
-- arrived during the lock are untouched. An expired but unreclaimed lock may still be abandoned.
-- Reply: 1. Errors: DX_INVALID_TOKEN unknown or superseded token.
-- Cost: O(locked messages).
local token, delay, ignore = ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local now = now_ms()
local id, lk = oq_held(token, now, false)
if not id then return lk end
for _, s in ipairs(words(lk[3])) do
  if redis.call('HEXISTS', k_msgs(id), 'm' .. s) == 1 then
    if ignore and tonumber(redis.call('HGET', k_msgs(id), 'a' .. s) or '0') > 0 then
      redis.call('HINCRBY', k_msgs(id), 'a' .. s, -1)
    end
    if delay > 0 then redis.call('ZADD', k_vis(id), 'XX', now + delay, s) end
  end
end
local pin = oq_unlock(id, now)
if pin then wake_orch(pin, 1) end
return 1
