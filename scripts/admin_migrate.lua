-- admin_migrate: convert a format-1 namespace to format 2 (redisprovider.Migrate, dxctl migrate)
-- in steps that each run atomically, so that a migration stopped anywhere is finished by running
-- it again.
-- format: any (it reads format 1, which every other write refuses)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   step: 'begin', 'messages', 'records', 'items' or 'finish'
--   ids[id]...: 'messages' and 'records': instance ids; 'items': format-1 worker item numbers; to
--     the end
-- 'begin' refuses (DX_BUSY) while a format-1 runtime holds a lock, owns a session or waits to
--   fetch (a lock, session or wait registration scored in the future); otherwise it moves the
--   enqueue sequence into the format record, marks the namespace as migrating (every write of
--   either format refuses it from now on: format 1 meets hashes where it wants its sequence, its
--   gates and its orphan index; format 2 meets the mark), drops the format-1 fetch gates (format
--   2's fetches rebuild theirs) and moves the orphan index to its format-2 name. Expired locks and
--   sessions stay: format 2 reclaims them as format 1 would. Already begun: nothing.
-- 'messages' converts the orchestrator messages of the given instances: format 1 kept each
--   message's visible time in a sorted set qz:<id> and its type code (absent for 'O') in t<s>;
--   format 2 keeps both in t<s> ('<code><ms>', lib.lua, oq_messages). An instance without qz:<id>
--   is converted already. Reply: instances converted.
-- 'records' converts the instances' execution records to the one layout
--   (lib.lua, Executions; lib_admin.lua, record_convert): the current execution's record into the
--   instance hash, explicit fields where older releases left them out, no pin. Converted records
--   are left as they are, so a batch may run again. It also runs on a format-2 namespace (written
--   by a release before the one layout), with no begin or finish. Reply: instances converted.
-- 'items' converts the given worker items to format 2's schedules (migrate_item below). Reply:
--   items converted.
-- 'finish' drops format 1's worker indexes (wq:ready:<tk>, wq:due, wq:locked, wq:tags), writes
--   the format record (format 2, one partition, its hash tag) and removes the mark.
-- Reply: 1 done, 0 nothing to do (begun already / not migrating).
-- Errors: DX_BUSY (begin: what is live), DX_FORMAT (the namespace is in a format other than 1 or 2).
-- Cost: O(1) for begin, finish O(worker tag keys); messages O(their messages); records O(their
--   executions); items O(log N) each.
-- Worker item <n> of format 1 (wq:m:<n>, indexed by its number in wq:ready:<tk>, wq:due,
-- wq:locked or its session group) becomes item WQ.id(n) in format 2's places (keys_worker.go):
-- a session-less item in its tag key's schedule at its lock's expiry (locked, expired or not:
-- a fetch takes it again once that passed, as format 1's reclaim did), its due time (delayed) or
-- its enqueue time (ready); a session item in wq:shold (locked or delayed, same scores) or in its
-- group (same score, its number); a held lock's token names the new id; the instance's index
-- lists the new id; a tagged item's tag key joins wq:tks. An item converted already is absent
-- under its old name. Returns whether it converted one.
local now = now_ms()
local function migrate_item(n)
  local ko = P .. 'wq:m:' .. n
  local it = redis.call('HMGET', ko, 'i', 'e', 'a', 's', 't', 'k', 'u', 'c', 'x')
  if not it[1] or not string.match(n, '^%d+$') then return false end
  local id = WQ.id(tonumber(n))
  local sid, tk = it[4] or '', it[5] or '-'
  local kr = sid == '' and P .. 'wq:ready:' .. tk or WQ.k_sitems(tk, sid)
  local locked = redis.call('ZSCORE', P .. 'wq:locked', n)
  local due = redis.call('ZSCORE', P .. 'wq:due', n)
  local ready = redis.call('ZSCORE', kr, n)
  redis.call('ZREM', P .. 'wq:locked', n)
  redis.call('ZREM', P .. 'wq:due', n)
  redis.call('ZREM', kr, n)
  redis.call('RENAME', ko, WQ.k_item(id))
  local f = { 'x', it[9] or '0' }
  if it[6] then f[3], f[4] = 'k', string.sub(it[6], 1, 37) .. id end
  redis.call('HSET', WQ.k_item(id), unpack(f))
  local lock = it[6] and (it[7] or locked or d(now))
  if sid == '' then
    redis.call('ZADD', WQ.k_q(tk), lock or due or it[8] or d(now), id)
  elseif lock or due then
    redis.call('ZADD', WQ.K_SHOLD, lock or due, id)
  elseif ready then
    redis.call('ZADD', kr, ready, id)
  end
  if tk ~= '-' then redis.call('SADD', WQ.K_TKS, tk) end
  local kx, fx = WQ.k_inst(it[1]), it[2] .. ':' .. it[3]
  local words = {}
  for w in string.gmatch(redis.call('HGET', kx, fx) or '', '%S+') do words[#words + 1] = w == n and id or w end
  if #words > 0 then redis.call('HSET', kx, fx, table.concat(words, ' ')) end
  return true
end

local m = redis.call('HMGET', K_META, 'format', 'migrating')
if m[1] and m[1] ~= '1' and m[1] ~= FORMAT then
  return redis.error_reply('DX_FORMAT ' .. m[1] .. ' the namespace is format ' .. m[1] .. '; this dxredis migrates format 1 to ' .. FORMAT)
end
if step == 'begin' then
  if m[2] or m[1] == FORMAT then return 0 end
  local function live(key, what)
    local r = redis.call('ZRANGEBYSCORE', key, '(' .. now_s(), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    if r[1] then
      return what .. ' ' .. r[1] .. ' (' .. key .. ', for ' .. d(math.ceil((tonumber(r[2]) - now) / 1000)) ..
        ' s more; a stopped process\'s entry lapses by itself then)'
    end
    return nil
  end
  local busy = live(K_LOCKED, 'an orchestration turn is locked:') or live(P .. 'wq:locked', 'an activity is locked:') or
    live(P .. 'wq:sowned', 'a session is owned:') or live(K_WAKE_FILTERS, 'an orchestration fetcher waits:') or
    live(P .. 'wq:waiting', 'a worker fetcher waits:')
  if busy then
    return redis.error_reply('DX_BUSY ' .. busy .. ': stop every runtime that uses the namespace, then run dxctl migrate again')
  end
  local seq = '0'
  if redis.call('TYPE', P .. 'seq')['ok'] == 'string' then seq = redis.call('GET', P .. 'seq') end
  redis.call('DEL', P .. 'seq', P .. 'oq:next', P .. 'wq:next')
  if redis.call('TYPE', P .. 'oq:orphans')['ok'] == 'zset' then redis.call('RENAME', P .. 'oq:orphans', K_ORPHANS) end
  redis.call('HSET', K_META, 'migrating', FORMAT, 'seq', seq)
  for _, k in ipairs(FORMAT1_KEYS) do redis.call('HSET', P .. k, 'format', FORMAT) end
  return 1
elseif step == 'messages' then
  if not m[2] then return fail('INVALID', 'migrate: messages before begin') end
  local n = 0
  for _, id in ipairs(ids) do
    local kz = P .. 'qz:' .. id
    local vis = redis.call('ZRANGE', kz, '0', '-1', 'WITHSCORES')
    if #vis > 0 then
      local names = {}
      for j = 1, #vis, 2 do names[#names + 1] = 't' .. vis[j] end
      local codes, f = redis.call('HMGET', k_msgs(id), unpack(names)), {}
      for j = 1, #names do
        f[#f + 1], f[#f + 2] = names[j], (codes[j] or 'O') .. d(tonumber(vis[2 * j]))
      end
      redis.call('HSET', k_msgs(id), unpack(f))
      n = n + 1
    end
    redis.call('DEL', kz)
  end
  return n
elseif step == 'records' then
  if not m[2] and m[1] ~= FORMAT then return fail('INVALID', 'migrate: records before begin') end
  local n = 0
  for _, id in ipairs(ids) do n = n + record_convert(id) end
  return n
elseif step == 'items' then
  if not m[2] then return fail('INVALID', 'migrate: items before begin') end
  local n = 0
  for _, id in ipairs(ids) do
    if migrate_item(id) then n = n + 1 end
  end
  return n
elseif step == 'finish' then
  if not m[2] then return 0 end
  -- Format 1's worker indexes, emptied by 'items' (keys_worker.go: format 2 has none of them).
  local old = { P .. 'wq:due', P .. 'wq:locked', P .. 'wq:tags' }
  for _, tk in ipairs(redis.call('HKEYS', P .. 'wq:tags')) do old[#old + 1] = P .. 'wq:ready:' .. tk end
  redis.call('DEL', unpack(old))
  redis.call('HSET', K_META, 'format', FORMAT, 'partitions', '1', 'tags', string.sub(P, 1, -2))
  redis.call('HDEL', K_META, 'migrating')
  return 1
end
return fail('INVALID', 'unknown migrate step ' .. tostring(step))
