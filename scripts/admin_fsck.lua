-- admin_fsck: check the keyspace's invariants (keys.go, "Invariants") for a batch of subjects, in
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- one atomic step: what it reports was true at one instant, so a live system's moving parts never
-- show as a violation. redisprovider's Fsck pages over the namespace and calls it per batch.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   mode: what is checked (below)
--   subject: by mode ('' for 'inst' and 'item')
--   list[v]...: by mode, to the end
-- Modes (subject; list):
--   'inst'   -; instance ids
--   'item'   -; worker item ids
--   'keys'   instance id; keys of it (orphaned keys: the instance has no record, no messages, no
--            lock, no executions; keys that still exist are reported)
--   'wready' a worker set (wq:q:<tk>, wq:shold or wq:sitems:<tk>:<sid>); its members
--   'outbox' (a namespace of several partitions) the destinations of this partition's outboxes
--   'global' '1' when the namespace holds any key; pin keys whose ready set exists (besides '-')
--   'deep'   -; pairs (instance id, the highest execution of a history key the key scan saw, or
--            ''): the instance's snapshot for the deep check (redisprovider, admin_fsck_deep.go),
--            read at one instant; the reply is one entry per instance (below), not violations
--   'ask'    -; triples (question, a, b), answered '1' or '0' each, in order (the deep check's
--            questions about other partitions): 'inst' id -: the instance has a record or
--            messages; 'alive' id -: it has messages, or a record that is not Completed or
--            Failed; 'done' id -: its record is Completed or Failed; 'settled' id -: it and its subtree
--            finished (retention's settled); 'ob' dest id: an entry of the outbox to dest names id; 'act' id '<e>:<a>':
--            the activity has a worker item here; 'knows' parent child: the parent has no record, or
--            lists the child (ch:); 'knowsx' the same for a child in another partition (ch: and
--            chx:)
-- Reply of 'deep': per instance {id, exec ('' no record), status, hn, parent, pp, history, messages
--   {bodies}, activities {'<e>:<a>', state ...} (state '1' a worker item exists, '0' none, '@<p>' sent
--   to partition p), flags}: flags 'h' a history without a record, 'x' retained or being reaped,
--   'k' the parent (same partition) lists it, 'l' locked.
-- Reply: a flat list of violations, three entries each: code, subject (instance id, item id or
--   ''), detail (a sentence naming the keys involved).
-- Errors: DX_INVALID unknown mode.
-- Cost: O(subjects x (keys of a subject + its messages + its children)); 'wready' O(members);
--   'global' O(pins).
local now = now_ms()
local out = {}
local function bad(code, subject, detail)
  out[#out + 1], out[#out + 2], out[#out + 3] = code, subject, detail
end

local STATUSES = { 'Running', 'Completed', 'Failed', 'ContinuedAsNew' }

local function check_instance(id)
  local ki, kl = k_inst(id), k_lock(id)
  local rec = redis.call('HMGET', ki, 'status', 'parent', 'open', 'pink', 'name')
  -- Created (named, with its status): the indexes list it; a record without a name (an execution
  -- acked or appended without metadata) is listed nowhere.
  local has_rec = rec[5] ~= false and rec[1] ~= false
  local known = inst_known(id)

  -- The record's layout (lib.lua, Executions; lib_admin.lua, record_old).
  local old = record_old(id)
  if old then
    bad('record_layout', id, old .. ': an older release\'s layout, which this release does not read ' ..
      '(dxctl migrate converts it, as does fsck --repair)')
  end
  local lk = redis.call('HMGET', kl, 'tok', 'until', 'seqs')
  local locked = lk[1] ~= false
  local lscore = redis.call('ZSCORE', K_LOCKED, id)

  -- The lock and its index: a lock is in oq:locked at its expiry, and nothing else is.
  if locked and not lscore then
    bad('lock_unindexed', id, 'lock ' .. kl .. ' exists but the instance is not in ' .. K_LOCKED ..
      ': no fetch will reclaim it when it expires')
  elseif lscore and not locked then
    bad('locked_without_lock', id, K_LOCKED .. ' lists the instance but ' .. kl .. ' does not exist')
  elseif locked and tonumber(lscore) ~= tonumber(lk[2]) then
    bad('lock_expiry_mismatch', id, K_LOCKED .. ' scores the instance ' .. lscore .. ' but ' .. kl ..
      ' expires at ' .. tostring(lk[2]))
  end

  -- Messages: each body m<s> has its type-and-time field t<s> and each t<s> its body (lib.lua,
  -- oq_messages).
  local km = k_msgs(id)
  local bodies, types, nmsg = {}, {}, 0
  for _, f in ipairs(redis.call('HKEYS', km)) do
    local c = string.sub(f, 1, 1)
    if c == 'm' then bodies[string.sub(f, 2)] = true elseif c == 't' then types[string.sub(f, 2)] = true end
  end
  local seq = tonumber(redis.call('HGET', K_META, 'seq')) or 0
  for s in pairs(types) do
    if bodies[s] and tonumber(s) and tonumber(s) > seq then
      bad('seq_behind', id, km .. ' holds message ' .. s .. ' but ' .. K_META .. ' seq is ' .. seq ..
        ': the next enqueues would reuse its number (a format record lost and written again)')
    end
    nmsg = nmsg + 1
    if not bodies[s] then
      bad('message_without_body', id, km .. ' has t' .. s .. ' but no body m' .. s)
    end
  end
  for s in pairs(bodies) do
    if not types[s] then
      bad('message_without_visibility', id, km .. ' holds m' .. s .. ' without its t' .. s .. ': it is never delivered')
    end
  end
  if locked then
    for _, s in ipairs(words(lk[3])) do
      if not bodies[s] then
        bad('lock_message_missing', id, kl .. ' covers message ' .. s .. ' which ' .. km .. ' does not hold')
      end
    end
  end

  -- Where an instance with messages waits: exactly one of locked, ready (under its own pin),
  -- delayed (oq:due), parked (oq:orphans).
  local pin = rec[4] or '-'
  local ready_in = {}
  for _, p in ipairs(ready_pins()) do
    if redis.call('ZSCORE', k_ready(p), id) then ready_in[#ready_in + 1] = p end
  end
  local due = redis.call('ZSCORE', K_DUE, id)
  local orphan = redis.call('ZSCORE', K_ORPHANS, id)
  if #ready_in > 1 then
    bad('ready_twice', id, 'the instance is in the ready sets of pins ' .. table.concat(ready_in, ', '))
  end
  for _, p in ipairs(ready_in) do
    if p ~= pin then
      bad('ready_wrong_pin', id, k_ready(p) .. ' lists the instance but its pin key is ' .. pin ..
        ': fetchers of its version never see it')
    end
  end
  if locked and #ready_in > 0 then
    bad('ready_while_locked', id, k_ready(ready_in[1]) .. ' lists the instance while ' .. kl .. ' holds it')
  end
  if nmsg == 0 and #ready_in > 0 then
    bad('ready_without_messages', id, k_ready(ready_in[1]) .. ' lists the instance but ' .. km .. ' is empty')
  end
  if nmsg == 0 and due then
    bad('due_without_messages', id, K_DUE .. ' lists the instance but ' .. km .. ' is empty')
  end
  if nmsg > 0 and not locked and #ready_in == 0 and not due and not orphan then
    bad('messages_stranded', id, km .. ' holds ' .. nmsg .. ' message(s) but the instance is not locked and in no ' ..
      'ready set, ' .. K_DUE .. ' or ' .. K_ORPHANS .. ': no fetch will deliver them')
  end
  if orphan and known then
    bad('orphan_with_record', id, K_ORPHANS .. ' parks the messages of an instance that exists (' .. ki .. ')')
  end

  -- The record and its indexes.
  local in_all = redis.call('ZSCORE', K_IDX_INSTANCES, id)
  local expiring = redis.call('ZSCORE', K_IDX_EXPIRY, id)
  if has_rec then
    if not in_all then
      bad('record_unlisted', id, ki .. ' exists but ' .. K_IDX_INSTANCES .. ' does not list it')
    end
    if redis.call('ZSCORE', k_idx_status(rec[1]), id) == false then
      bad('status_unindexed', id, ki .. ' has status ' .. rec[1] .. ' but ' .. k_idx_status(rec[1]) .. ' does not list it')
    end
    for _, s in ipairs(STATUSES) do
      if s ~= rec[1] and redis.call('ZSCORE', k_idx_status(s), id) then
        bad('status_stale', id, k_idx_status(s) .. ' lists the instance but ' .. ki .. ' has status ' .. rec[1])
      end
    end
    if redis.call('PTTL', ki) > 0 and not expiring then
      bad('retained_unlisted', id, ki .. ' expires but ' .. K_IDX_EXPIRY .. ' does not list it: its children ' ..
        'are never reaped')
    end
    -- Children: each existing child names this parent, and open counts the unsettled ones.
    -- Children in other partitions (chx:<id>, a namespace of several) cannot be read here: each
    -- may be settled or not.
    local open, away = 0, 0
    if MULTI then away = redis.call('HLEN', P .. 'chx:' .. id) end
    for _, c in ipairs(redis.call('SMEMBERS', k_children(id))) do
      local cr = redis.call('HMGET', k_inst(c), 'parent')
      if cr[1] ~= false then
        if cr[1] ~= id then
          bad('child_parent_mismatch', id, k_children(id) .. ' lists ' .. c .. ' whose parent is ' .. cr[1])
        elseif not settled(c) then
          open = open + 1
        end
      end
    end
    local counted = tonumber(rec[3]) or 0
    if counted < open or counted > open + away then
      bad('open_children_mismatch', id, ki .. ' counts ' .. (rec[3] or '0') .. ' unsettled children but ' ..
        k_children(id) .. ' has ' .. open .. ': retention would ' ..
        ((tonumber(rec[3]) or 0) > open and 'never expire the tree' or 'expire a running tree'))
    end
  elseif not expiring then
    -- Without a record, index entries remain only for a retained root whose keys expired and
    -- that the next sweep drops (idx:expiry).
    if in_all then
      bad('listed_without_record', id, K_IDX_INSTANCES .. ' lists the instance but ' .. ki .. ' does not exist')
    end
    for _, s in ipairs(STATUSES) do
      if redis.call('ZSCORE', k_idx_status(s), id) then
        bad('status_without_record', id, k_idx_status(s) .. ' lists the instance but ' .. ki .. ' does not exist')
      end
    end
  end
end

-- Where worker item id belongs (keys_worker.go, "Invariants"), from its fields {s, t}: its tag
-- key's schedule when session-less; else wq:shold or its session group.
local function item_homes(sid, tk)
  if sid == '' then return { WQ.k_q(tk) } end
  return { WQ.K_SHOLD, WQ.k_sitems(tk, sid) }
end

local function check_item(id)
  local ki = WQ.k_item(id)
  local it = redis.call('HMGET', ki, 'i', 'e', 'a', 's', 't', 'k', 'u', 'x', 'd')
  if it[1] == false then return end -- entries of a missing item: 'wready' reports them, per set
  if WQ.seq(id) > (tonumber(redis.call('HGET', K_META, 'seq')) or 0) then
    bad('seq_behind', id, ki .. ' is numbered above ' .. K_META .. ' seq: the next enqueues would reuse its number ' ..
      '(a format record lost and written again)')
  end
  local sid, tk = it[4] or '', it[5] or '-'
  local places, score = {}, nil
  local homes = item_homes(sid, tk)
  if it[9] then homes = { WQ.K_DEAD } end -- a dead letter is in wq:dead only (work_dead)
  for _, key in ipairs(homes) do
    local sc = redis.call('ZSCORE', key, id)
    if sc then
      places[#places + 1] = key
      if key ~= WQ.k_sitems(tk, sid) then score = sc end
    end
  end
  if #places ~= 1 then
    bad('item_placement', id, ki .. ' is in ' .. (#places == 0 and 'no schedule or group: no fetch will take it' or
      table.concat(places, ' and ')))
  elseif it[6] and not score then
    bad('item_placement', id, ki .. ' is locked but ready in ' .. places[1] .. ', not held in ' .. WQ.K_SHOLD ..
      ': another fetch would take it')
  elseif it[6] and tonumber(score) ~= tonumber(it[7]) then
    bad('item_lock_expiry_mismatch', id, ki .. ' is locked until ' .. tostring(it[7]) .. ' but ' .. places[1] ..
      ' scores it at ' .. score .. ': a fetch would reclaim it at the wrong time')
  end
  if sid ~= '' and #places == 1 and places[1] == WQ.k_sitems(tk, sid) and not it[6] then -- visible in its group
    local idx = WQ.group_index(sid, tk)
    if not redis.call('ZSCORE', idx, sid) then
      bad('item_session_unindexed', id, 'session ' .. sid .. ' has visible items (' .. WQ.k_sitems(tk, sid) .. ') but ' ..
        idx .. ' does not list it: no fetch takes them')
    end
  end
  if sid ~= '' and not it[9] and not redis.call('HGET', WQ.K_SCOUNT, sid) then
    bad('session_uncounted', id, WQ.K_SCOUNT .. ' does not count session ' .. sid .. ', which has item ' .. ki ..
      ': fetches would not look for session items, and a cleanup could drop the session')
  end
  if tk ~= '-' and redis.call('SISMEMBER', WQ.K_TKS, tk) == 0 then
    bad('item_tag_unlisted', id, WQ.K_TKS .. ' does not list tag key ' .. tk .. ' of ' .. ki ..
      ': a TagFilter Any fetch would not see it')
  end
  local entry = redis.call('HGET', WQ.k_inst(it[1]), it[2] .. ':' .. it[3])
  local listed = false
  for w in string.gmatch(entry or '', '%S+') do
    if w == id then listed = true end
  end
  if not listed then
    bad('item_unlisted', id, WQ.k_inst(it[1]) .. ' does not list item ' .. id .. ' under ' .. it[2] .. ':' .. it[3] ..
      ': a cancellation would miss it')
  end
end

if mode == 'inst' then
  for _, id in ipairs(list) do check_instance(id) end
elseif mode == 'item' then
  for _, s in ipairs(list) do check_item(s) end
elseif mode == 'keys' then
  local id = subject
  if redis.call('EXISTS', k_inst(id), k_msgs(id), k_lock(id), k_execs(id)) == 0 and
    not redis.call('ZSCORE', K_IDX_EXPIRY, id) and redis.call('SISMEMBER', K_IDX_REAP, id) == 0 then
    local left = {}
    for _, k in ipairs(list) do
      if redis.call('EXISTS', k) == 1 then left[#left + 1] = k end
    end
    if #left > 0 then
      bad('orphaned_keys', id, 'keys of an instance that has no record, messages, lock or execution set: ' ..
        table.concat(left, ' '))
    end
  end
elseif mode == 'wready' then
  for _, id in ipairs(list) do
    local ki = WQ.k_item(id)
    if redis.call('ZSCORE', subject, id) then
      local it = redis.call('HMGET', ki, 's', 't', 'd')
      if not it[2] then
        bad('item_index_without_item', id, subject .. ' lists item ' .. id .. ' but ' .. ki ..
          ' does not exist: a fetch would lock it')
      else
        local home = false
        local homes = item_homes(it[1], it[2])
        if it[3] then homes = { WQ.K_DEAD } end -- a dead letter (work_dead)
        for _, key in ipairs(homes) do home = home or key == subject end
        if not home then
          bad('item_placement', id, subject .. ' lists item ' .. id .. ' whose session and tag key (' .. ki ..
            ') place it elsewhere: fetches of that set would take it')
        end
      end
    end
  end
elseif mode == 'outbox' then
  -- An outbox with entries is listed in ob:dirty, or no sweep forwards it (lib.lua, ob_put).
  for _, dest in ipairs(list) do
    if redis.call('LLEN', P .. 'ob:' .. dest) > 0 and not redis.call('ZSCORE', P .. 'ob:dirty', dest) then
      bad('outbox_unlisted', '', P .. 'ob:' .. dest .. ' holds entries but ' .. P .. 'ob:dirty does not list ' ..
        dest .. ': if its writer stopped before forwarding them, no sweep will')
    end
  end
elseif mode == 'global' then
  local listed = {}
  for _, p in ipairs(redis.call('SMEMBERS', K_PINS)) do listed[p] = true end
  for _, pin in ipairs(list) do
    if pin ~= '-' and not listed[pin] and redis.call('ZCARD', k_ready(pin)) > 0 then
      bad('pin_unlisted', '', k_ready(pin) .. ' holds ready instances but ' .. K_PINS ..
        ' does not list pin ' .. pin .. ': no fetch looks there')
    end
  end
  -- The format record (lib.lua, format_check): a namespace with data has it, and the keys a
  -- format-1 process touches first are hashes it cannot use.
  local fmt = FORMAT
  if subject == '1' then fmt = redis.call('HGET', K_META, 'format') or 'absent' end
  if fmt ~= FORMAT then
    bad('format_record', '', K_META .. ' says format ' .. tostring(fmt) .. ', want ' .. FORMAT ..
      ': a format-1 process could write here (dxctl migrate writes the record)')
  end
  for _, k in ipairs(FORMAT1_KEYS) do
    if subject == '1' and not MULTI and redis.call('TYPE', P .. k)['ok'] ~= 'hash' then
      bad('format_record', '', P .. k .. ' is not the format-2 hash: a format-1 process would use it')
    end
  end
  -- The housekeeping gates are at or before the earliest score they stand for.
  local gate = tonumber(redis.call('GET', K_OQ_NEXT))
  if gate then
    for _, key in ipairs({ K_LOCKED, K_DUE }) do
      local h = zhead(key)
      if h and h < gate then
        bad('gate_late', '', K_OQ_NEXT .. ' is ' .. gate .. ' but ' .. key .. ' has an entry due at ' .. h)
      end
    end
    local chore = tonumber(redis.call('GET', K_CHORES))
    if chore and chore < gate then
      bad('gate_late', '', K_OQ_NEXT .. ' is ' .. gate .. ' but ' .. K_CHORES .. ' is due at ' .. chore)
    end
  end
  -- The chores time is at or before the first chore (lib_admin.lua): else expired entries stay indexed.
  local due = chores_due(now)
  local chores_at = tonumber(redis.call('GET', K_CHORES))
  if due and (chores_at == nil or chores_at > due) then
    bad('chores_late', '', K_CHORES .. ' is ' .. tostring(chores_at or 'absent') .. ' but ' .. K_IDX_EXPIRY .. ', ' ..
      K_ORPHANS .. ' or ' .. K_IDX_REAP .. ' has an entry due at ' .. due .. ': no fetch sweeps it')
  end
elseif mode == 'deep' then
  for i = 1, #list, 2 do
    local id, hx = list[i], list[i + 1]
    local r = redis.call('HMGET', k_inst(id), 'exec', 'status', 'hn', 'parent', 'pp')
    local flags = ''
    if redis.call('ZSCORE', K_IDX_EXPIRY, id) or redis.call('SISMEMBER', K_IDX_REAP, id) == 1 then flags = flags .. 'x' end
    if is_locked(id) then flags = flags .. 'l' end
    local hist, msgs, acts = '', {}, {}
    if r[1] then
      hist = redis.call('GET', k_hist(id, r[1])) or ''
      local m = redis.call('HGETALL', k_msgs(id))
      for j = 1, #m, 2 do
        if string.sub(m[j], 1, 1) == 'm' then msgs[#msgs + 1] = m[j + 1] end
      end
      local a = redis.call('HGETALL', WQ.k_inst(id))
      for j = 1, #a, 2 do
        local st = '0'
        if string.byte(a[j + 1], 1) == 64 then
          st = a[j + 1]
        else
          for o in string.gmatch(a[j + 1], '%S+') do
            if redis.call('EXISTS', WQ.k_item(o)) == 1 then st = '1' end
          end
        end
        acts[#acts + 1], acts[#acts + 2] = a[j], st
      end
      if r[4] and not r[5] and redis.call('SISMEMBER', k_children(r[4]), id) == 1 then flags = flags .. 'k' end
    elseif hx ~= '' and redis.call('EXISTS', k_hist(id, hx)) == 1 then
      flags = flags .. 'h'
    end
    out[#out + 1] = { id, r[1] or '', r[2] or '', r[3] or '0', r[4] or '', r[5] or '', hist, msgs, acts, flags }
  end
elseif mode == 'ask' then
  for i = 1, #list, 3 do
    local q, a, b = list[i], list[i + 1], list[i + 2]
    local yes = false
    if q == 'inst' then
      yes = redis.call('EXISTS', k_inst(a), k_msgs(a)) > 0
    elseif q == 'alive' then
      local st = redis.call('HGET', k_inst(a), 'status')
      if st then yes = st ~= 'Completed' and st ~= 'Failed' else yes = redis.call('EXISTS', k_inst(a), k_msgs(a)) > 0 end
    elseif q == 'done' then
      local st = redis.call('HGET', k_inst(a), 'status')
      yes = st == 'Completed' or st == 'Failed'
    elseif q == 'settled' then
      yes = redis.call('EXISTS', k_inst(a)) == 1 and settled(a)
    elseif q == 'ob' then
      local needle = #b .. ':' .. b
      for _, e in ipairs(redis.call('LRANGE', P .. 'ob:' .. a, 0, -1)) do
        if string.find(e, needle, 1, true) then yes = true end
      end
    elseif q == 'act' then
      local e = redis.call('HGET', WQ.k_inst(a), b)
      for o in string.gmatch(e or '', '%S+') do
        if redis.call('EXISTS', WQ.k_item(o)) == 1 then yes = true end
      end
    elseif q == 'knows' then
      yes = redis.call('EXISTS', k_inst(a)) == 0 or redis.call('SISMEMBER', k_children(a), b) == 1
    elseif q == 'knowsx' then
      yes = redis.call('EXISTS', k_inst(a)) == 0 or (redis.call('SISMEMBER', k_children(a), b) == 1 and
        redis.call('HEXISTS', P .. 'chx:' .. a, b) == 1)
    end
    out[#out + 1] = yes and '1' or '0'
  end
else
  return fail('INVALID', 'unknown fsck mode ' .. tostring(mode))
end
return out
