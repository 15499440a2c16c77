-- orch_ack: commit one orchestration turn atomically and release the instance lock.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   exec: execution id
--   status: '' = unchanged
--   has_output: '1' when output is given
--   output: the output
--   out_at: where the output is in the appended history: '<byte offset> <length>' of it as a
--     JSON string ('' = not there)
--   name: orchestration name
--   ver: version
--   parent: parent id
--   pin: pinned version ('' = none)
--   pink: its sortable pin key
--   cs_op: custom status op ('' none, 's' set, 'c' clear)
--   cs_val: custom status value
--   terminal: '1' when status is terminal
--   retention: retention ms (0 = keep forever)
--   ppart: the partition of the parent when it is not this one ('' otherwise; namespaces of
--     several partitions, keys.go)
--   hist[event_id, json]: history (each section: a count, then its entries)
--   kvops[op, key, value]: kv ops (op 's'|'c'|'C', key, "<ms>|<value>")
--   witems[json, instance, execution, activity, session, tag]: worker items
--   cancels[instance, execution, activity]: cancelled activities
--   oitems[target, json, code, visible_at]: orchestrator items (target instance, json, type
--     code, visible_at ms or 0)
--   xo[dest, target, json, code, visible_at]: orchestrator items for instances of other
--     partitions (dest: the partition), sent through the outbox (lib.lua, ob_put)
--   xw[dest, json, instance, execution, activity, session, tag]: worker items of sessions homed
--     in other partitions, sent through the outbox; the instance's index wq:inst notes where
--     each went ('@<dest>'), so that a cancellation follows it
-- Sections are read in place (args.go, Section): <name>_at and <name>_n.
-- Reply: 1, or 2 when the ack wrote to an outbox (redisprovider forwards it then).
-- Errors (nothing written): DX_INVALID_TOKEN unknown/expired token (also after a delete under
--   the lock, or when the instance existed at fetch and its retention TTL lapsed since), DX_DUPLICATE event id already stored or repeated in the delta.
-- Cost: O(delta + items + locked messages + KV keys touched) — never O(history length).
-- Instance hash fields (i:<id>): name, ver, created, updated (ms), parent, open (children not
--   settled, retention), tag (current execution's tag, see orch_fetch), kv ('1' once KV was
--   written), and the current execution's record, always (one layout: lib.lua, Executions).
local now, nows = now_ms(), now_s()

local id, lk, lkey = oq_held(token, now, true)
if not id then return lk end

-- The instance record, read once (fields: lib.lua, Executions). An instance that did not exist
-- when the turn was fetched (its first turn) is checked with EXISTS, not read: 17 absent fields
-- cost more to bring into Lua than the command (a value crossing into Lua is ~1,000 Redis
-- instructions). Under the lock only an append (orch_append, tests and tools) can create it.
local ikey = k_inst(id)
local iv = NO_INSTANCE
if lk[4] == '1' or redis.call('EXISTS', ikey) == 1 then
  iv = redis.call('HMGET', ikey, 'name', 'ver', 'status', 'open', 'exec', 'parent', 'tag', 'hn', 'hb',
    'kv', 'hd', 'out', 'pink', 'xs', 'done', 'created', 'updated')
end
local has_inst = iv[1] ~= false -- created (an ack with name and version wrote the record)
-- An instance that existed when the turn was fetched and is gone now expired (retention) under
-- the lock: writing would re-create it as a Running fragment of itself.
if lk[4] == '1' and not has_inst then
  return fail('INVALID_TOKEN', 'Invalid lock token: instance ' .. id .. ' expired while locked')
end

