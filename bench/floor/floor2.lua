#!lua name=dxfloor2
-- The floor in format 2's layout (bench/floor -layout 2): the commands dxredis's scripts run for
-- a hello today, key for key and field for field (a MONITOR trace of `dxbench -workload hello`),
-- driven by Lua that does nothing else: no argument schema, no general sections, no record
-- tables, no checks beyond the lock. What it costs Redis is what a lean turn that keeps today's
-- layout and commands can reach (docs/storage-v2.md, "The floor in format 2's layout"). Hello
-- only (one activity per orchestration), one item per call; the same five functions as floor.lua.

local P = '{dxfloor2-00000000:0}:'
local NOW, NOW_S

local function now()
  local t = redis.call('TIME')
  local us = t[2]
  if #us < 6 then us = string.rep('0', 6 - #us) .. us end
  NOW_S = t[1] .. string.sub(us, 1, 3)
  NOW = NOW_S + 0
end

-- An orchestrator message for instance id (as orch_enqueue and work_ack's completion): its
-- sequence number, the message, the ready index and the wake-up check.
local function enqueue(id, msg, code)
  redis.call('EXISTS', P .. 'lk:' .. id)
  redis.call('HMGET', P .. 'i:' .. id, 'pink', 'name', 'exec')
  local s = string.format('%d', redis.call('HINCRBY', P .. 'meta', 'seq', '1'))
  redis.call('HSET', P .. 'q:' .. id, 'm' .. s, msg, 't' .. s, code .. NOW_S)
  redis.call('ZADD', P .. 'oq:ready:-', 'NX', s, id)
  redis.call('ZRANGE', P .. 'wake:filters', '0', '-1')
end

-- start(id, msg, attempt key)
local function start(_, a)
  now()
  redis.call('ZREM', P .. 'oq:parked', a[1])
  enqueue(a[1], a[2], 'S')
  redis.call('SET', a[3], '1', 'PX', '20000')
  return 1
end

-- The next turn locked, as a fetch's reply: {{id, token, {messages...}, history}}, or {}.
local function fetch(lock_ms)
  redis.call('GET', P .. 'oq:gate')
  redis.call('SMEMBERS', P .. 'oq:pins')
  local h = redis.call('ZRANGE', P .. 'oq:ready:-', '0', '0', 'WITHSCORES')
  local id = h[1]
  if not id then return {} end
  redis.call('ZREM', P .. 'oq:ready:-', id)
  local q = redis.call('HGETALL', P .. 'q:' .. id)
  local iv = redis.call('HMGET', P .. 'i:' .. id, 'name', 'ver', 'exec', 'tag', 'hn', 'kv', 'hb')
  local token = 'ffffffff-ffff-4fff-bfff-ffffffffffff.' .. id
  local until_s = string.format('%d', NOW + lock_ms)
  local msgs, seqs = {}, {}
  for i = 1, #q, 2 do
    if string.byte(q[i], 1) == 109 then -- 'm'
      msgs[#msgs + 1] = q[i + 1]
      seqs[#seqs + 1] = string.sub(q[i], 2)
    end
  end
  redis.call('HSET', P .. 'lk:' .. id, 'tok', token, 'until', until_s, 'seqs', table.concat(seqs, ' '),
    'inst', iv[1] and '1' or '0', 'tag', 'ffffffffffff')
  redis.call('ZADD', P .. 'oq:locked', until_s, id)
  local hist = ''
  if iv[3] then hist = redis.call('GET', P .. 'h:1:' .. id) end
  return { { id, token, msgs, hist } }
end

local function ofetch(_, a)
  now()
  return fetch(tonumber(a[2]))
end

-- oack(1, id, token, taken, record, event count, events..., item count, (item id, body)...,
-- fetch count, lock ms, attempt key): the turn (the hello's first or its last), then the next.
local function oack(_, a)
  now()
  local id, token, ne = a[2], a[3], tonumber(a[6])
  local ni = tonumber(a[7 + ne])
  local lk = redis.call('HMGET', P .. 'lk:' .. id, 'tok', 'until', 'seqs', 'inst', 'more', 'tag')
  if lk[1] ~= token then return { { 0 }, {} } end
  local ikey, hkey = P .. 'i:' .. id, P .. 'h:1:' .. id
  local iv = redis.call('HMGET', ikey, 'name', 'ver', 'status', 'open', 'exec', 'parent', 'tag', 'hn', 'hb',
    'kv', 'hd', 'out', 'pink', 'xs', 'done', 'created', 'updated')
  redis.call('DEL', P .. 'q:' .. id)
  local add = table.concat(a, '\n', 7, 6 + ne) .. '\n'
  if not iv[1] then -- the first turn: the record, the activity
    local hb = redis.call('APPEND', hkey, add)
    redis.call('ZADD', P .. 'idx:status:Running', NOW_S, id)
    redis.call('HSET', ikey, 'name', 'Hello', 'ver', '1.0.0', 'created', NOW_S, 'exec', '1', 'tag', 'ffffffffffff',
      'updated', NOW_S, 'status', 'Running', 'out', '-', 'hn', string.format('%d', ne), 'hb', string.format('%d', hb), 'hd', '1')
    redis.call('ZADD', P .. 'idx:instances', NOW_S, id)
    for k = 8 + ne, 7 + ne + 2 * ni, 2 do
      local b = 'b' .. string.format('%d', redis.call('HINCRBY', P .. 'meta', 'seq', '1'))
      redis.call('HSETNX', P .. 'wq:inst:' .. id, '1:' .. a[k], b)
      redis.call('HSET', P .. 'wq:m:' .. b, 'j', a[k + 1], 'i', id, 'e', '1', 'a', a[k], 's', '', 't', '-', 'n', '0',
        'c', NOW_S, 'x', '1')
      redis.call('ZADD', P .. 'wq:q:-', NOW_S, b)
      redis.call('ZMSCORE', P .. 'wq:waiting', 'p:-', 'p:*')
    end
  else -- the last turn: the history rewritten exactly, the status, the watchers, the stats
    local v = (redis.call('GET', hkey) or '') .. add
    redis.call('SET', hkey, v, 'KEEPTTL')
    redis.call('ZREM', P .. 'idx:status:Running', id)
    redis.call('ZADD', P .. 'idx:status:Completed', NOW_S, id)
    redis.call('HSET', ikey, 'updated', NOW_S, 'status', 'Completed', 'out', '524 106',
      'hn', string.format('%d', iv[8] + ne), 'hb', string.format('%d', #v))
  end
  redis.call('DEL', P .. 'lk:' .. id)
  redis.call('ZREM', P .. 'oq:locked', id)
  if iv[1] then
    redis.call('PUBLISH', P .. 'status', id)
    redis.call('HINCRBY', P .. 'stats', '29932714:oc', '1')
  end
  local i = 8 + ne + 2 * ni
  redis.call('SET', a[i + 2], '1', 'PX', '25000')
  return { { 1 }, fetch(tonumber(a[i + 1])) }
end

-- The next activity locked, as a fetch's reply: {{id, token, body}}, or {}.
local function wfetch_one(lock_ms)
  redis.call('EXISTS', P .. 'wq:scount')
  local h = redis.call('ZRANGE', P .. 'wq:q:-', '0', '0', 'WITHSCORES')
  if not h[1] or h[2] + 0 > NOW then return {} end
  local key = P .. 'wq:m:' .. h[1]
  local it = redis.call('HMGET', key, 'j', 'n')
  local token = 'ffffffff-ffff-4fff-bfff-ffffffffffff.' .. h[1]
  local until_s = string.format('%d', NOW + lock_ms)
  redis.call('HSET', key, 'k', token, 'u', until_s, 'n', string.format('%d', it[2] + 1))
  redis.call('ZADD', P .. 'wq:q:-', until_s, h[1])
  return { { h[1], token, it[1] } }
end

local function wfetch(_, a)
  now()
  return wfetch_one(tonumber(a[2]))
end

-- wack(1, id, token, instance, completion, fetch count, lock ms, attempt key): the completion
-- to its instance, the item gone, then the next.
local function wack(_, a)
  now()
  local id, token, inst = a[2], a[3], a[4]
  local key = P .. 'wq:m:' .. id
  local it = redis.call('HMGET', key, 'k', 'u', 's', 't', 'n', 'i', 'e', 'a', 'x', 'c', 'r')
  if it[1] ~= token then return { { 0 }, {} } end
  enqueue(inst, a[5], 'O')
  redis.call('HINCRBY', P .. 'stats', '29932714:ac', '1')
  redis.call('ZREM', P .. 'wq:q:-', id)
  redis.call('DEL', key)
  redis.call('HDEL', P .. 'wq:inst:' .. inst, it[7] .. ':' .. it[8])
  redis.call('SET', a[8], '1', 'PX', '50000')
  return { { 1 }, wfetch_one(tonumber(a[7])) }
end

redis.register_function('f2_start', start)
redis.register_function('f2_ofetch', ofetch)
redis.register_function('f2_oack', oack)
redis.register_function('f2_wfetch', wfetch)
redis.register_function('f2_wack', wack)
