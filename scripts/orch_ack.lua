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
--   hist[event_id, json]: history (each section: a count, then its entries)
--   kvops[op, key, value]: kv ops (op 's'|'c'|'C', key, "<ms>|<value>")
--   witems[json, instance, execution, activity, session, tag]: worker items
--   cancels[instance, execution, activity]: cancelled activities
--   oitems[target, json, code, visible_at]: orchestrator items (target instance, json, type
--     code, visible_at ms or 0)
-- Reply: 1.
-- Errors (nothing written): DX_INVALID_TOKEN unknown/expired token (also after a delete under
--   the lock, or when the instance existed at fetch and its retention TTL lapsed since), DX_DUPLICATE event id already stored or repeated in the delta.
-- Cost: O(delta + items + locked messages + KV keys touched) — never O(history length).
-- Instance hash fields (i:<id>): name, ver, created, updated (ms), status, exec (current execution),
--   parent, pink (the pinned version's sortable key; pin, the version, in older records), open
--   (children not settled, retention),
--   tag (current execution's tag, see orch_fetch), hn / hb (its history's events and bytes), kv ('1'
--   once KV was written), and the current execution's record when it has hd ('1' while its event
--   ids are dense, else '0'): xs (started ms; absent: created), done (completed ms; absent while
--   the status is terminal and updated is that time), out (where its output is). Execution hash
--   fields (x:<e>:<id>, other executions): started, completed (ms), status, pin, pink, out, hn,
--   hd. See lib.lua (Executions, exec_output, history_append).
local now, nows = now_ms(), now_s()

local id, lk = oq_held(token, now, true)
if not id then return lk end

-- The instance record, read once (fields: see the header of this file).
local ikey = k_inst(id)
local iv = redis.call('HMGET', ikey, 'name', 'ver', 'status', 'open', 'exec', 'parent', 'pin', 'tag', 'hn', 'hb',
  'kv', 'xs', 'hd', 'out', 'done', 'pink', 'created', 'updated')
local has_inst = iv[1] ~= false
-- An instance that existed when the turn was fetched and is gone now expired (retention) under
-- the lock: writing would re-create it as a Running fragment of itself.
if lk[4] == '1' and not has_inst then
  return fail('INVALID_TOKEN', 'Invalid lock token: instance ' .. id .. ' expired while locked')
end

