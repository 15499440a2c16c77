-- work_session_renew: extend the session locks of the given owners that are still held and not idle.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   ext: extend ms
--   idle: idle timeout ms
--   owners[owner]...: owner ids (distinct), to the end
-- Reply: the number of sessions extended.
-- Effects: for each session owned by one of the owners with locked_until > now and
--   last_activity > now - idle (strict): locked_until = now + extend. Drops stale members of the
--   owners' session sets.
-- Errors: none.
-- Cost: O(sessions the owners hold or held since their last release) x O(log N).
local now = now_ms()
local until_ms, cutoff = now + ext, now - idle
local n = 0
for _, owner in ipairs(owners) do
  local ko = WQ.k_owner(owner)
  for _, sid in ipairs(redis.call('SMEMBERS', ko)) do
    local rec = redis.call('HMGET', WQ.k_sess(sid), 'o', 'u', 'l')
    if rec[1] ~= owner then
      redis.call('SREM', ko, sid)
    elseif tonumber(rec[2]) > now and tonumber(rec[3]) > cutoff then
      redis.call('HSET', WQ.k_sess(sid), 'u', until_ms)
      redis.call('ZADD', WQ.K_SOWNED, 'XX', until_ms, sid)
      redis.call('ZADD', WQ.K_SIDLE, 'XX', until_ms, sid)
      n = n + 1
    end
  end
end
return n
