-- orch_ack: commit one orchestration turn atomically and release the instance lock.
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] lock token, [3] execution id, [4] status ('' = unchanged),
--   [5] '1' when output is given, [6] output, [7] orchestration name, [8] version, [9] parent id,
--   [10] pinned version ('' = none), [11] its sortable pin key, [12] custom status op
--   ('' none, 's' set, 'c' clear), [13] custom status value, [14] '1' when status is terminal,
--   [15] retention ms (0 = keep forever), then sections, each a count followed by its entries:
--   history (event_id, json), kv ops (op 's'|'c'|'C', key, "<ms>|<value>"),
--   worker items (json, instance, execution, activity id, session, tag),
--   cancelled activities (instance, execution, activity id),
--   orchestrator items (target instance, json, type code, visible_at ms or 0).
-- Reply: 1.
-- Errors (nothing written): DX_INVALID_TOKEN unknown/expired token (also after a delete under
--   the lock, or when the instance existed at fetch and its retention TTL lapsed since), DX_DUPLICATE event id already stored or repeated in the delta.
-- Cost: O(delta + items + locked messages + KV keys touched) — never O(history length).
local token, exec = ARGV[2], ARGV[3]
local status, has_output, output = ARGV[4], ARGV[5] == '1', ARGV[6]
local name, ver, parent, pin, pink = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local cs_op, cs_val, terminal, retention = ARGV[12], ARGV[13], ARGV[14] == '1', tonumber(ARGV[15])
local now = now_ms()

local id, lk = oq_held(token, now, true)
if not id then return lk end

-- Parse sections.
local pos = 16
local function section(width)
  local n = tonumber(ARGV[pos]); pos = pos + 1
  local out = {}
  for i = 1, n do
    local e = {}
    for j = 1, width do e[j] = ARGV[pos + j - 1] end
    out[i] = e
    pos = pos + width
  end
  return out
end
local hist, kvops = section(2), section(3)
local witems, cancels, oitems = section(6), section(3), section(4)

-- Check duplicates before any write.
local dup = history_check(id, exec, hist)
if dup then return dup end

-- An instance that existed when the turn was fetched and is gone now expired (retention) under
-- the lock: writing would re-create it as a Running fragment of itself.
local ikey = k_inst(id)
local has_inst = redis.call('EXISTS', ikey) == 1
if lk[4] == '1' and not has_inst then
  return fail('INVALID_TOKEN', 'Invalid lock token: instance ' .. id .. ' expired while locked')
end

-- 1. The messages this token locked are consumed.
oq_delete_many(id, words(lk[3]))