-- The execution this turn writes, and where its record is (lib.lua, Executions): in the instance
-- hash (rec_in_i) when it is the current execution of an instance with a hash and began with one,
-- else in its execution hash (xrec: that hash's hn, hd, out when it exists).
local prev = tonumber(iv[5])
if prev == nil then
  if lk[7] then prev = tonumber(lk[7]) else prev = current_exec(id, true) end -- lk[7]: see oq_held
end
local nexec = tonumber(exec)
local new_exec = prev == nil or nexec > prev
local is_current = new_exec or nexec == prev
local new_record = nexec ~= prev and (prev == nil or redis.call('ZSCORE', k_execs(id), exec) == false)
local will_inst = has_inst or (name ~= '' and ver ~= '')
local rec_in_i = will_inst and ((new_exec and new_record) or (nexec == prev and iv[13] ~= false))
local xkey = k_exec(id, exec)
local xrec = nil
local hn, hb = tonumber(iv[9]), tonumber(iv[10])
if new_exec then hn, hb = 0, 0 end
local dense = nil -- the event count while the execution's ids are dense (lib.lua)
if new_record then
  dense = 0
elseif rec_in_i then
  if iv[13] == '1' then dense = hn end
else
  xrec = redis.call('HMGET', xkey, 'hn', 'hd', 'out')
  if xrec[2] == '1' then dense = tonumber(xrec[1]) end
end

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

-- 2. Instance and execution records: their changes are gathered in ifields / xfields and written
-- with one HSET each; rset writes the execution's record wherever it is (the instance hash calls
-- started xs and completed done; its status is the instance's, written below).
local ifields, xfields, iseen, idel = {}, {}, {}, {}
local function iset(f, v)
  ifields[#ifields + 1], ifields[#ifields + 2] = f, v
  iseen[f] = true
end
local function xset(f, v) xfields[#xfields + 1], xfields[#xfields + 2] = f, v end
local function rset(f, v)
  if not rec_in_i then
    xset(f, v)
  elseif f ~= 'status' then
    iset(f == 'started' and 'xs' or f == 'completed' and 'done' or f, v)
  end
end
-- Retention bookkeeping (lib.lua): whether the instance was settled before this turn. Only a
-- status change (given, or a new execution's) can change that here.
local changes_status = status ~= '' or new_exec
local function settled_of(st, open)
  return (st == 'Completed' or st == 'Failed') and (tonumber(open) or 0) <= 0
end
local was_settled = has_inst and changes_status and settled_of(iv[3], iv[4])
local old_status, parent_id = iv[3], iv[6] or ''
local created = false
if not has_inst and name ~= '' and ver ~= '' then
  iset('name', name); iset('ver', ver); iset('created', nows)
  if parent ~= '' then
    iset('parent', parent)
    parent_id = parent
  end
  created, has_inst, old_status = true, true, nil
elseif has_inst and name ~= '' and ver ~= '' and (iv[1] ~= name or iv[2] ~= ver) then
  iset('name', name); iset('ver', ver)
end
-- A new execution moves the old one's record out of the instance hash into its execution hash.
if new_exec and prev ~= nil and iv[13] then
  local done = iv[15]
  if not done and is_terminal(iv[3]) then done = iv[18] end
  local a, vals = {}, { iv[3], iv[12] or iv[17], done, iv[14], iv[9], iv[13], iv[7], iv[16] }
  for j, f in ipairs({ 'status', 'started', 'completed', 'out', 'hn', 'hd', 'pin', 'pink' }) do
    if vals[j] then a[#a + 1], a[#a + 2] = f, vals[j] end
  end
  redis.call('HSET', k_exec(id, prev), unpack(a))
  idel = { 'xs', 'done', 'out', 'hd' }
end
if new_record then
  -- The first execution of an instance with a hash needs no execution set.
  if not rec_in_i or prev ~= nil then execs_add(id, exec) end
  if not (rec_in_i and (created or iv[17] == nows)) then rset('started', nows) end
  if status == '' then rset('status', 'Running') end
end

-- 3. Pinned version: stored when given; a new execution starts unpinned unless given. The instance
-- hash keeps only its sortable key (what the ready indexes use; the version itself is in the
-- history's OrchestrationStarted event).
if pin ~= '' and not rec_in_i then xset('pin', pin); xset('pink', pink) end
local drop_pin = false
if has_inst and is_current then
  if pin ~= '' then
    if iv[16] ~= pink then iset('pink', pink) end
  elseif new_exec then
    local xp = { false, false }
    if not new_record then xp = redis.call('HMGET', xkey, 'pin', 'pink') end
    if xp[2] then iset('pink', xp[2]) elseif iv[16] then drop_pin = true end
  end
end

-- 4. History (append only). The instance record counts the current execution's events and bytes
-- (hn, hb: what lite fetches report, and when a finished history may be compacted).
local compact = nil
if terminal and is_current and hb then compact = hb end
local added, still = history_append(id, exec, hist, compact, dense)
if has_inst and is_current and hn and #hist > 0 then iset('hn', d(hn + #hist)); iset('hb', d(hb + added)) end
if has_inst and new_exec and #hist == 0 then iset('hn', '0'); iset('hb', '0') end
local hd = still and '1' or '0'
if rec_in_i then
  if new_exec or (iv[13] or '0') ~= hd then iset('hd', hd) end
elseif new_record then
  xset('hn', d(#hist)); xset('hd', hd)
elseif xrec and xrec[1] and #hist > 0 then
  xset('hn', d(tonumber(xrec[1]) + #hist))
  if xrec[2] == '1' and not still then xset('hd', '0') end
end

-- 5. Status and output.
local st = nil -- the current execution's status after this turn
if status ~= '' then
  rset('status', status)
  -- The output is not a field of a record: a value over 64 bytes would push the hash out of Redis's
  -- compact listpack encoding (~400 bytes more). It is where the history has it (the terminal
  -- event carries it), else a string key of its own, xo:<e>:<id> (lib.lua, exec_output).
  local prev_out = nil -- the record's out before this turn
  if rec_in_i and not new_exec then prev_out = iv[14] elseif xrec then prev_out = xrec[3] end
  local p, l = string.match(out_at, '^(%d+) (%d+)$')
  if has_output and rec_in_i and p and hb then
    rset('out', d(hb + tonumber(p)) .. ' ' .. l)
    if prev_out == 'k' then redis.call('DEL', k_xout(id, exec)) end
  elseif has_output then
    redis.call('SET', k_xout(id, exec), output, 'KEEPTTL')
    if rec_in_i or new_record or prev_out then rset('out', 'k') end
  elseif not new_record then
    if prev_out == 'k' or (prev_out == nil and not rec_in_i) then redis.call('DEL', k_xout(id, exec)) end
    if prev_out and prev_out ~= '-' then rset('out', '-') end
  end
  if terminal and not rec_in_i then xset('completed', nows) end
  st = status
end
if has_inst and is_current then
  if status == '' and not new_exec then
    iset('updated', nows) -- same execution, same status
  else
    if st == nil then
      if new_record then st = 'Running' else st = redis.call('HGET', xkey, 'status') or 'Running' end
    end
    -- The output stays in the execution's output key only: a copy here would push the instance
    -- hash out of Redis's compact listpack encoding (values over 64 bytes) and store it twice.
    iset('exec', exec); iset('status', st); iset('updated', nows)
    if new_exec then
      -- The execution's tag: the one the fetch announced, unless it is the old execution's.
      local tag = lk[6]
      if not tag or tag == iv[8] then tag = exec_tag(token) end
      iset('tag', tag)
    end
    if old_status ~= st then
      if old_status then redis.call('ZREM', k_idx_status(old_status), id) end
      redis.call('ZADD', k_idx_status(st), nows, id) -- score: when it entered the status
    end
  end
end
-- The completed time of a record in the instance hash (lib.lua, exec_record): a terminal status
-- written now completed now (updated); one that finished earlier keeps its time in done once
-- updated moves on.
if rec_in_i and not new_exec then
  if terminal then
    if iv[15] then idel[#idel + 1] = 'done' end
  elseif not iv[15] and is_terminal(iv[3]) and iseen['updated'] then
    iset('done', iv[18])
  end
end

-- 6. Custom status: the last CustomStatusUpdated of the delta.
if cs_op ~= '' then
  local ck = k_cs(id)
  redis.call('HINCRBY', ck, 'v', '1')
  if cs_op == 's' then redis.call('HSET', ck, 's', cs_val, 'n', '0') else redis.call('HSET', ck, 's', '', 'n', '1') end
end

-- 7. KV: changes go to the current-execution delta; a terminal status merges it into the store.
-- The instance field kv marks an instance that ever wrote KV (fetches and this merge skip the KV
-- keys of the others).
local kd, kv = k_kd(id), k_kv(id)
if #kvops > 0 and has_inst and not iv[11] then iset('kv', '1') end
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
if terminal and (#kvops > 0 or iv[11] or not has_inst or created) then
  local d = redis.call('HGETALL', kd)
  for i = 1, #d, 2 do
    if d[i + 1] == 't' then redis.call('HDEL', kv, d[i]) else redis.call('HSET', kv, d[i], string.sub(d[i + 1], 2)) end
  end
  if #d > 0 then redis.call('DEL', kd) end
end

-- The records, written once.
if created and not is_current then -- created by a turn of an older execution
  iset('status', 'Running'); iset('updated', nows)
  redis.call('ZADD', k_idx_status('Running'), nows, id)
end
if #ifields > 0 and has_inst then redis.call('HSET', ikey, unpack(ifields)) end
if drop_pin then idel[#idel + 1], idel[#idel + 2] = 'pin', 'pink' end
local dels = {}
for _, f in ipairs(idel) do
  if not iseen[f] then dels[#dels + 1] = f end
end
if #dels > 0 and has_inst then redis.call('HDEL', ikey, unpack(dels)) end
if #xfields > 0 then redis.call('HSET', xkey, unpack(xfields)) end
if created then
  redis.call('ZADD', K_IDX_INSTANCES, nows, id)
  if parent ~= '' then
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
for _, c in ipairs(cancels) do wq_cancel(c[1], c[2], c[3]) end

-- 9. Orchestrator items (TimerFired visible at fire_at_ms). One for this instance (still locked)
-- is found by the reindex below.
local more = lk[5] == '1'
local woken = {} -- pin key -> instances made ready
local function ready(pin)
  if pin then woken[pin] = (woken[pin] or 0) + 1 end
end
for _, o in ipairs(oitems) do
  if o[1] == id then more = true end
  ready(oq_enqueue(o[1], o[2], o[3], tonumber(o[4]), now))
end

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
redis.call('DEL', k_lock(id))
redis.call('ZREM', K_LOCKED, id)
if more then ready(oq_reindex(id, now)) end
for pin, n in pairs(woken) do wake_orch(pin, n) end

-- 12. Status watchers (redisprovider's WatchStatus): the instance finished or its custom status
-- changed.
if cs_op ~= '' or (terminal and is_current and old_status ~= st) then
  redis.call('PUBLISH', P .. 'status', id)
end
return 1