-- The execution this turn writes and its record (lib.lua, Executions), as locals in one order:
-- status, started, completed, out, hn, hb, hd, pink (no record tables: an ack built four and
-- looped over their fields, about 8% of a hello's Lua VM instructions, luaprof). s_*: what the record's hash holds now (the
-- instance hash's started and completed as stored: xs and done are left out when they equal
-- created and updated, lib.lua, exec_record); r_*: what this turn makes of it (started and
-- completed as they are); only the fields that differ are written (rec_put). The current
-- execution's record is in the instance hash (a new current execution takes the place of the
-- previous one, whose record moves to x:<prev>:<id>; one that an append recorded in x:<e>:<id> is
-- moved in); any other execution's is in x:<e>:<id>, which does not keep hb.
local prev = iv[5] and iv[5] + 0 or nil -- (+ 0 converts once, tonumber twice)
local nexec = exec + 0
local new_exec = prev == nil or nexec > prev
local is_current = new_exec or nexec == prev
-- x:<e>:<id> is read or written only for an execution other than the instance's current one
-- (prev nil: there is none, this one becomes it); the key is built only then.
local xkey = prev ~= nil and nexec ~= prev and k_exec(id, exec) or nil
local s_st, s_sd, s_cd, s_out, s_hn, s_hb, s_hd, s_pk -- (nil: absent)
local r_st, r_sd, r_cd, r_out, r_hn, r_hb, r_hd, r_pk
local in_x = false
if nexec == prev then -- the usual turn: the current execution's record, unfolded
  r_st, r_sd, r_cd, r_out, r_hn, r_hb, r_hd, r_pk = iv[3] or nil, iv[14] or iv[16] or nil, iv[15] or nil,
    iv[12] or nil, iv[8] or nil, iv[9] or nil, iv[11] or nil, iv[13] or nil
  if not r_cd and is_terminal(r_st) then r_cd = iv[17] or nil end
elseif prev ~= nil then -- (an instance without a current execution has no other either)
  local x = redis.call('HMGET', xkey, 'status', 'started', 'completed', 'out', 'hn', 'hd', 'pink')
  if x[5] then -- hn: every execution record has it
    in_x = true
    s_st, s_sd, s_cd, s_out, s_hn, s_hd, s_pk = x[1] or nil, x[2] or nil, x[3] or nil, x[4] or nil, x[5], x[6] or nil, x[7] or nil
    r_st, r_sd, r_cd, r_out, r_hn, r_hd, r_pk = s_st, s_sd, s_cd, s_out, s_hn, s_hd, s_pk -- x: keeps no hb
  end
end
local new_record = nexec ~= prev and not in_x
if new_record then
  r_st, r_sd, r_out, r_hn, r_hb, r_hd = 'Running', nows, '-', '0', '0', '1'
end
if is_current then
  if in_x then -- an appended execution this ack makes current (and starts, unless an ack did)
    r_hb = d(redis.call('STRLEN', k_hist(id, exec)))
    r_sd = r_sd or nows
  end
  -- as stored: r_sd and r_cd are folded before they are compared
  s_st, s_sd, s_cd, s_out, s_hn, s_hb, s_hd, s_pk = iv[3] or nil, iv[14] or nil, iv[15] or nil, iv[12] or nil,
    iv[8] or nil, iv[9] or nil, iv[11] or nil, iv[13] or nil
else
  r_hb = nil
end
local hn, hb = r_hn and r_hn + 0, r_hb and r_hb + 0 -- the history's events and bytes before this turn
local dense = nil -- the event count while the execution's ids are dense (lib.lua)
if r_hd == '1' then dense = hn end

-- Check duplicates before any write.
local still = dense ~= nil and dense_next(dense, ARGV, hist_at, hist_n) -- (true for no events)
if hist_n > 0 then
  local dup = history_check(id, exec, ARGV, hist_at, hist_n, dense, still)
  if dup then return dup end
end

-- 1. The messages this token locked are consumed: all of the instance's unless others arrived
-- during the lock or were delayed ('more').
if lk[5] == '1' then
  oq_delete_many(id, words(lk[3]))
else
  redis.call('DEL', k_msgs(id))
end

