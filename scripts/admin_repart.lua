-- admin_repart: the steps of re-partitioning a namespace (redisprovider.Migrate with
-- MigrateOptions.Partitions, dxctl migrate --partitions) that run inside one partition: the checks
-- and the format records. redisprovider moves the keys between partitions itself (repartition.go).
-- format: any (it reads and writes the records of a namespace being re-partitioned)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   step: 'check', 'plan', 'mark', 'unmark', 'part', 'switch', 'open' or 'done' (below)
--   n: 'part' and 'switch': the new partition count
--   tags: 'plan': the old partitions' tags; 'part': the partition's own tag; 'switch': the new
--     partitions' tags (braced, space-separated, as the format records keep them)
--   to: 'plan': the new partitions' tags
--   seq: 'part': the greatest enqueue sequence number of the old partitions
-- The root record (keys.go, RootMeta) keeps the plan while the namespace moves: migrating (the
-- mark every write script refuses, lib.lua's format_check), repart_from and repart_to (the old
-- and the new tags).
-- 'check' (an old partition) says what uses it: a held orchestration lock, a held activity lock, an
--   owned session, a waiting fetcher (each an entry scored in the future), or outbox entries not
--   forwarded yet. Writes nothing.
-- 'plan' (the root) records the plan and the mark unless a plan is there already.
-- 'mark' (an old partition) checks again as 'check' does and, when nothing uses it, marks it.
-- 'unmark' removes the mark (and on the root the plan): a re-partitioning that was refused.
-- 'part' (a new partition) writes its record (format 2, n partitions, its tag, the mark) unless it
--   has one (the root has), keeps the greater of its seq and the given one, recomputes its chores time
--   (lib_admin.lua, chores_due) and drops its housekeeping gate (the next fetch computes it).
-- 'switch' (the root) writes the new count and tags; with several partitions the root keeps no
--   sequence (it is no partition's record any more).
-- 'open' (a new partition that is not the root) removes its mark; 'done' (the root) removes the
--   mark and the plan.
-- Reply: 'check', 'mark': '' or what uses the partition; 'plan': {repart_from, repart_to} as
--   recorded; otherwise 1.
-- Errors: DX_FORMAT (the partition is not in format 2).
-- Cost: O(1) but 'check' and 'mark': O(worker tag keys + entries scored in the future).
local now = now_ms()
local m = redis.call('HMGET', K_META, 'format', 'repart_to')
if m[1] and m[1] ~= FORMAT then
  return redis.error_reply('DX_FORMAT ' .. m[1] .. ' the namespace is format ' .. m[1] .. '; this dxredis re-partitions format ' .. FORMAT)
end

-- What holds or waits on the partition now ('' nothing).
local function busy()
  local function live(key, what, locked_item)
    for _, x in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. now_s(), '+inf')) do
      if not locked_item or redis.call('HEXISTS', WQ.k_item(x), 'k') == 1 then
        if what == 'waits' then return 'a fetcher waits (' .. key .. ')' end
        return what .. ' ' .. x .. ' (' .. key .. ')'
      end
    end
    return nil
  end
  local sets = { WQ.k_q('-') }
  for _, tk in ipairs(redis.call('SMEMBERS', WQ.K_TKS)) do sets[#sets + 1] = WQ.k_q(tk) end
  sets[#sets + 1] = WQ.K_SHOLD
  local why = live(K_LOCKED, 'an orchestration turn is locked:') or live(WQ.K_SOWNED, 'a session is owned:') or
    live(K_WAKE_FILTERS, 'waits') or live(WQ.K_WAITING, 'waits')
  for _, key in ipairs(sets) do
    why = why or live(key, 'an activity is locked:', true)
  end
  if why then return why end
  local ob = redis.call('ZRANGE', P .. 'ob:dirty', '0', '0')
  if ob[1] then return 'outbox ' .. P .. 'ob:' .. ob[1] .. ' holds entries not forwarded yet' end
  return ''
end

if step == 'check' then
  return busy()
elseif step == 'plan' then
  if not m[2] then
    redis.call('HSET', K_META, 'migrating', FORMAT, 'repart_from', tags, 'repart_to', to)
  end
  return redis.call('HMGET', K_META, 'repart_from', 'repart_to')
elseif step == 'mark' then
  local why = busy()
  if why == '' then redis.call('HSET', K_META, 'migrating', FORMAT) end
  return why
elseif step == 'unmark' then
  redis.call('HDEL', K_META, 'migrating', 'repart_from', 'repart_to')
  return 1
elseif step == 'part' then
  if not m[1] then
    redis.call('HSET', K_META, 'format', FORMAT, 'partitions', d(n), 'tags', tags, 'migrating', FORMAT)
  end
  local cur = tonumber(redis.call('HGET', K_META, 'seq')) or 0
  if tonumber(seq) > cur then redis.call('HSET', K_META, 'seq', seq) end
  redis.call('DEL', K_OQ_NEXT)
  local at = chores_due(now)
  if at then redis.call('SET', K_CHORES, d(at)) else redis.call('DEL', K_CHORES) end
  return 1
elseif step == 'switch' then
  redis.call('HSET', K_META, 'partitions', d(n), 'tags', tags)
  if n > 1 then redis.call('HDEL', K_META, 'seq') end
  return 1
elseif step == 'open' then
  redis.call('HDEL', K_META, 'migrating')
  return 1
elseif step == 'done' then
  redis.call('HDEL', K_META, 'migrating', 'repart_from', 'repart_to')
  return 1
end
return fail('INVALID', 'unknown re-partitioning step ' .. tostring(step))
