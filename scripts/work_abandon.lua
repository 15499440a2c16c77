-- work_abandon: release a worker item lock; the item becomes visible again after the delay.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   delay: delay ms (0 = at once)
--   ignore: '1' to ignore this attempt (decrement the attempt count, never below 0)
-- Reply: 1.
-- Effects: wakes a worker fetcher that may take the item: at once (no delay: the item is
--   visible), or so that one waiter learns the delayed item's due time. A lock that expired but
--   was not reclaimed yet can still be abandoned (duroxide matches on the token only).
-- Errors: DX_INVALID_TOKEN when the token is unknown; nothing is written then.
-- Cost: O(log N).
local now = now_ms()
local s, it = WQ.held(token)
if not s then return it end
WQ.unlock(s)
if ignore and (tonumber(it[5]) or 0) > 0 then redis.call('HINCRBY', WQ.k_item(s), 'n', -1) end
if delay > 0 then
  redis.call('ZADD', WQ.K_DUE, now + delay, s)
  WQ.note(now + delay)
  local class, owner = WQ.wake_class(it[3], it[4])
  WQ.wake_for(class, it[4], owner)
else
  WQ.make_ready(s, it[3], it[4], true)
end
return 1
