-- orch_renew: extend a held, unexpired instance lock to now + extend.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   extend: extend ms
-- Reply: 1. Errors: DX_INVALID_TOKEN unknown, superseded or expired token.
-- Cost: O(log N).
local now = now_ms()
local id, err = oq_held(token, now, true)
if not id then return err end
redis.call('HSET', k_lock(id), 'until', now + extend)
redis.call('ZADD', K_LOCKED, now + extend, id)
oq_note(now + extend) -- a shorter extension can move the lock's expiry earlier
return 1
