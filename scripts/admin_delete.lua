-- admin_delete: delete instances with all their data: instance hash, executions and histories,
-- flags: allow-oom (only frees memory, so it runs when Redis is out of memory)
-- custom status, KV store and delta, children set (and the link in the parent's), orchestrator
-- messages and every index entry (ready, due, locked, token, lock), worker entries
-- (wq_delete_instance in lib_worker.lua), idx:instances and idx:status:<status>.
-- Removing the lock and its token from oq:tokens makes an in-flight ack of a deleted instance fail
-- with DX_INVALID_TOKEN, so it cannot recreate it; deleting the worker entries makes stale worker
-- tokens fail too.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   retention: retention ms (lib.lua's tree_settle_changed)
--   mode: 'atomic' | 'roots' | 'scan' (below)
--   force: '1'|'0' ('atomic')
--   before: completed_before ms ('0' = none)
--   limit: most roots to delete (bulk modes)
--   list[v]...: by mode, to the end:
--     'atomic' distinct instance ids: all or nothing. Refuses when one is Running and force is
--              '0', or when an existing child of one of them is not in the set (it would be orphaned).
--     'roots'  candidate ids (bulk delete by ids): each that is an existing root whose current
--              status is terminal (Completed, Failed, ContinuedAsNew), completed before `before`
--              when set, and whose tree holds no Running instance is deleted with its whole tree.
--     'scan'   status index to walk, cursor score ('' = start), cursor id, page size: the same
--              rule over one page of idx:status:<status> (lowest score first; with `before` set,
--              the walk stops at the first entry scored at or after it; exact when no score is
--              above its instance's completion time, see DeleteInstanceBulk).
--     'pcheck', 'pdelete' (a namespace of several partitions: one partition's share of an atomic
--              delete whose ids span partitions) n, then the n ids of this partition, then the
--              others: 'pcheck' refuses as 'atomic' would and writes nothing, 'pdelete' deletes
--              this partition's ids.
-- In a namespace of several partitions, the bulk modes skip a root whose tree reaches another
-- partition (a child there, keys.go: explicitly named children live by their own id) and report
-- it; redisprovider deletes those trees by their ids.
-- Reply: {instances, executions, events, queue messages (orchestrator + worker), roots deleted,
--   next cursor score or '' (scan: '' when the index is exhausted), next cursor id, {roots
--   skipped because their tree reaches another partition}}.
--   Only ids that existed (instance hash or executions) count as instances.
-- Errors (atomic; nothing written): DX_RUNNING an instance is Running and force is off,
--   DX_INVALID a child would be orphaned.
-- Cost: O(ids + their children + executions + messages + worker entries deleted); 'scan' adds
--   O(log N + page). Each DEL of a history is O(its events).

local known = inst_known

-- Current status (the current execution's, in the instance hash; lib.lua, Executions), false when
-- unknown.
local function status_of(id)
  return redis.call('HGET', k_inst(id), 'status')
end

local function terminal(s) return s == 'Completed' or s == 'Failed' or s == 'ContinuedAsNew' end

-- Delete the ids of list (a set of them is in_set), adding the counts to res.
local function delete_all(list, in_set, res)
  for _, id in ipairs(list) do
    res[4] = res[4] + wq_delete_instance(id)
    if known(id) then res[1] = res[1] + 1 end
    -- Orchestrator queue, indexes and lock (oq_unindex reads the pin from the instance hash).
    oq_unindex(id)
    redis.call('ZREM', K_LOCKED, id)
    redis.call('ZREM', K_ORPHANS, id)
    res[4] = res[4] + oq_count(id)
    -- Executions and histories (the instance hash read once for all of them).
    local i = rec_fields(id)
    for _, e in ipairs(executions(id, i)) do
      res[2] = res[2] + 1
      res[3] = res[3] + exec_events(exec_record(id, e, i))
      redis.call('DEL', k_hist(id, e), k_hids(id, e), k_exec(id, e), k_xout(id, e))
    end
    -- Parent link and indexes. A parent that stays stops waiting for this child to settle.
    local m = redis.call('HMGET', k_inst(id), 'parent', 'status', 'pp')
    if m[1] and not in_set[m[1]] then
      if m[3] then ob_put(m[3], 'u', m[1], id) else redis.call('SREM', k_children(m[1]), id) end
      if not settled(id) and m[2] then tree_settle_changed(id, true, now_ms(), retention) end
    end
    if m[2] then redis.call('ZREM', k_idx_status(m[2]), id) end
    redis.call('ZREM', K_IDX_INSTANCES, id)
    redis.call('DEL', k_inst(id), k_execs(id), k_msgs(id), k_lock(id), k_cs(id), k_kv(id), k_kd(id),
      k_children(id), P .. 'chx:' .. id)
  end
end

local deferred = {}
local res = { 0, 0, 0, 0, 0, '', '', deferred }

if mode == 'atomic' or mode == 'pcheck' or mode == 'pdelete' then
  local ids, in_set = {}, {}
  local first, n = 1, #list
  if mode ~= 'atomic' then first, n = 2, tonumber(list[1]) + 1 end
  for i = first, #list do
    if i <= n then ids[#ids + 1] = list[i] end
    in_set[list[i]] = true
  end
  if mode == 'pdelete' then
    delete_all(ids, in_set, res)
    return res
  end
  -- Check everything, then write.
  if not force then
    for _, id in ipairs(ids) do
      if status_of(id) == 'Running' then
        return fail('RUNNING', 'instance ' .. id .. ' is running (cancel it first, or delete with force)')
      end
    end
  end
  for _, id in ipairs(ids) do
    for _, c in ipairs(redis.call('SMEMBERS', k_children(id))) do
      if not in_set[c] and (known(c) or (MULTI and redis.call('HEXISTS', P .. 'chx:' .. id, c) == 1)) then
        return fail('INVALID', 'instance ' .. id .. ' has child ' .. c .. ' (a sub-orchestration) that is not ' ..
          'being deleted: deleting it would orphan the child; delete the whole tree')
      end
    end
  end
  if mode == 'pcheck' then return res end
  delete_all(ids, in_set, res)
  return res
end

-- Bulk modes: delete eligible roots with their trees, up to limit roots.

-- The root's tree (root first) when it may be deleted, else nil.
local function eligible_tree(root)
  if not known(root) or redis.call('HEXISTS', k_inst(root), 'parent') == 1 then return nil end
  if not terminal(status_of(root)) then return nil end
  if before > 0 then
    local _, rec = current_record(root)
    local c = rec and rec[3]
    if not c or tonumber(c) >= before then return nil end
  end
  local all, seen = { root }, { [root] = true }
  local i = 1
  while i <= #all do
    if status_of(all[i]) == 'Running' then return nil end
    if MULTI and redis.call('EXISTS', P .. 'chx:' .. all[i]) == 1 then
      deferred[#deferred + 1] = root -- the tree reaches another partition
      return nil
    end
    for _, c in ipairs(redis.call('SMEMBERS', k_children(all[i]))) do
      if not seen[c] and known(c) then
        seen[c] = true
        all[#all + 1] = c
      end
    end
    i = i + 1
  end
  return all, seen
end

local function try_root(id)
  local all, seen = eligible_tree(id)
  if all then
    delete_all(all, seen, res)
    res[5] = res[5] + 1
  end
end

if mode == 'roots' then
  for _, id in ipairs(list) do
    if res[5] >= limit then break end
    try_root(id)
  end
  return res
end

if mode ~= 'scan' then return fail('INVALID', 'unknown delete mode ' .. tostring(mode)) end

local key, cscore, cmember, page = k_idx_status(list[1]), list[2], list[3], tonumber(list[4])

local start = 0
if cscore ~= '' then start = zrank_after(key, cscore, cmember) end
local entries = redis.call('ZRANGE', key, start, start + page - 1, 'WITHSCORES')
local exhausted = #entries < 2 * page
for i = 1, #entries, 2 do
  if res[5] >= limit then
    exhausted = false
    break
  end
  local id, score = entries[i], entries[i + 1]
  if before > 0 and tonumber(score) >= before then
    exhausted = true
    break
  end
  try_root(id)
  res[6], res[7] = score, id
end
if exhausted then res[6], res[7] = '', '' end
return res