-- 2. Instance fields are gathered in ifields (written with one HSET at the end; the record's
-- fields join them when it is in the instance hash). (Helpers here are library functions, not
-- closures built per call.)
local ifields = {}
-- Retention bookkeeping (lib.lua): whether the instance was settled before this turn. Only a
-- status change (given, or a new execution's) can change that here.
local changes_status = status ~= '' or new_exec
local was_settled = has_inst and changes_status and settled_of(iv[3], iv[4])
local old_status, parent_id = iv[3], iv[6] or ''
local created = false
if not has_inst and name ~= '' and ver ~= '' then
  add_field(ifields, 'name', name); add_field(ifields, 'ver', ver); add_field(ifields, 'created', nows)
  if parent ~= '' then
    add_field(ifields, 'parent', parent)
    if ppart ~= '' then add_field(ifields, 'pp', ppart) end -- the parent's partition (lib.lua, tree_settle_changed)
    parent_id = parent
  end
  created, has_inst, old_status = true, true, nil
elseif has_inst and name ~= '' and ver ~= '' and (iv[1] ~= name or iv[2] ~= ver) then
  add_field(ifields, 'name', name); add_field(ifields, 'ver', ver)
end
-- A new current execution moves the previous one's record out of the instance hash.
if new_exec and prev ~= nil then
  local a, st = {}, iv[3] or nil
  local cd = iv[15] or nil
  if not cd and is_terminal(st) then cd = iv[17] or nil end
  rec_put(a, nil, 'status', st); rec_put(a, nil, 'started', iv[14] or iv[16] or nil); rec_put(a, nil, 'completed', cd)
  rec_put(a, nil, 'out', iv[12] or nil); rec_put(a, nil, 'hn', iv[8] or nil); rec_put(a, nil, 'hd', iv[11] or nil)
  rec_put(a, nil, 'pink', iv[13] or nil)
  redis.call('HSET', k_exec(id, prev), unpack(a))
end
if new_exec and prev ~= nil or new_record and not is_current then execs_add(id, exec) end

-- 3. Pinned version: stored when given; a new execution starts unpinned unless given. The record
-- keeps only its sortable key (what the ready indexes use; the version itself is in the history's
-- OrchestrationStarted event).
if pin ~= '' then r_pk = pink end

-- 4. History (append only). The record counts its execution's events and, in the instance hash,
-- bytes (hn, hb: what lite fetches report, and when a finished history may be compacted).
local compact = nil
if terminal and is_current then compact = hb end
local added, hlen = history_append(id, exec, ARGV, hist_at, hist_n, compact, dense, still)
if hist_n > 0 then
  r_hn = d(hn + hist_n)
  -- (hlen is hb + added, but after a lost or cut history: then the bytes that are there)
  if hb then r_hb = d(hlen) end
end
r_hd = still and '1' or '0'

-- 5. Status and output.
if status ~= '' then
  r_st = status
  -- The output is not a field of a record: a value over 64 bytes would push the hash out of Redis's
  -- compact listpack encoding (~400 bytes more). It is where the history has it (the terminal
  -- event carries it), else a string key of its own, xo:<e>:<id> (lib.lua, exec_output).
  local p, l = string.match(out_at, '^(%d+) (%d+)$')
  if has_output and p and hb then
    if r_out == 'k' then redis.call('DEL', k_xout(id, exec)) end
    r_out = d(hlen - added + p) .. ' ' .. l
  elseif has_output then
    redis.call('SET', k_xout(id, exec), output, 'KEEPTTL')
    r_out = 'k'
  else
    if r_out == 'k' then redis.call('DEL', k_xout(id, exec)) end
    r_out = '-'
  end
  if terminal then r_cd = nows end
end
local st = nil -- the current execution's status after this turn
if is_current then
  if r_st == nil and has_inst then r_st = 'Running' end -- an appended execution a created instance acks
  st = r_st
  if new_exec then
    add_field(ifields, 'exec', exec)
    -- The execution's tag: the one the fetch announced, unless it is the old execution's.
    local tag = lk[6]
    if not tag or tag == iv[7] then tag = exec_tag(token) end
    add_field(ifields, 'tag', tag)
  end
  if has_inst then
    add_field(ifields, 'updated', nows)
    if old_status ~= st then
      if old_status then redis.call('ZREM', k_idx_status(old_status), id) end
      redis.call('ZADD', k_idx_status(st), nows, id) -- score: when it entered the status
    end
  end
elseif created then -- created by a turn of an older execution: the current one's status is the instance's
  st = iv[3] or 'Running'
  if not iv[3] then add_field(ifields, 'status', st) end
  add_field(ifields, 'updated', nows)
  redis.call('ZADD', k_idx_status(st), nows, id)
end

-- 6. Custom status: the last CustomStatusUpdated of the delta.
if cs_op ~= '' then
  local ck = k_cs(id)
  redis.call('HINCRBY', ck, 'v', '1')
  if cs_op == 's' then redis.call('HSET', ck, 's', cs_val, 'n', '0') else redis.call('HSET', ck, 's', '', 'n', '1') end
end

-- 7. KV: changes go to the current-execution delta; a terminal status merges it into the store.
-- The instance field kv marks a created instance that ever wrote KV (fetches and this merge skip
-- the KV keys of the others).
-- (The keys are built where used: most acks touch no KV.)
if kvops_n > 0 then
  local kd, kv = k_kd(id), k_kv(id)
  if has_inst and not iv[10] then add_field(ifields, 'kv', '1') end
  for j = kvops_at + 1, kvops_at + 3 * kvops_n, 3 do
    local op = ARGV[j]
    if op == 's' then
      redis.call('HSET', kd, ARGV[j + 1], 's' .. ARGV[j + 2])
    elseif op == 'c' then
      redis.call('HSET', kd, ARGV[j + 1], 't')
    else
      for _, key in ipairs(redis.call('HKEYS', kv)) do redis.call('HSET', kd, key, 't') end
      for _, key in ipairs(redis.call('HKEYS', kd)) do redis.call('HSET', kd, key, 't') end
    end
  end
end
if terminal and (kvops_n > 0 or iv[10] or not has_inst or created) then
  local kd, kv = k_kd(id), k_kv(id)
  local d = redis.call('HGETALL', kd)
  for i = 1, #d, 2 do
    if d[i + 1] == 't' then redis.call('HDEL', kv, d[i]) else redis.call('HSET', kv, d[i], string.sub(d[i + 1], 2)) end
  end
  if #d > 0 then redis.call('DEL', kd) end
end

-- The records, written once: the fields this turn changed (rec_put). In the instance hash,
-- started is left out when it is the instance's created time and completed when it is its
-- updated time and the status is terminal (lib.lua, exec_record: about 30 bytes less per finished
-- instance). This turn wrote created when it created the instance, and updated, in the current
-- execution's case, when the instance has a record (5.). One write-back for either hash: the
-- instance hash names started and completed xs and done; x:<e>:<id> keeps no hb (r_hb and s_hb
-- are nil there, so rec_put writes nothing for it).
if is_current then
  if r_sd == (created and nows or iv[16] or nil) then r_sd = nil end
  if is_terminal(r_st) and r_cd == (has_inst and nows or iv[17] or nil) then r_cd = nil end
end
local rf = is_current and ifields or {}
local dels = rec_put(rf, nil, 'status', r_st, s_st)
dels = rec_put(rf, dels, is_current and 'xs' or 'started', r_sd, s_sd)
dels = rec_put(rf, dels, is_current and 'done' or 'completed', r_cd, s_cd)
dels = rec_put(rf, dels, 'out', r_out, s_out)
dels = rec_put(rf, dels, 'hn', r_hn, s_hn)
dels = rec_put(rf, dels, 'hb', r_hb, s_hb)
dels = rec_put(rf, dels, 'hd', r_hd, s_hd)
dels = rec_put(rf, dels, 'pink', r_pk, s_pk)
if #ifields > 0 then redis.call('HSET', ikey, unpack(ifields)) end
if not is_current and #rf > 0 then redis.call('HSET', xkey, unpack(rf)) end
if dels then redis.call('HDEL', is_current and ikey or xkey, unpack(dels)) end
if is_current and in_x then redis.call('DEL', xkey) end -- moved into the instance hash
if created then
  redis.call('ZADD', K_IDX_INSTANCES, nows, id)
  if parent ~= '' and ppart ~= '' then
    ob_put(ppart, 'c', parent, id, string.match(P, '^{[^}]*:(%d+)/')) -- the parent learns of it there (ob_apply)
  elseif parent ~= '' then
    redis.call('SADD', k_children(parent), id)
    if redis.call('EXISTS', k_inst(parent)) == 1 then -- a new child runs: its parent is not settled
      local parent_settled = settled(parent)
      redis.call('HINCRBY', k_inst(parent), 'open', '1')
      if parent_settled then tree_settle_changed(parent, false, now, retention) end
    end
  end
end

-- 8. Worker items (wq_enqueue_many wakes a fetcher that can take each), then cancellations (an activity scheduled and cancelled in one turn ends up absent).
-- (Each section is read in place: entry fields at ARGV[j], ARGV[j + 1], ...)
if witems_n > 0 then wq_enqueue_many(now, ARGV, witems_at, witems_n) end
for j = xw_at + 1, xw_at + 7 * xw_n, 7 do
  ob_put(ARGV[j], 'w', ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5], ARGV[j + 6])
  redis.call('HSET', WQ.k_inst(ARGV[j + 2]), ARGV[j + 3] .. ':' .. ARGV[j + 4], '@' .. ARGV[j])
