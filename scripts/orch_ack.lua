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

-- The instance record, read once (fields: lib.lua, Executions).
local ikey = k_inst(id)
local iv = redis.call('HMGET', ikey, 'name', 'ver', 'status', 'open', 'exec', 'parent', 'tag', 'hn', 'hb',
  'kv', 'hd', 'out', 'pink', 'xs', 'done', 'created', 'updated')
local has_inst = iv[1] ~= false -- created (an ack with name and version wrote the record)
-- An instance that existed when the turn was fetched and is gone now expired (retention) under
-- the lock: writing would re-create it as a Running fragment of itself.
if lk[4] == '1' and not has_inst then
  return fail('INVALID_TOKEN', 'Invalid lock token: instance ' .. id .. ' expired while locked')
end

-- The execution this turn writes and its record (lib.lua, Executions), as a table by field
-- (status, started, completed, out, hn, hb, hd, pink): stored is what its hash holds now (the
-- instance hash's started and completed as stored: xs and done are left out when they equal
-- created and updated, lib.lua, exec_record), rec what this turn makes of it (started and
-- completed as they are); only the fields that differ are written. The current execution's record
-- is in the instance hash (a new current execution takes the place of the previous one, whose
-- record moves to x:<prev>:<id>; one that an append recorded in x:<e>:<id> is moved in); any
-- other execution's is in x:<e>:<id>, which does not keep hb.
local prev = iv[5] and iv[5] + 0 or nil -- (+ 0 converts once, tonumber twice)
local nexec = exec + 0
local new_exec = prev == nil or nexec > prev
local is_current = new_exec or nexec == prev
-- x:<e>:<id> is read or written only for an execution other than the instance's current one
-- (prev nil: there is none, this one becomes it); the key is built only then.
local xkey = prev ~= nil and nexec ~= prev and k_exec(id, exec) or nil
local in_i = rec_of(iv[3], iv[14], iv[15], iv[12], iv[8], iv[9], iv[11], iv[13]) -- REC_NAMES' order
local cur = rec_copy(in_i) -- the current execution's record as it is (lib.lua, exec_record)
cur.started = in_i.started or iv[16] or nil
if not in_i.completed and is_terminal(in_i.status) then cur.completed = iv[17] or nil end
local stored, rec, in_x = {}, nil, false
if nexec == prev then
  stored = cur
elseif prev ~= nil then -- (an instance without a current execution has no other either)
  local x = redis.call('HMGET', xkey, 'status', 'started', 'completed', 'out', 'hn', 'hd', 'pink')
  if x[5] then -- hn: every execution record has it
    in_x = true
    stored = rec_of(x[1], x[2], x[3], x[4], x[5], nil, x[6], x[7]) -- x: keeps no hb
  end
end
local new_record = nexec ~= prev and not in_x
if new_record then
  rec = { status = 'Running', started = nows, out = '-', hn = '0', hb = '0', hd = '1' }
else
  rec = rec_copy(stored)
end
if is_current then
  if in_x then -- an appended execution this ack makes current (and starts, unless an ack did)
    rec.hb = d(redis.call('STRLEN', k_hist(id, exec)))
    rec.started = rec.started or nows
  end
  stored = in_i -- as stored: rec's started and completed are folded before they are compared
else
  rec.hb = nil
end
local hn, hb = rec.hn and rec.hn + 0, rec.hb and rec.hb + 0 -- the history's events and bytes before this turn
local dense = nil -- the event count while the execution's ids are dense (lib.lua)
if rec.hd == '1' then dense = hn end

