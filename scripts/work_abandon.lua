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
-- Cost: O(log N). An item abandoned without a delay keeps its place in FIFO order (scored at its
--   enqueue time again).
local now = now_ms()
local id, it = WQ.held(token)
if not id then return it end
local sid, tk = it[3], it[4]
local ki = WQ.k_item(id)
redis.call('HDEL', ki, 'k', 'u')
if it[11] == '1' then -- counted against its tag's concurrency cap: the slot is free
  redis.call('HDEL', ki, 'r')
  WQ.cap_release(tk, id)
end
if ignore and (tonumber(it[5]) or 0) > 0 then redis.call('HINCRBY', ki, 'n', -1) end
if delay > 0 then
  -- Delayed where it is: its schedule (or wq:shold) at the time it becomes visible.
  redis.call('ZADD', sid == '' and WQ.k_q(tk) or WQ.K_SHOLD, d(now + delay), id)
  local class, owner = WQ.wake_class(sid, tk)
  WQ.wake_for(class, tk, owner)
else
  if sid ~= '' then redis.call('ZREM', WQ.K_SHOLD, id) end
  WQ.make_ready(id, sid, tk, true, it[10] or now_s()) -- a session-less item keeps its place (its enqueue ms)
end
return 1
