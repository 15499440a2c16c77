-- lib_admin.lua: helpers of the administration scripts (admin_fsck, admin_repair), concatenated
-- after lib.lua like every lib*.lua file; the hot paths do not use them.

-- The first entry's score of sorted set key, or nil when it is empty.
local function zhead(key)
  local h = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
  return tonumber(h[2])
end

-- The earliest time a chore is due at now (nil: none), as lib.lua's chores computes the next
-- one: the first retained root's or parked orphan's expiry, and now while descendants await
-- reaping. K_CHORES must be at or before it.
local function chores_due(now)
  local at = nil
  if redis.call('SCARD', K_IDX_REAP) > 0 then at = now end
  for _, key in ipairs({ K_IDX_EXPIRY, K_ORPHANS }) do
    local h = zhead(key)
    if h and (at == nil or h < at) then at = h end
  end
  return at
end
