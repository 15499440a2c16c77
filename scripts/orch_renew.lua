-- orch_renew: extend a held, unexpired instance lock to now + extend.
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] lock token, [3] extend ms.
-- Reply: 1. Errors: DX_INVALID_TOKEN unknown, superseded or expired token.
-- Cost: O(log N).
local token, extend = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local id = redis.call('HGET', K_TOKENS, token)
if not id then return fail('INVALID_TOKEN', 'Invalid lock token: unknown or already released') end
local lk = redis.call('HMGET', k_lock(id), 'tok', 'until')
if lk[1] ~= token then return fail('INVALID_TOKEN', 'Invalid lock token: lock no longer held') end
if tonumber(lk[2]) <= now then return fail('INVALID_TOKEN', 'Invalid lock token: lock expired') end
redis.call('HSET', k_lock(id), 'until', now + extend)
redis.call('ZADD', K_LOCKED, now + extend, id)
return 1