-- 2. Instance and execution records.
local prev = current_exec(id)
-- Retention bookkeeping (lib.lua): whether the instance was settled before this turn. Only a
-- status change (given, or a new execution's) can change that here.
local changes_status = status ~= '' or prev == nil or tonumber(exec) > prev
local was_settled = has_inst and changes_status and settled(id)
if not has_inst and name ~= '' and ver ~= '' then
  redis.call('HSET', ikey, 'name', name, 'ver', ver, 'created', now, 'updated', now, 'status', 'Running')
  if parent ~= '' then
    redis.call('HSET', ikey, 'parent', parent)
    redis.call('SADD', k_children(parent), id)
    if redis.call('EXISTS', k_inst(parent)) == 1 then -- a new child runs: its parent is not settled
      local parent_settled = settled(parent)
      redis.call('HINCRBY', k_inst(parent), 'open', 1)
      if parent_settled then tree_settle_changed(parent, false, now, retention) end
    end
  end
  redis.call('ZADD', K_IDX_INSTANCES, now, id)
  redis.call('ZADD', k_idx_status('Running'), now, id)
  has_inst = true
elseif has_inst and name ~= '' and ver ~= '' then
  redis.call('HSET', ikey, 'name', name, 'ver', ver)
end
local xkey = k_exec(id, exec)
if redis.call('ZADD', k_execs(id), exec, exec) == 1 then -- a new execution record
  redis.call('HSET', xkey, 'started', now, 'status', 'Running')
end
local new_exec = prev == nil or tonumber(exec) > prev
local is_current = new_exec or tonumber(exec) == prev

-- 3. Pinned version: stored when given; a new execution starts unpinned unless given.
if pin ~= '' then redis.call('HSET', xkey, 'pin', pin, 'pink', pink) end
if has_inst and is_current then
  if pin ~= '' then
    redis.call('HSET', ikey, 'pin', pin, 'pink', pink)
  elseif new_exec then
    local xp = redis.call('HMGET', xkey, 'pin', 'pink')
    if xp[1] then redis.call('HSET', ikey, 'pin', xp[1], 'pink', xp[2]) else redis.call('HDEL', ikey, 'pin', 'pink') end
  end
end

-- 4. History (append only).
history_append(id, exec, hist)

-- 5. Status and output.
if status ~= '' then
  redis.call('HSET', xkey, 'status', status)
  if has_output then redis.call('HSET', xkey, 'output', output) else redis.call('HDEL', xkey, 'output') end
  if terminal then redis.call('HSET', xkey, 'completed', now) end
end
if has_inst and is_current then
  if status == '' and not new_exec then
    redis.call('HSET', ikey, 'updated', now) -- same execution, same status
  else
    local old = redis.call('HGET', ikey, 'status')
    -- The output stays in the execution hash only: a copy here would push the instance hash out
    -- of Redis's compact listpack encoding (values over 64 bytes) and store it twice.
    local st = redis.call('HGET', xkey, 'status')
    redis.call('HSET', ikey, 'exec', exec, 'status', st, 'updated', now)
    if old ~= st then
      if old then redis.call('ZREM', k_idx_status(old), id) end
      redis.call('ZADD', k_idx_status(st), now, id) -- score: when it entered the status
    end
  end
end

-- 6. Custom status: the last CustomStatusUpdated of the delta.
if cs_op ~= '' then
  local ck = k_cs(id)
  redis.call('HINCRBY', ck, 'v', 1)
  if cs_op == 's' then redis.call('HSET', ck, 's', cs_val, 'n', '0') else redis.call('HSET', ck, 's', '', 'n', '1') end
end

-- 7. KV: changes go to the current-execution delta; a terminal status merges it into the store.
local kd, kv = k_kd(id), k_kv(id)
for _, op in ipairs(kvops) do
  if op[1] == 's' then
    redis.call('HSET', kd, op[2], 's' .. op[3])
  elseif op[1] == 'c' then
    redis.call('HSET', kd, op[2], 't')
  else
    for _, key in ipairs(redis.call('HKEYS', kv)) do redis.call('HSET', kd, key, 't') end
    for _, key in ipairs(redis.call('HKEYS', kd)) do redis.call('HSET', kd, key, 't') end
  end
end
if terminal then
  local d = redis.call('HGETALL', kd)
  for i = 1, #d, 2 do
    if d[i + 1] == 't' then redis.call('HDEL', kv, d[i]) else redis.call('HSET', kv, d[i], string.sub(d[i + 1], 2)) end
  end
  redis.call('DEL', kd)
end

-- 8. Worker items (wq_enqueue wakes a fetcher that can take each), then cancellations (an activity scheduled and cancelled in one turn ends up absent).
for _, w in ipairs(witems) do wq_enqueue(now, w[1], w[2], w[3], w[4], w[5], w[6]) end
for _, c in ipairs(cancels) do wq_cancel(c[1], c[2], c[3]) end

-- 9. Orchestrator items (TimerFired visible at fire_at_ms).
local woken = {} -- pin key -> instances made ready
local function ready(pin)
  if pin then woken[pin] = (woken[pin] or 0) + 1 end
end
for _, o in ipairs(oitems) do ready(oq_enqueue(o[1], o[2], o[3], tonumber(o[4]), now)) end

-- 10. Retention: a settled tree's root gets a TTL; an instance running again keeps its data.
if has_inst and is_current and changes_status then
  local now_settled = settled(id)
  if now_settled ~= was_settled then tree_settle_changed(id, now_settled, now, retention) end
end

-- 11. Release the lock; messages that arrived meanwhile make the instance ready again.
ready(oq_unlock(id, token, now))
for pin, n in pairs(woken) do wake_orch(pin, n) end
return 1
