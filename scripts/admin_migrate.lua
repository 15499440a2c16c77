-- admin_migrate: convert a format-1 namespace to format 2 (redisprovider.Migrate, dxctl migrate)
-- in steps that each run atomically, so that a migration stopped anywhere is finished by running
-- it again.
-- format: any (it reads format 1, which every other write refuses)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   step: 'begin', 'messages', 'records' or 'finish'
--   ids[id]...: 'messages' and 'records': instance ids, to the end
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
-- 'finish' writes the format record (format 2, one partition, its hash tag) and removes the mark.
-- Reply: 1 done, 0 nothing to do (begun already / not migrating).
-- Errors: DX_BUSY (begin: what is live), DX_FORMAT (the namespace is in a format other than 1 or 2).
-- Cost: O(1) for begin and finish; messages O(their messages); records O(their executions).
local now = now_ms()
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
elseif step == 'finish' then
  if not m[2] then return 0 end
  redis.call('HSET', K_META, 'format', FORMAT, 'partitions', '1', 'tags', string.sub(P, 1, -2))
  redis.call('HDEL', K_META, 'migrating')
  return 1
end
return fail('INVALID', 'unknown migrate step ' .. tostring(step))
