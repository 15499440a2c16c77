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

-- Older record layouts (lib.lua, Executions, is the one layout): releases before it kept the
-- current execution's record in x:<e>:<id> when it did not begin with the instance hash (no marker
-- hd in the hash: instances acked without a name, records written before that layout; the current
-- execution was then the highest of xs:<id>), the pinned version as pin besides pink, and left
-- fields out to mean something: out (the output in xo:<e>:<id> if any), hn (count the id set
-- he:<e>:<id>), hd (the id set holds the ids), hb (the history's length); an appended execution could
-- have no record at all. (xs and done absent in the instance hash mean what they meant then:
-- lib.lua, exec_record.) record_old says how an instance departs from the one layout (admin_fsck);
-- record_convert rewrites it so (admin_migrate, admin_repair), reading every field as those
-- releases did, so that every read returns what it returned before. Cost: O(executions).

-- The out field that an older record without one meant (exec_output read xo:<e>:<id> then).
local function old_out(id, e)
  if redis.call('EXISTS', k_xout(id, e)) == 1 then return 'k' end
  return '-'
end

-- The hd field of a record without one: '0' when the id set he:<e>:<id> exists (it holds the ids,
-- as older releases always kept it), else '1' (no writer leaves ids that are not 1..n without it).
local function old_hd(id, e)
  if redis.call('EXISTS', k_hids(id, e)) == 1 then return '0' end
  return '1'
end

-- The instance's current execution as the older layouts tell it, and its instance hash fields.
local OLD_FIELDS = { 'exec', 'status', 'out', 'hn', 'hb', 'hd', 'pin', 'pink', 'name' }
local function old_current(id)
  local v = redis.call('HMGET', k_inst(id), unpack(OLD_FIELDS))
  local i = {}
  for j, f in ipairs(OLD_FIELDS) do i[f] = v[j] end
  local cur = i.exec
  if not cur then cur = redis.call('ZRANGE', k_execs(id), '-1', '-1')[1] end
  return cur, i
end

local function record_old(id)
  local cur, i = old_current(id)
  if i.pin then return k_inst(id) .. ' holds pin (the version; pink, its key, is what is read)' end
  if not cur then return nil end
  if not i.exec then return 'the current execution ' .. cur .. '\'s record is in ' .. k_exec(id, cur) .. ', not in ' .. k_inst(id) end
  if redis.call('EXISTS', k_exec(id, cur)) == 1 then
    return k_exec(id, cur) .. ' exists besides the current execution\'s record in ' .. k_inst(id)
  end
  for _, f in ipairs({ 'hd', 'hn', 'hb', 'out' }) do
    if not i[f] then return k_inst(id) .. ' has no ' .. f end
  end
  for _, e in ipairs(redis.call('ZRANGE', k_execs(id), '0', '-1')) do
    if e ~= cur then
      local x = redis.call('HMGET', k_exec(id, e), 'hn', 'hd', 'out', 'pin')
      if not (x[1] and x[2] and x[3]) or x[4] then
        return k_exec(id, e) .. ' is not a whole record (hn, hd, out; no pin)'
      end
    end
  end
  return nil
end

-- Returns 1 when it changed something, else 0.
local function record_convert(id)
  local cur, i = old_current(id)
  local changed = 0
  local ki = k_inst(id)
  if i.pin then
    redis.call('HDEL', ki, 'pin')
    changed = 1
  end
  if not cur then return changed end
  local f = {}
  local function set(name, v)
    if v then f[#f + 1], f[#f + 2] = name, v end
  end
  local xk = k_exec(id, cur)
  -- Where older releases read the record: the instance hash when it names the execution and has
  -- the marker hd or there is no execution hash, else x:<cur>:<id>.
  if i.exec and (i.hd or redis.call('EXISTS', xk) == 0) then -- fill in what absence meant
    if not i.out then set('out', old_out(id, cur)) end
    if not i.hn then set('hn', d(redis.call('SCARD', k_hids(id, cur)))) end
    if not i.hb then set('hb', d(redis.call('STRLEN', k_hist(id, cur)))) end
    if not i.hd then set('hd', old_hd(id, cur)) end
    if redis.call('DEL', xk) == 1 then changed = 1 end -- a stale copy nothing read
  else -- the record is in x:<cur>:<id> (or nowhere): move it into the instance hash
    local x = redis.call('HMGET', xk, 'status', 'started', 'completed', 'out', 'hn', 'hd', 'pink')
    local pink = x[7]
    if i.name then pink = i.pink end -- a created instance's hash kept the current pin key
    set('exec', cur)
    set('status', x[1] or i.status)
    set('xs', x[2])
    set('done', x[3])
    set('out', x[4] or old_out(id, cur))
    set('hn', x[5] or d(redis.call('SCARD', k_hids(id, cur))))
    set('hb', d(redis.call('STRLEN', k_hist(id, cur))))
    set('hd', x[6] or old_hd(id, cur))
    set('pink', pink)
    local fresh = redis.call('EXISTS', ki) == 0
    local ttl = redis.call('PTTL', xk)
    redis.call('DEL', xk)
    -- The instance's ready set is its record's pin's (pin_of): one that had no hash was in '-''s.
    local old_pin = i.pink or '-'
    if (pink or '-') ~= old_pin then
      local score = redis.call('ZSCORE', k_ready(old_pin), id)
      if score then
        redis.call('ZREM', k_ready(old_pin), id)
        redis.call('ZADD', k_ready(pink or '-'), score, id)
        if pink then redis.call('SADD', K_PINS, pink) end
      end
    end
    redis.call('HSET', ki, unpack(f))
    if fresh and ttl > 0 then redis.call('PEXPIRE', ki, ttl) end
    redis.call('HDEL', k_lock(id), 'x') -- the lock's note of a current execution the hash did not name
    f = {}
    changed = 1
  end
  if #f > 0 then
    redis.call('HSET', ki, unpack(f))
    changed = 1
  end
  -- Other executions: each has a whole record in x:<e>:<id>.
  for _, e in ipairs(redis.call('ZRANGE', k_execs(id), '0', '-1')) do
    if e ~= cur then
      local xe = k_exec(id, e)
      local x = redis.call('HMGET', xe, 'hn', 'hd', 'out', 'pin')
      f = {}
      if not x[1] then set('hn', d(redis.call('SCARD', k_hids(id, e)))) end
      if not x[2] then set('hd', old_hd(id, e)) end
      if not x[3] then set('out', old_out(id, e)) end
      if #f > 0 then
        redis.call('HSET', xe, unpack(f))
        changed = 1
      end
      if x[4] then
        redis.call('HDEL', xe, 'pin')
        changed = 1
      end
    end
  end
  return changed
end
