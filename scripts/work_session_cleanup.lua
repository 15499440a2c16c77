-- work_session_cleanup: delete expired sessions (locked_until <= now) that have no queued items.
-- flags: allow-oom (only frees memory, so it runs when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   limit: most sessions to delete in this call
-- Reply: the number of sessions deleted.
-- Errors: none.
-- Cost: O(sessions deleted) x O(log N): only item-less sessions are indexed in wq:sidle, so
--   sessions that still have items are never scanned.
local now = now_ms()
local n = 0
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', WQ.K_SIDLE, '-inf', now, 'LIMIT', 0, limit)) do
  redis.call('ZREM', WQ.K_SIDLE, sid)
  if not redis.call('HGET', WQ.K_SCOUNT, sid) then
    local owner = redis.call('HGET', WQ.k_sess(sid), 'o')
    if owner then redis.call('SREM', WQ.k_owner(owner), sid) end
    redis.call('DEL', WQ.k_sess(sid), WQ.k_stags(sid))
    redis.call('ZREM', WQ.K_SOWNED, sid)
    n = n + 1
  end
end
return n