-- Check duplicates before any write.
if #hist > 0 then
  local dup = history_check(id, exec, hist, dense)
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
  local a = {}
  for _, f in ipairs(REC_NAMES) do
    if f[3] and cur[f[1]] then a[#a + 1], a[#a + 2] = f[3], cur[f[1]] end
  end
  redis.call('HSET', k_exec(id, prev), unpack(a))
end
if new_exec and prev ~= nil or new_record and not is_current then execs_add(id, exec) end

-- 3. Pinned version: stored when given; a new execution starts unpinned unless given. The record
-- keeps only its sortable key (what the ready indexes use; the version itself is in the history's
-- OrchestrationStarted event).
if pin ~= '' then rec.pink = pink end

-- 4. History (append only). The record counts its execution's events and, in the instance hash,
-- bytes (hn, hb: what lite fetches report, and when a finished history may be compacted).
local compact = nil
if terminal and is_current then compact = hb end
local added, still, hlen = history_append(id, exec, hist, compact, dense)
if #hist > 0 then
  rec.hn = d(hn + #hist)
  -- (hlen is hb + added, but after a lost or cut history: then the bytes that are there)
  if hb then rec.hb = d(hlen) end
end
rec.hd = still and '1' or '0'

-- 5. Status and output.
if status ~= '' then
  rec.status = status
  -- The output is not a field of a record: a value over 64 bytes would push the hash out of Redis's
  -- compact listpack encoding (~400 bytes more). It is where the history has it (the terminal
  -- event carries it), else a string key of its own, xo:<e>:<id> (lib.lua, exec_output).
  local p, l = string.match(out_at, '^(%d+) (%d+)$')
  if has_output and p and hb then
    if rec.out == 'k' then redis.call('DEL', k_xout(id, exec)) end
    rec.out = d(hlen - added + p) .. ' ' .. l
  elseif has_output then
    redis.call('SET', k_xout(id, exec), output, 'KEEPTTL')
    rec.out = 'k'
  else
    if rec.out == 'k' then redis.call('DEL', k_xout(id, exec)) end
    rec.out = '-'
  end
  if terminal then rec.completed = nows end
end
local st = nil -- the current execution's status after this turn
if is_current then
  if rec.status == nil and has_inst then rec.status = 'Running' end -- an appended execution a created instance acks
  st = rec.status
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
if #kvops > 0 then
  local kd, kv = k_kd(id), k_kv(id)
  if has_inst and not iv[10] then add_field(ifields, 'kv', '1') end
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
end
if terminal and (#kvops > 0 or iv[10] or not has_inst or created) then
  local kd, kv = k_kd(id), k_kv(id)
  local d = redis.call('HGETALL', kd)
  for i = 1, #d, 2 do
    if d[i + 1] == 't' then redis.call('HDEL', kv, d[i]) else redis.call('HSET', kv, d[i], string.sub(d[i + 1], 2)) end
  end
  if #d > 0 then redis.call('DEL', kd) end
end

-- The records, written once: the fields of rec that differ from what its hash holds. In the
-- instance hash, started is left out when it is the instance's created time and completed when it
-- is its updated time and the status is terminal (lib.lua, exec_record: about 30 bytes less per
-- finished instance). This turn wrote created when it created the instance, and updated, in the
-- current execution's case, when the instance has a record (5.).
if is_current then
  if rec.started == (created and nows or iv[16] or nil) then rec.started = nil end
  if is_terminal(rec.status) and rec.completed == (has_inst and nows or iv[17] or nil) then rec.completed = nil end
end
local xfields, dels = nil, nil -- (tables made only when needed: most acks have neither)
for _, f in ipairs(REC_NAMES) do
  local v, n = rec[f[1]], f[is_current and 2 or 3]
  if n and v ~= stored[f[1]] then
    if v == nil then
      dels = dels or {}
      dels[#dels + 1] = n
    elseif is_current then
      add_field(ifields, n, v)
    else
      xfields = xfields or {}
      add_field(xfields, n, v)
    end
  end
end
if #ifields > 0 then redis.call('HSET', ikey, unpack(ifields)) end
if xfields then redis.call('HSET', xkey, unpack(xfields)) end
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
wq_enqueue_many(now, witems)
for _, w in ipairs(xw) do
  ob_put(w[1], 'w', w[2], w[3], w[4], w[5], w[6], w[7])
  redis.call('HSET', WQ.k_inst(w[3]), w[4] .. ':' .. w[5], '@' .. w[1])
end
for _, c in ipairs(cancels) do wq_cancel(c[1], c[2], c[3]) end

-- 9. Orchestrator items (TimerFired visible at fire_at_ms). One for this instance (still locked)
-- is found by the reindex below.
local more = lk[5] == '1'
local woken = nil -- pin key -> instances made ready (a table only when some are)
for _, o in ipairs(oitems) do
  if o[1] == id then more = true end
  local pin = oq_enqueue(o[1], o[2], o[3], o[4] + 0, now)
  if pin then
    woken = woken or {}
    woken[pin] = (woken[pin] or 0) + 1
  end
end
for _, o in ipairs(xo) do ob_put(o[1], 'o', o[2], o[3], o[4], o[5]) end

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