end
for j = cancels_at + 1, cancels_at + 3 * cancels_n, 3 do wq_cancel(ARGV[j], ARGV[j + 1], ARGV[j + 2]) end

-- 9. Orchestrator items (TimerFired visible at fire_at_ms). One for this instance (still locked)
-- is found by the reindex below.
local more = lk[5] == '1'
local woken = nil -- pin key -> instances made ready (a table only when some are)
for j = oitems_at + 1, oitems_at + 4 * oitems_n, 4 do
  local target = ARGV[j]
  if target == id then more = true end
  local pin = oq_enqueue(target, ARGV[j + 1], ARGV[j + 2], ARGV[j + 3] + 0, now)
  if pin then
    woken = woken or {}
    woken[pin] = (woken[pin] or 0) + 1
  end
end
for j = xo_at + 1, xo_at + 5 * xo_n, 5 do ob_put(ARGV[j], 'o', ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]) end

-- 10. Retention: a settled tree's root gets a TTL; an instance running again keeps its data. A
-- root without a parent that settles with retention off has nothing to do.
if has_inst and is_current and changes_status then
  local now_settled = settled_of(st, iv[4])
  if now_settled ~= was_settled and not (now_settled and retention <= 0 and parent_id == '') then
    tree_settle_changed(id, now_settled, now, retention)
  end
end

-- 11. Release the lock; messages that arrived meanwhile (or were delayed) make the instance ready
-- again.
redis.call('DEL', lkey)
redis.call('ZREM', K_LOCKED, id)
if more then
  local pin = oq_reindex(id, now)
  if pin then
    woken = woken or {}
    woken[pin] = (woken[pin] or 0) + 1
  end
end
if woken then
  for pin, n in pairs(woken) do wake_orch(pin, n) end
end

-- 12. Status watchers (redisprovider's WatchStatus): the instance finished or its custom status
-- changed.
if cs_op ~= '' or (terminal and is_current and old_status ~= st) then
  redis.call('PUBLISH', P .. 'status', id)
end
-- 13. Per-minute stats (lib.lua, stats_count): the instance completed or failed.
if terminal and is_current and old_status ~= st and (st == 'Completed' or st == 'Failed') then
  stats_count(st == 'Completed' and 'oc' or 'of')
end
if OB_WRITTEN then return 2 end
return 1
