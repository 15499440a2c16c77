-- ob_trim: drop the entries of this partition's outboxes that their destinations applied
-- (redisprovider, forward; lib.lua, ob_put).
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   marks[dest, hwm]...: each destination and the high-water mark ob_apply returned there, to the end
-- An outbox left empty leaves ob:dirty; one with entries left is dated now there (they are newer
-- than the ones trimmed). Trimming twice, or below what was trimmed, changes nothing.
-- Reply: entries dropped.
-- Errors: none.
-- Cost: O(destinations).
local dropped = 0
for _, m in ipairs(marks) do
  local key = P .. 'ob:' .. m[1]
  local head = redis.call('LINDEX', key, '0')
  if head then
    local n = math.min(m[2] - string.match(head, '^%d+') + 1, redis.call('LLEN', key))
    if n > 0 then
      redis.call('LTRIM', key, d(n), '-1')
      dropped = dropped + n
    end
  end
  if redis.call('EXISTS', key) == 0 then
    redis.call('ZREM', P .. 'ob:dirty', m[1])
  elseif head then
    redis.call('ZADD', P .. 'ob:dirty', 'XX', now_s(), m[1])
  end
end
return dropped
