-- work_renew: extend a held, unexpired worker item lock to now + extend.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   ext: extend ms
-- Reply: 1.
-- Effects: refreshes the item's session last_activity while the session lock is valid.
-- Errors: DX_INVALID_TOKEN when the token is unknown (acked, abandoned, reclaimed, cancelled) or
--   its lock expired; nothing is written then.
-- Cost: O(log N).
local now = now_ms()
local id, it = WQ.held(token, now)
if not id then return it end
local until_ms = d(now + ext)
redis.call('HSET', WQ.k_item(id), 'u', until_ms)
redis.call('ZADD', it[3] == '' and WQ.k_q(it[4]) or WQ.K_SHOLD, until_ms, id) -- the lock's score is its expiry
if it[11] == '1' then redis.call('ZADD', WQ.k_cap_run(it[4]), 'XX', until_ms, id) end -- its cap slot too
WQ.touch_session(it[3], now)
return 1
