-- ob_take: read this partition's outboxes for forwarding (lib.lua, ob_put; redisprovider, forward).
-- flags: no-writes (read only)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   limit: the most entries read per destination
--   older: only outboxes whose oldest entry is at least this many ms old (0: all)
-- Reply: {dest, {entry...}, dest, {entry...}, ...} for every destination with entries, and last
--   the server's time (ms).
-- Errors: none.
-- Cost: O(destinations + entries read).
local now = now_ms()
local out = {}
for _, dest in ipairs(redis.call('ZRANGEBYSCORE', P .. 'ob:dirty', '-inf', d(now - older))) do
  local e = redis.call('LRANGE', P .. 'ob:' .. dest, '0', d(limit - 1))
  if #e > 0 then
    out[#out + 1] = dest
    out[#out + 1] = e
  end
end
out[#out + 1] = now
return out
