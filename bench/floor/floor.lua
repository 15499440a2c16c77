#!lua name=dxfloor
-- The floor: a hand-written minimal store for W1 (hello) and W2 (fan-out), to measure what the
-- fewest Redis calls a turn needs cost in instructions, one item per call and many (bench/floor).
-- Not dxredis: no attempts (lost replies), no indexes, no KV, no timers, no sessions, no tags, no
-- filters, no retention. It keeps what a turn cannot do without: an instance's history (a list),
-- its inbox (a list), its record (one string, read and written whole), a lock per turn (the
-- schedule's score is the lock's expiry and the token), worker items (one hash) on one schedule.
--
-- Keys ({f} tag): oq schedule of instances (score: visible time, or lock expiry while locked);
-- m:<id> inbox; h:<id> history; r:<id> record; wq schedule of worker items (score: visible time or
-- lock expiry); wi item bodies ("<inst>\n<body>").

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- start(id, msg): a StartOrchestration.
local function start(keys, args)
  redis.call('RPUSH', '{f}m:' .. args[1], args[2])
  redis.call('ZADD', '{f}oq', 'NX', now_ms(), args[1])
  return 1
end

-- ofetch(count, lockms): up to count ready instances, each {id, token, inbox count, inbox...,
-- '', history...}.
local function ofetch_n(now, count, lockms)
  local ids = redis.call('ZRANGE', '{f}oq', '-inf', now, 'BYSCORE', 'LIMIT', 0, count)
  if #ids == 0 then return {} end
  local exp = now + lockms
  local z = {}
  for i, id in ipairs(ids) do z[2 * i - 1] = exp; z[2 * i] = id end
  redis.call('ZADD', '{f}oq', 'XX', unpack(z))
  local out = {}
  for _, id in ipairs(ids) do
    local m = redis.call('LRANGE', '{f}m:' .. id, 0, -1)
    local h = redis.call('LRANGE', '{f}h:' .. id, 0, -1)
    out[#out + 1] = { id, exp, m, h, redis.call('GET', '{f}r:' .. id) or '' }
  end
  return out
end

local function ofetch(keys, args)
  return ofetch_n(now_ms(), tonumber(args[1]), tonumber(args[2]))
end

-- oack(n, then per turn: id, token, messages taken, record, event count, events..., item count,
-- (item id, body)...; then fetch count, lockms): each turn its own unit (a lost lock skips it).
local function oack(keys, args)
  local now = now_ms()
  local n, i = tonumber(args[1]), 2
  local ok = {}
  local items = nil
  for t = 1, n do
    local id, token, taken, rec = args[i], args[i + 1], args[i + 2], args[i + 3]
    local ne = tonumber(args[i + 4])
    local ev0 = i + 5
    local ni = tonumber(args[ev0 + ne])
    local it0 = ev0 + ne + 1
    i = it0 + 2 * ni
    if redis.call('ZSCORE', '{f}oq', id) == token then
      if ne > 0 then redis.call('RPUSH', '{f}h:' .. id, unpack(args, ev0, ev0 + ne - 1)) end
      redis.call('SET', '{f}r:' .. id, rec)
      redis.call('LTRIM', '{f}m:' .. id, taken, -1)
      if redis.call('LLEN', '{f}m:' .. id) > 0 then
        redis.call('ZADD', '{f}oq', now, id)
      else
        redis.call('ZREM', '{f}oq', id)
      end
      for k = it0, it0 + 2 * ni - 1, 2 do
        items = items or {}
        items[#items + 1] = args[k]
        items[#items + 1] = id .. '\n' .. args[k + 1]
      end
      ok[t] = 1
    else
      ok[t] = 0
    end
  end
  if items then
    redis.call('HSET', '{f}wi', unpack(items))
    local z = {}
    for k = 1, #items, 2 do z[k] = now; z[k + 1] = items[k] end
    redis.call('ZADD', '{f}wq', unpack(z))
  end
  local fc = tonumber(args[i])
  return { ok, fc > 0 and ofetch_n(now, fc, tonumber(args[i + 1])) or {} }
end

local function wfetch_n(now, count, lockms)
  local ids = redis.call('ZRANGE', '{f}wq', '-inf', now, 'BYSCORE', 'LIMIT', 0, count)
  if #ids == 0 then return {} end
  local exp = now + lockms
  local z = {}
  for i, id in ipairs(ids) do z[2 * i - 1] = exp; z[2 * i] = id end
  redis.call('ZADD', '{f}wq', 'XX', unpack(z))
  local bodies = redis.call('HMGET', '{f}wi', unpack(ids))
  local out = {}
  for i, id in ipairs(ids) do out[i] = { id, exp, bodies[i] } end
  return out
end

local function wfetch(keys, args)
  return wfetch_n(now_ms(), tonumber(args[1]), tonumber(args[2]))
end

-- wack(n, then per item: id, token, instance, completion; then fetch count, lockms).
local function wack(keys, args)
  local now = now_ms()
  local n = tonumber(args[1])
  local ids = {}
  for k = 1, n do ids[k] = args[4 * k - 2] end
  local scores = redis.call('ZMSCORE', '{f}wq', unpack(ids))
  local ok, done, inbox = {}, {}, {}
  for k = 1, n do
    local b = 4 * k - 2
    if scores[k] == args[b + 1] then
      ok[k] = 1
      done[#done + 1] = args[b]
      local inst = args[b + 2]
      if not inbox[inst] then inbox[inst] = {}; inbox[#inbox + 1] = inst end
      local l = inbox[inst]
      l[#l + 1] = args[b + 3]
    else
      ok[k] = 0
    end
  end
  if #done > 0 then
    redis.call('ZREM', '{f}wq', unpack(done))
    redis.call('HDEL', '{f}wi', unpack(done))
    local z = {}
    for _, inst in ipairs(inbox) do
      redis.call('RPUSH', '{f}m:' .. inst, unpack(inbox[inst]))
      z[#z + 1] = now
      z[#z + 1] = inst
    end
    redis.call('ZADD', '{f}oq', 'NX', unpack(z))
  end
  local i = 4 * n + 2
  local fc = tonumber(args[i])
  return { ok, fc > 0 and wfetch_n(now, fc, tonumber(args[i + 1])) or {} }
end

redis.register_function('f_start', start)
redis.register_function('f_ofetch', ofetch)
redis.register_function('f_oack', oack)
redis.register_function('f_wfetch', wfetch)
redis.register_function('f_wack', wack)
