-- admin_repair: repair one violation admin_fsck reported (keys.go, "Invariants"), re-checked here.
-- One function per fsck code: each re-checks its violation in this script, at one instant, and
-- changes nothing when it no longer holds (a turn moved on since fsck looked), so a repair never
-- races a live turn. A repair only restores what the other keys already say (an index entry from
-- its record, a lock's index from the lock, a message's type and time from its body); it never
-- invents data: what it cannot tell from the keys it leaves, and says why.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   retention: retention ms (tree_settle_changed)
--   code: the fsck code
--   subject: instance id, worker item id, or '' for the namespace
--   list[v]...: by code (below), to the end
-- Lists by code:
--   message_without_visibility triples: message seq, its type code (lib.lua, oq_messages),
--            visible_at ms ('0' visible now)
--   orphaned_keys keys of the instance (only keys of that instance's kinds are deleted)
--   pin_unlisted pin keys whose ready set exists
--   item_index_without_item, item_placement worker sets that list items (wq:q:<tk>, wq:shold,
--            wq:sitems:<tk>:<sid>; keys of other kinds are ignored)
-- Reply: {outcome, detail}: outcome 'repaired' (detail says what was written), 'clean' (the
--   violation no longer holds: nothing written) or 'left' (not repaired: detail says why).
-- Errors: none (a code without a repair is 'left').
-- Cost: O(the subject's keys + its messages + its children), as admin_fsck; 'pin_unlisted' O(pins).
local now = now_ms()
local function repaired(what) return { 'repaired', what } end
local function clean() return { 'clean', 'the violation no longer holds' } end
local function left(why) return { 'left', why } end

local STATUSES = { 'Running', 'Completed', 'Failed', 'ContinuedAsNew' }

-- Instance placement (admin_fsck's second block): an instance with messages is locked, ready in
-- the set of its own pin key, delayed or parked; without messages it is in no ready set and not
-- delayed. Returns whether that is broken now.
local function placement_broken(id)
  local nmsg = oq_count(id)
  local locked = is_locked(id)
  local pin = pin_of(id)
  local ready_in = 0
  for _, p in ipairs(ready_pins()) do
    if redis.call('ZSCORE', k_ready(p), id) then
      ready_in = ready_in + 1
      if p ~= pin or locked or nmsg == 0 then return true end
    end
  end
  if ready_in > 1 then return true end
  local due = redis.call('ZSCORE', K_DUE, id)
  if nmsg == 0 and due then return true end
  local orphan = redis.call('ZSCORE', K_ORPHANS, id)
  if orphan and redis.call('EXISTS', k_inst(id)) == 1 then return true end
  return nmsg > 0 and not locked and ready_in == 0 and not due and not orphan
end

-- Put an instance where its messages say: out of every ready set; unlocked, back in the ready set
-- of its pin and the due index as oq_reindex computes them (a fetcher is woken for ready work),
-- unless its messages are parked orphans. A locked instance stays out of the ready sets: its ack,
-- abandon or expiry reindexes it.
local function replace(id)
  for _, p in ipairs(ready_pins()) do redis.call('ZREM', k_ready(p), id) end
  if is_locked(id) then return 'taken out of the ready sets (locked: its turn reindexes it)' end
  if redis.call('ZSCORE', K_ORPHANS, id) and redis.call('EXISTS', k_inst(id)) == 0 then
    redis.call('ZREM', K_DUE, id)
    return 'left parked with its orphan messages'
  end
  if oq_count(id) == 0 then
    redis.call('ZREM', K_DUE, id)
    return 'taken out of the ready and due indexes (no messages)'
  end
  redis.call('ZREM', K_DUE, id)
  local pin = oq_reindex(id, now)
  if pin then
    wake_orch(pin, 1)
    return 'made ready under pin ' .. pin
  end
  return 'indexed as delayed in ' .. K_DUE
end

local function reindex_if_broken(id)
  if not placement_broken(id) then return clean() end
  return repaired(replace(id))
end

-- An instance record's indexes (admin_fsck's third block).
local function record_score(id, field)
  local r = redis.call('HMGET', k_inst(id), field, 'updated', 'created')
  return r[1] or r[2] or r[3] or d(now)
end

local R = {}

-- Locks.
function R.lock_unindexed(id)
  local u = tonumber(redis.call('HGET', k_lock(id), 'until'))
  if not u or redis.call('ZSCORE', K_LOCKED, id) then return clean() end
  redis.call('ZADD', K_LOCKED, d(u), id)
  oq_note(u)
  return repaired('indexed the lock in ' .. K_LOCKED .. ' at its expiry ' .. d(u) .. ': a fetch reclaims it then')
end

function R.lock_expiry_mismatch(id)
  local u = tonumber(redis.call('HGET', k_lock(id), 'until'))
  local score = tonumber(redis.call('ZSCORE', K_LOCKED, id))
  if not u or not score or score == u then return clean() end
  redis.call('ZADD', K_LOCKED, d(u), id)
  oq_note(u)
  return repaired('rescored the lock in ' .. K_LOCKED .. ' at its expiry ' .. d(u))
end

function R.locked_without_lock(id)
  if is_locked(id) or not redis.call('ZSCORE', K_LOCKED, id) then return clean() end
  redis.call('ZREM', K_LOCKED, id)
  return repaired('removed the entry from ' .. K_LOCKED .. '; ' .. replace(id))
end

-- A lock that covers messages which are gone keeps only those whose body exists (its ack deletes
-- what it covers; nothing else reads the list). A body without its t<s> is kept: its turn has it,
-- and message_without_visibility gives it back its field (dropped from the lock, it would be
-- delivered again after the ack).
function R.lock_message_missing(id)
  local seqs = redis.call('HGET', k_lock(id), 'seqs')
  if not seqs then return clean() end
  local keep, gone = {}, {}
  for _, s in ipairs(words(seqs)) do
    if redis.call('HEXISTS', k_msgs(id), 'm' .. s) == 1 then keep[#keep + 1] = s else gone[#gone + 1] = s end
  end
  if #gone == 0 then return clean() end
  redis.call('HSET', k_lock(id), 'seqs', table.concat(keep, ' '))
  return repaired('the lock no longer covers missing message(s) ' .. table.concat(gone, ' '))
end

-- Messages.
function R.message_without_body(id)
  local km = k_msgs(id)
  local gone, fields = {}, {}
  for _, f in ipairs(redis.call('HKEYS', km)) do
    if string.byte(f, 1) == 116 and redis.call('HEXISTS', km, 'm' .. string.sub(f, 2)) == 0 then -- 't'
      local s = string.sub(f, 2)
      gone[#gone + 1] = s
      fields[#fields + 1], fields[#fields + 2] = 't' .. s, 'a' .. s
    end
  end
  if #gone == 0 then return clean() end
  call_chunked('HDEL', km, fields)
  local note = ''
  if is_locked(id) then
    R.lock_message_missing(id)
    note = ' (and from the lock)'
  end
  return repaired('removed message(s) ' .. table.concat(gone, ' ') .. ' without a body from ' .. km .. note ..
    '; ' .. replace(id))
end

-- A body without its t<s> field is given one: its type code and a timer's own fire time, any
-- other message now (the caller decodes the bodies: scripts never read JSON).
function R.message_without_visibility(id)
  local km = k_msgs(id)
  local added = {}
  for i = 1, #list - 2, 3 do
    local s, code, at = list[i], list[i + 1], tonumber(list[i + 2])
    if redis.call('HEXISTS', km, 'm' .. s) == 1 and redis.call('HEXISTS', km, 't' .. s) == 0 then
      if at < now then at = now end
      redis.call('HSET', km, 't' .. s, code .. d(at))
      added[#added + 1] = s .. '@' .. d(at)
    end
  end
  if #added == 0 then return clean() end
  if is_locked(id) then
    redis.call('HSET', k_lock(id), 'more', '1') -- as an enqueue under a lock: its ack reindexes
    return repaired('made message(s) visible (seq@ms): ' .. table.concat(added, ' ') ..
      '; the instance is locked: its turn reindexes it')
  end
  return repaired('made message(s) visible (seq@ms): ' .. table.concat(added, ' ') .. '; ' .. replace(id))
end

R.messages_stranded = reindex_if_broken
R.ready_twice = reindex_if_broken
R.ready_wrong_pin = reindex_if_broken
R.ready_while_locked = reindex_if_broken
R.ready_without_messages = reindex_if_broken
R.due_without_messages = reindex_if_broken

-- Parked orphan messages of an instance that exists: its messages are its own again.
function R.orphan_with_record(id)
  if not redis.call('ZSCORE', K_ORPHANS, id) or redis.call('EXISTS', k_inst(id)) == 0 then return clean() end
  redis.call('ZREM', K_ORPHANS, id)
  redis.call('PERSIST', k_msgs(id))
  return repaired('unparked its messages (no longer expiring); ' .. replace(id))
end

function R.pin_unlisted()
  local added = {}
  for _, p in ipairs(list) do
    if p ~= '-' and redis.call('SISMEMBER', K_PINS, p) == 0 and redis.call('ZCARD', k_ready(p)) > 0 then
      redis.call('SADD', K_PINS, p)
      added[#added + 1] = p
    end
  end
  if #added == 0 then return clean() end
  return repaired('listed pin(s) ' .. table.concat(added, ', ') .. ' in ' .. K_PINS)
end

-- Records and their indexes.
function R.record_unlisted(id)
  if redis.call('HEXISTS', k_inst(id), 'name') == 0 or redis.call('ZSCORE', K_IDX_INSTANCES, id) then return clean() end
  local at = record_score(id, 'created')
  redis.call('ZADD', K_IDX_INSTANCES, at, id)
  return repaired('listed the instance in ' .. K_IDX_INSTANCES .. ' at its creation time ' .. at)
end

function R.status_unindexed(id)
  local r = redis.call('HMGET', k_inst(id), 'status', 'name')
  local st = r[1]
  if not st or not r[2] or redis.call('ZSCORE', k_idx_status(st), id) then return clean() end
  local at = record_score(id, is_terminal(st) and 'done' or 'updated')
  redis.call('ZADD', k_idx_status(st), at, id)
  return repaired('listed the instance in ' .. k_idx_status(st) .. ' at ' .. at .. ' (when its record last changed)')
end

function R.status_stale(id)
  local r = redis.call('HMGET', k_inst(id), 'status', 'name')
  local st = r[1]
  if not st or not r[2] then return clean() end
  local dropped = {}
  for _, s in ipairs(STATUSES) do
    if s ~= st and redis.call('ZREM', k_idx_status(s), id) == 1 then dropped[#dropped + 1] = k_idx_status(s) end
  end
  if #dropped == 0 then return clean() end
  return repaired('removed the instance from ' .. table.concat(dropped, ', ') .. ' (its status is ' .. st .. ')')
end

-- Index entries of an instance without a record (not a retained root awaiting its sweep).
function R.listed_without_record(id)
  if redis.call('HEXISTS', k_inst(id), 'name') == 1 or redis.call('ZSCORE', K_IDX_EXPIRY, id) then return clean() end
  local dropped = {}
  if redis.call('ZREM', K_IDX_INSTANCES, id) == 1 then dropped[1] = K_IDX_INSTANCES end
  for _, s in ipairs(STATUSES) do
    if redis.call('ZREM', k_idx_status(s), id) == 1 then dropped[#dropped + 1] = k_idx_status(s) end
  end
  if #dropped == 0 then return clean() end
  return repaired('removed the instance from ' .. table.concat(dropped, ', '))
end
R.status_without_record = R.listed_without_record

function R.retained_unlisted(id)
  local ttl = redis.call('PTTL', k_inst(id))
  if ttl <= 0 or redis.call('ZSCORE', K_IDX_EXPIRY, id) then return clean() end
  redis.call('ZADD', K_IDX_EXPIRY, d(now + ttl), id)
  chore_at(now + ttl)
  return repaired('listed the instance in ' .. K_IDX_EXPIRY .. ' at its keys\' expiry ' .. d(now + ttl) ..
    ': its children are reaped then')
end

-- The open count is recounted from the children that exist; when that changes whether the
-- instance is settled, its ancestors' counts follow (as an ack's would).
function R.open_children_mismatch(id)
  local rec = redis.call('HMGET', k_inst(id), 'status', 'open')
  if not rec[1] then return clean() end
  local open = 0
  for _, c in ipairs(redis.call('SMEMBERS', k_children(id))) do
    if redis.call('HGET', k_inst(c), 'parent') == id and not settled(c) then open = open + 1 end
  end
  local was = tonumber(rec[2]) or 0
  if open == was then return clean() end
  if MULTI and redis.call('EXISTS', P .. 'chx:' .. id) == 1 then
    return left('it has children in other partitions, whose states this partition cannot read')
  end
  local before = settled(id)
  redis.call('HSET', k_inst(id), 'open', d(open))
  local note = ''
  if settled(id) ~= before then
    tree_settle_changed(id, not before, now, retention)
    note = '; its ancestors\' counts and retention follow'
  end
  return repaired('set open from ' .. was .. ' to ' .. open .. ' (its unsettled children)' .. note)
end

-- A record in an older layout is converted as dxctl migrate converts it (lib_admin.lua,
-- record_convert): each older layout says what its fields meant, so the one-layout record is
-- told from the keys.
function R.record_layout(id)
  local old = record_old(id)
  if not old then return clean() end
  record_convert(id)
  return repaired('converted the instance\'s records to the one layout (' .. old .. ')')
end

-- The format-1 guard keys (keys.go, Format1Keys) of a partition whose format record says format 2
-- are written again as the hashes a format-1 process cannot use, as ns_init writes them; the
-- format record itself is written by dxctl migrate.
function R.format_record()
  if redis.call('HGET', K_META, 'format') ~= FORMAT then
    return left('the format record is written by dxctl migrate (run it), never by repair')
  end
  local made = {}
  for _, k in ipairs(FORMAT1_KEYS) do
    if not MULTI and redis.call('EXISTS', P .. k) == 0 then
      redis.call('HSET', P .. k, 'format', FORMAT)
      made[#made + 1] = P .. k
    end
  end
  if #made == 0 then return left('the format record is written by dxctl migrate (run it), never by repair') end
  return repaired('wrote the format-1 guard key(s) ' .. table.concat(made, ' ') .. ' again')
end

function R.child_parent_mismatch()
  return left('a children set and a child\'s record disagree on the parent: which one is right ' ..
    'cannot be told from the keys (delete or fix the instance by hand)')
end

-- Keys of an instance that has no record, messages, lock, execution set or worker entries.
-- Only keys of per-instance kinds that do not anchor an instance are deleted (a history does).
function R.orphaned_keys(id)
  if redis.call('EXISTS', k_inst(id), k_msgs(id), k_lock(id), k_execs(id), WQ.k_inst(id)) > 0 or
    redis.call('ZSCORE', K_IDX_EXPIRY, id) or redis.call('SISMEMBER', K_IDX_REAP, id) == 1 then
    return clean()
  end
  local ok = { [k_cs(id)] = true, [k_kv(id)] = true, [k_kd(id)] = true, [k_children(id)] = true }
  local gone = {}
  for _, key in ipairs(list) do
    local mine = ok[key]
    if not mine then
      for _, kind in ipairs({ 'x:', 'xo:', 'he:' }) do
        local e = string.match(string.sub(key, #P + #kind + 1), '^(%d+):')
        if string.sub(key, 1, #P + #kind) == P .. kind and e and key == P .. kind .. e .. ':' .. id then mine = true end
      end
    end
    if mine and redis.call('DEL', key) == 1 then gone[#gone + 1] = key end
  end
  if #gone == 0 then return clean() end
  return repaired('deleted ' .. table.concat(gone, ' '))
end

-- Namespace-wide: the housekeeping gates. A missing gate means unknown: the next fetch scans the
-- sets and sets it (lib.lua oq_note).
function R.gate_late()
  local fixed = {}
  local gate = tonumber(redis.call('GET', K_OQ_NEXT))
  if gate then
    local late = false
    for _, key in ipairs({ K_LOCKED, K_DUE }) do
      local h = zhead(key)
      if h and h < gate then late = true end
    end
    local chore = tonumber(redis.call('GET', K_CHORES))
    if late or (chore and chore < gate) then
      redis.call('DEL', K_OQ_NEXT)
      fixed[#fixed + 1] = K_OQ_NEXT
    end
  end
  if #fixed == 0 then return clean() end
  return repaired('deleted ' .. table.concat(fixed, ' ') .. ': the next fetch rescans and sets it')
end

function R.chores_late()
  local due = chores_due(now)
  local cur = tonumber(redis.call('GET', K_CHORES))
  if due == nil or (cur and cur <= due) then return clean() end
  redis.call('SET', K_CHORES, d(due))
  oq_note(due)
  return repaired('set ' .. K_CHORES .. ' to ' .. d(due) .. ': the next fetch sweeps the expired entries')
end

-- Worker items (lib_worker.lua, keys_worker.go "Invariants"). The worker sets that list items
-- (wq:q:<tk>, wq:shold, wq:sitems:<tk>:<sid>) as the caller names them (ARGV[5..]): the kind,
-- and for a session group its tag key and session id; nil for another key.
local function worker_set(key)
  local pre = P:gsub('%p', '%%%0')
  if key == WQ.K_SHOLD then return 'shold' end
  if string.match(key, '^' .. pre .. 'wq:q:') then return 'q' end
  local rest = string.match(key, '^' .. pre .. 'wq:sitems:(.+)$')
  if not rest then return nil end
  -- '<tk>:<sid>', tk '-' or '<length>:<tag>'
  if string.sub(rest, 1, 2) == '-:' then return 'sitems', '-', string.sub(rest, 3) end
  local n, tail = string.match(rest, '^(%d+):(.*)$')
  if n and string.sub(tail, tonumber(n) + 1, tonumber(n) + 1) == ':' then
    return 'sitems', n .. ':' .. string.sub(tail, 1, tonumber(n)), string.sub(tail, tonumber(n) + 2)
  end
  return nil
end

-- Drop item id from the worker sets the caller names other than home (a session group then
-- points at its next item). Returns the keys it was dropped from.
local function drop_elsewhere(id, home)
  local dropped = {}
  for _, key in ipairs(list) do
    local kind, tk, sid = worker_set(key)
    if kind and key ~= home and redis.call('ZREM', key, id) == 1 then
      dropped[#dropped + 1] = key
      if sid then WQ.reindex_group(sid, tk) end
    end
  end
  return dropped
end

-- An item's place follows from its hash: a session-less item is in its tag key's schedule, at
-- its lock's expiry when locked (k; a lock without its expiry: due at once, a fetch reclaims it),
-- else at the score it has there (a delay) or its enqueue time; a session item is in wq:shold at
-- its lock's expiry when locked, kept there when it is there unlocked (delayed), else ready in its
-- group.
local function item_place(id)
  local it = redis.call('HMGET', WQ.k_item(id), 'i', 's', 't', 'k', 'u', 'c')
  if not it[1] then return nil end
  local sid, tk = it[2] or '', it[3] or '-'
  local lock = it[4] and d(tonumber(it[5]) or 0)
  local done, home = {}, nil
  if sid == '' then
    home = WQ.k_q(tk)
    local cur = redis.call('ZSCORE', home, id)
    local want = lock or cur or it[6] or d(now)
    if not cur or tonumber(cur) ~= tonumber(want) then
      redis.call('ZADD', home, want, id)
      done[#done + 1] = 'scheduled in ' .. home .. ' at ' .. want
    end
  else
    local held = redis.call('ZSCORE', WQ.K_SHOLD, id)
    if lock or held then
      home = WQ.K_SHOLD
      if redis.call('ZSCORE', WQ.k_sitems(tk, sid), id) then
        WQ.unready(id, sid, tk)
        done[#done + 1] = 'taken out of ' .. WQ.k_sitems(tk, sid)
      end
      local want = lock or held
      if not held or tonumber(held) ~= tonumber(want) then
        redis.call('ZADD', home, want, id)
        done[#done + 1] = 'held in ' .. home .. ' at ' .. want
      end
    else
      home = WQ.k_sitems(tk, sid)
      if not redis.call('ZSCORE', home, id) then
        WQ.make_ready(id, sid, tk, true)
        done[#done + 1] = 'made ready in ' .. home
      end
    end
  end
  local dropped = drop_elsewhere(id, home)
  if #dropped > 0 then done[#done + 1] = 'removed from ' .. table.concat(dropped, ', ') end
  if #done == 0 then return nil end
  return table.concat(done, '; ')
end

local function repair_item(id)
  local what = item_place(id)
  if not what then return clean() end
  return repaired(what)
end
R.item_placement = repair_item
R.item_lock_expiry_mismatch = repair_item

-- The instance's worker index lists the item under its execution and activity (wq_enqueue's x
-- mark: '1' while the entry lists it alone).
function R.item_unlisted(id)
  local it = redis.call('HMGET', WQ.k_item(id), 'i', 'e', 'a')
  if not it[1] then return clean() end
  local kx, f = WQ.k_inst(it[1]), it[2] .. ':' .. it[3]
  local list = redis.call('HGET', kx, f)
  for w in string.gmatch(list or '', '%S+') do
    if w == id then return clean() end
  end
  if list then
    for o in string.gmatch(list, '%S+') do redis.call('HDEL', WQ.k_item(o), 'x') end
    redis.call('HSET', kx, f, list .. ' ' .. id)
    redis.call('HSET', WQ.k_item(id), 'x', '0')
  else
    redis.call('HSET', kx, f, id)
    redis.call('HSET', WQ.k_item(id), 'x', '1')
  end
  return repaired('listed the item in ' .. kx .. ' under ' .. f)
end

-- A tagged item's tag key is in wq:tks (what TagFilter Any reads).
function R.item_tag_unlisted(id)
  local tk = redis.call('HGET', WQ.k_item(id), 't')
  if not tk or tk == '-' or redis.call('SADD', WQ.K_TKS, tk) == 0 then return clean() end
  return repaired('added tag key ' .. tk .. ' to ' .. WQ.K_TKS)
end

-- A session with visible items is listed in its group index (free, or its owner's), as the
-- worker scripts keep it (lib_worker.lua, WQ.reindex_group).
function R.item_session_unindexed(id)
  local it = redis.call('HMGET', WQ.k_item(id), 's', 't')
  if not it[1] or it[1] == '' then return clean() end
  local idx = WQ.group_index(it[1], it[2])
  if redis.call('ZSCORE', idx, it[1]) or redis.call('ZCARD', WQ.k_sitems(it[2], it[1])) == 0 then return clean() end
  WQ.reindex_group(it[1], it[2])
  return repaired('listed session ' .. it[1] .. ' in ' .. idx)
end

-- A session with queued items is counted in wq:scount: recount its items, in its groups (every
-- tag key, the item's own too) and among the locked and delayed ones of wq:shold.
function R.session_uncounted(id)
  local it = redis.call('HMGET', WQ.k_item(id), 's', 't', 'd')
  local sid = it[1]
  if not sid or sid == '' or it[3] or redis.call('HGET', WQ.K_SCOUNT, sid) then return clean() end
  local tks, seen, n = redis.call('SMEMBERS', WQ.K_TKS), {}, 0
  tks[#tks + 1], tks[#tks + 2] = '-', it[2] or '-'
  for _, tk in ipairs(tks) do
    if not seen[tk] then
      seen[tk] = true
      n = n + redis.call('ZCARD', WQ.k_sitems(tk, sid))
    end
  end
  for _, m in ipairs(redis.call('ZRANGE', WQ.K_SHOLD, '0', '-1')) do
    if redis.call('HGET', WQ.k_item(m), 's') == sid then n = n + 1 end
  end
  if n == 0 then return clean() end
  redis.call('HSET', WQ.K_SCOUNT, sid, d(n))
  redis.call('ZREM', WQ.K_SIDLE, sid)
  return repaired('counted ' .. d(n) .. ' items of session ' .. sid .. ' in ' .. WQ.K_SCOUNT)
end

-- The enqueue sequence is above every number in use (messages of the instance, or the worker
-- item): set to the highest of them.
function R.seq_behind(subject)
  local top = 0
  if redis.call('EXISTS', WQ.k_item(subject)) == 1 and string.match(subject, '^%a%d+$') then top = WQ.seq(subject) end
  for _, f in ipairs(redis.call('HKEYS', k_msgs(subject))) do
    local n = string.match(f, '^m(%d+)$')
    if n and n + 0 > top then top = n + 0 end
  end
  if top <= (tonumber(redis.call('HGET', K_META, 'seq')) or 0) then return clean() end
  redis.call('HSET', K_META, 'seq', d(top))
  return repaired('set ' .. K_META .. ' seq to ' .. d(top) .. ', the highest number in use')
end

-- subject: a destination partition; list: the high-water mark its inbox holds for this
-- partition (ib:hwm). The outbox sequence must be at or above it, or ob_apply skips the next
-- entries as applied before (lib.lua, ob_put).
function R.outbox_seq_behind(dest)
  local hwm = list[1]
  if (tonumber(redis.call('HGET', P .. 'ob:seq', dest)) or 0) >= hwm + 0 then return clean() end
  redis.call('HSET', P .. 'ob:seq', dest, hwm)
  return repaired('set ' .. P .. 'ob:seq ' .. dest .. ' to ' .. hwm .. ', what partition ' .. dest .. ' applied last')
end

-- subject: a source partition; list: how far it trimmed its entries for this partition (so they
-- were applied here). The mark of what this partition applied from it (ib:hwm) must be at least
-- that, or the source's next entries follow a gap that ob_apply never fills.
function R.inbox_mark_behind(src)
  local want = list[1]
  if (tonumber(redis.call('HGET', P .. 'ib:hwm', src)) or 0) >= want + 0 then return clean() end
  redis.call('HSET', P .. 'ib:hwm', src, want)
  return repaired('set ' .. P .. 'ib:hwm ' .. src .. ' to ' .. want .. ', what partition ' .. src .. ' trimmed as applied')
end

-- Entries of an item that does not exist, in the worker sets the caller names.
function R.item_index_without_item(id)
  if redis.call('EXISTS', WQ.k_item(id)) == 1 then return clean() end
  local dropped = drop_elsewhere(id, nil)
  if #dropped == 0 then return clean() end
  return repaired('removed the item from ' .. table.concat(dropped, ', '))
end

-- Deep repairs (redisprovider, admin_fsck_deep.go): each rebuilds what the instance's history
-- says is in flight and is gone, as the ack that wrote the history would have written it. The
-- caller read the history and builds the message; the repair runs only while the record still
-- says the instance is Running in that execution with that many events (so the history is the
-- one read: it is append-only) and the thing is still missing. Histories are never written.
local function history_same(id, exec, hn)
  local r = redis.call('HMGET', k_inst(id), 'exec', 'status', 'hn')
  return r[1] == exec and r[2] == 'Running' and (r[3] or '0') == hn
end

-- Whether a message of the instance's queue holds all the given plain substrings.
local function message_with(id, ...)
  local m = redis.call('HGETALL', k_msgs(id))
  for j = 1, #m, 2 do
    if string.sub(m[j], 1, 1) == 'm' then
      local all = true
      for _, sub in ipairs({ ... }) do all = all and string.find(m[j + 1], sub, 1, true) ~= nil end
      if all then return true end
    end
  end
  return false
end

-- list: exec, activity id, hn, the ActivityExecute json, session, tag ('' none), the session's
-- partition when it is another ('' here). As orch_ack's worker items (witems, xw).
function R.deep_activity(id)
  local exec, act, hn, json, session, tag, dest = unpack(list)
  if not history_same(id, exec, hn) then return clean() end
  local f = exec .. ':' .. act
  local e = redis.call('HGET', WQ.k_inst(id), f)
  -- ('@<p>': sent to the session's partition, which the caller found without it)
  for o in string.gmatch(e or '', '%S+') do
    if redis.call('EXISTS', WQ.k_item(o)) == 1 then return clean() end
  end
  if message_with(id, '"id":' .. act .. ',', '"execution_id":' .. exec .. ',', 'Activity') then return clean() end
  if e then redis.call('HDEL', WQ.k_inst(id), f) end
  if dest ~= '' then
    ob_put(dest, 'w', json, id, exec, act, session, tag)
    redis.call('HSET', WQ.k_inst(id), f, '@' .. dest)
    return { 'repaired', 'sent activity ' .. act .. ' of execution ' .. exec .. ' again to its session\'s partition ' .. dest, 'ob' }
  end
  wq_enqueue(now, json, id, exec, act, session, tag)
  return repaired('queued activity ' .. act .. ' of execution ' .. exec .. ' again from its ActivityScheduled event')
end

-- list: exec, timer id, hn, the TimerFired json, fire_at ms. As orch_ack's orchestrator items.
function R.deep_timer(id)
  local exec, tid, hn, json, at = unpack(list)
  if not history_same(id, exec, hn) then return clean() end
  if message_with(id, '"TimerFired"', '"id":' .. tid .. ',', '"execution_id":' .. exec .. ',') then return clean() end
  local pin = oq_enqueue(id, json, 'O', at + 0, now)
  if pin then wake_orch(pin, 1) end
  return repaired('armed timer ' .. tid .. ' of execution ' .. exec .. ' again, to fire at ' .. at)
end

-- list: exec, hn, child id, the StartOrchestration json, the child's partition when it is
-- another ('' here). As orch_ack's orchestrator items (oitems, xo).
function R.deep_child(id)
  local exec, hn, child, json, dest = unpack(list)
  if not history_same(id, exec, hn) then return clean() end
  if dest ~= '' then
    ob_put(dest, 'o', child, json, 'S', '0')
    return { 'repaired', 'sent the start of child ' .. child .. ' again, to partition ' .. dest, 'ob' }
  end
  if redis.call('EXISTS', k_inst(child), k_msgs(child)) > 0 then return clean() end
  local pin = oq_enqueue(child, json, 'S', 0, now)
  if pin then wake_orch(pin, 1) end
  return repaired('sent the start of child ' .. child .. ' again')
end

-- list: exec, hn, the SubOrchCompleted or SubOrchFailed json, the scheduling event id. A child
-- that finished without its result reaching its parent (lost, or a child whose whole history was
-- lost: its failure could not name the parent): the result, as the child's ack sends it.
function R.deep_result(id)
  local exec, hn, json, evid = unpack(list)
  if not history_same(id, exec, hn) then return clean() end
  if message_with(id, '"parent_id":' .. evid .. ',', '"parent_execution_id":' .. exec .. ',') then return clean() end
  local pin = oq_enqueue(id, json, 'O', 0, now)
  if pin then wake_orch(pin, 1) end
  return repaired('sent the result of its finished child (event ' .. evid .. ') again')
end

-- list: exec, hn, a CancelInstance json. An instance whose history is lost: a runtime that
-- fetches it fails it, naming the loss (dx); one without messages gets this one to be fetched.
function R.deep_lost(id)
  local exec, hn, json = unpack(list)
  local r = redis.call('HMGET', k_inst(id), 'exec', 'status', 'hn')
  if r[1] ~= exec or r[2] ~= 'Running' or (r[3] or '0') ~= hn then return clean() end
  if oq_count(id) > 0 or is_locked(id) then
    return left('the history is lost: the next runtime turn fails the instance, naming the loss (it has messages)')
  end
  local pin = oq_enqueue(id, json, 'O', 0, now)
  if pin then wake_orch(pin, 1) end
  return { 'left', 'the history is lost: queued a cancellation so that the next runtime turn fails the instance, naming the loss' }
end

-- list: exec, hb, name, ver, created, hn, hd, parent, pp, pink, tag (what the caller read from the
-- history: its OrchestrationStarted, its length and bytes), open (its children, listed in ch:,
-- that are not settled: the caller asked their partitions). A record lost under a history that
-- has not ended: written as the acks that wrote the history wrote it (orch_ack), Running, with a
-- new execution tag; indexed; its parked messages (orphan_park) taken back.
function R.deep_record(id)
  local exec, hb, name, ver, created, hn, hd, parent, pp, pink, tag, open = unpack(list)
  if redis.call('EXISTS', k_inst(id)) == 1 or redis.call('STRLEN', k_hist(id, exec)) ~= hb + 0 then return clean() end
  local f = { 'name', name, 'ver', ver, 'created', created, 'updated', d(now), 'exec', exec, 'status', 'Running',
    'hn', hn, 'hb', hb, 'hd', hd, 'out', '-', 'tag', tag }
  if parent ~= '' then f[#f + 1], f[#f + 2] = 'parent', parent end
  if pp ~= '' then f[#f + 1], f[#f + 2] = 'pp', pp end
  if pink ~= '' then f[#f + 1], f[#f + 2] = 'pink', pink end
  if open ~= '0' then f[#f + 1], f[#f + 2] = 'open', open end
  if redis.call('EXISTS', k_kv(id), k_kd(id)) > 0 then f[#f + 1], f[#f + 2] = 'kv', '1' end
  redis.call('HSET', k_inst(id), unpack(f))
  redis.call('ZADD', K_IDX_INSTANCES, created, id)
  redis.call('ZADD', k_idx_status('Running'), d(now), id)
  if redis.call('ZREM', K_ORPHANS, id) == 1 then redis.call('PERSIST', k_msgs(id)) end
  if not is_locked(id) and oq_count(id) > 0 then
    local pin = oq_reindex(id, now)
    if pin then wake_orch(pin, 1) end
  end
  return repaired('wrote the record again from the history (' .. hn .. ' events of execution ' .. exec .. '), Running')
end

-- subject: the parent (run in its partition); list: child, the child's partition when it is
-- another ('' here). As orch_ack's (or ob_apply 'c''s) children set.
function R.deep_unlisted(parent)
  local child, cp = list[1], list[2]
  if redis.call('EXISTS', k_inst(parent)) == 0 then return clean() end
  local done = redis.call('SADD', k_children(parent), child)
  if cp ~= '' then done = done + redis.call('HSET', P .. 'chx:' .. parent, child, cp) end
  if done == 0 then return clean() end
  return repaired('listed child ' .. child .. ' under its parent ' .. parent)
end

local fn = R[code]
if not fn then return left('dxctl has no repair for this code') end
return fn(subject)
