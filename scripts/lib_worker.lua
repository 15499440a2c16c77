-- lib_worker.lua: worker-queue helpers, concatenated after lib.lua into every script. Key builders
-- mirror keys_worker.go (TestWorkerLuaKeysMatchGo checks it); the key listing and the invariants
-- are there too. Top-level locals: WQ (everything internal) and the functions other scripts call
-- by name: wq_enqueue, wq_enqueue_many, wq_cancel, wq_delete_instance.
--
-- An item is named by its enqueue sequence number n with n's digit count in front as a letter
-- ('a7', 'b12', WQ.id), so that ids sort as strings in sequence order: a schedule breaks score
-- ties by member. A worker lock token names its item: '<36-character nonce>.<id>'.
--
-- Item states. A session-less item is in its tag key's schedule wq:q:<tk> whatever its state,
-- scored by when a fetch may take it: its visible time while unlocked (enqueue ms, or the end of
-- an abandon's delay), its lock's expiry while locked; a fetch takes the head once its score has
-- passed, so an expired lock is reclaimed and a delay ends without any other index. A session
-- item is ready in its session group wq:sitems:<tk>:<sid> (whose head is indexed in
-- wq:sfree:<tk> or wq:sown:<tk>:<owner>), or locked or delayed in wq:shold (score: lock expiry or
-- visible time), from which session-aware fetches move the due ones back to their group. A
-- session's groups sit in its owner's index exactly while the session is in wq:sowned; fetch
-- moves them to the free index once the session lock expired.
local WQ = {
  BATCH = '100', -- due session items / expired sessions handled per fetch
}
-- Keys derived from the call's prefix (see dx_setup in lib.lua).
setup_hooks[#setup_hooks + 1] = function()
  WQ.K_SHOLD = P .. 'wq:shold'
  WQ.K_TKS = P .. 'wq:tks'
  WQ.K_SCOUNT = P .. 'wq:scount'
  WQ.K_SOWNED = P .. 'wq:sowned'
  WQ.K_SIDLE = P .. 'wq:sidle'
  WQ.K_WAITING = P .. 'wq:waiting'
  WQ.K_CAPS = P .. 'caps'
  WQ.K_DEAD = P .. 'wq:dead'
end
function WQ.k_item(id) return P .. 'wq:m:' .. id end
function WQ.k_inst(id) return P .. 'wq:inst:' .. id end
function WQ.k_q(tk) return P .. 'wq:q:' .. tk end
function WQ.k_sess(sid) return P .. 'wq:sess:' .. sid end
function WQ.k_sitems(tk, sid) return P .. 'wq:sitems:' .. tk .. ':' .. sid end
function WQ.k_stags(sid) return P .. 'wq:stags:' .. sid end
function WQ.k_sfree(tk) return P .. 'wq:sfree:' .. tk end
function WQ.k_sown(tk, owner) return P .. 'wq:sown:' .. tk .. ':' .. owner end
function WQ.k_owner(owner) return P .. 'wq:owner:' .. owner end
function WQ.k_cap_run(tk) return P .. 'cap:run:' .. tk end
function WQ.k_cap_rate(tk) return P .. 'cap:rate:' .. tk end

-- Caps per tag (keys_worker.go, "Caps"): a fetch told to check them (work_fetch's caps) loads
-- the caps hash once: WQ.CAPS[tk] = {concurrency, rate per s, burst}; nil when it does not check
-- them (no cap is set: no command is added). Per call: work_fetch sets it first thing.
WQ.CAPS = nil
function WQ.load_caps()
  local caps = {}
  local all = redis.call('HGETALL', WQ.K_CAPS)
  for i = 1, #all, 2 do
    local k, r, b = string.match(all[i + 1], '^(%d+) ([%d.]+) (%d+)$')
    if k then caps[all[i]] = { tonumber(k), tonumber(r), tonumber(b) } end
  end
  WQ.CAPS = caps
end

-- The tokens of tk's rate bucket now (a full bucket when its key expired or never existed).
function WQ.cap_tokens(tk, c, now)
  local burst = math.max(c[3], 1)
  local b = redis.call('HMGET', WQ.k_cap_rate(tk), 't', 'at')
  if not b[1] then return burst end
  local t = tonumber(b[1]) + (now - tonumber(b[2])) * c[2] / 1000
  if t > burst then t = burst end
  return t
end

-- Whether a fetch may start an item of tk now: true, or false and when it may next (ms). The
-- running set loses the locks that expired (a dead worker's slot comes back then).
function WQ.cap_open(tk, now)
  local c = WQ.CAPS[tk]
  if c[1] > 0 then
    local kr = WQ.k_cap_run(tk)
    redis.call('ZREMRANGEBYSCORE', kr, '-inf', d(now))
    if redis.call('ZCARD', kr) >= c[1] then
      local h = redis.call('ZRANGE', kr, '0', '0', 'WITHSCORES')
      return false, tonumber(h[2])
    end
  end
  if c[2] > 0 then
    local t = WQ.cap_tokens(tk, c, now)
    if t < 1 then return false, now + math.ceil((1 - t) * 1000 / c[2]) end
  end
  return true
end

-- Count item id (tag key tk), locked until until_ms, against tk's caps: it joins the running set
-- (scored at its lock's expiry; its field r says so, for ack, abandon and renew) and takes a token.
function WQ.cap_take(tk, id, until_ms, now)
  local c = WQ.CAPS and WQ.CAPS[tk]
  if not c then return end
  if c[1] > 0 then
    redis.call('ZADD', WQ.k_cap_run(tk), d(until_ms), id)
    redis.call('HSET', WQ.k_item(id), 'r', '1')
  end
  if c[2] > 0 then
    local kb = WQ.k_cap_rate(tk)
    redis.call('HSET', kb, 't', tostring(WQ.cap_tokens(tk, c, now) - 1), 'at', d(now))
    -- Idle, the bucket refills: once it would be full its key may go.
    redis.call('PEXPIRE', kb, d(math.ceil(math.max(c[3], 1) * 1000 / c[2]) + 1000))
  end
end

-- An item counted in tk's running set stopped running (acked, abandoned, deleted): its slot is
-- free, and a fetcher waiting for tk is woken.
function WQ.cap_release(tk, id)
  redis.call('ZREM', WQ.k_cap_run(tk), id)
  WQ.wake_for('p', tk)
end

-- Item id of sequence number n, and back (keys_worker.go WorkItemID).
function WQ.id(n)
  local s = d(n)
  return string.char(96 + #s) .. s
end
function WQ.seq(id) return string.sub(id, 2) + 0 end

-- Tag key: '-' untagged, else '<byte length>:<tag>' (self-delimiting inside longer keys).
function WQ.tag_key(tag)
  if tag == nil or tag == '' then return '-' end
  return #tag .. ':' .. tag
end

-- The index holding session sid's group for tk, and the owner: its owner's index while the
-- session is in K_SOWNED, else the free one (owner nil).
function WQ.group_index(sid, tk)
  if redis.call('ZSCORE', WQ.K_SOWNED, sid) then
    local owner = redis.call('HGET', WQ.k_sess(sid), 'o')
    return WQ.k_sown(tk, owner), owner
  end
  return WQ.k_sfree(tk), nil
end

-- Wake lists worker fetchers block on, by what they may take: class 'p' session-less items,
-- 's' items of claimable sessions, 'o' items of sessions owner holds; per tag key, and tag key '*'
-- for TagFilter Any. A fetcher blocks on the lists of its tag keys (and, with a session config,
-- its 's' and 'o' lists), so a wake-up always reaches a fetcher that can take the item.
-- A list is pushed to only while a fetcher may block on it: an empty fetch registers its lists in
-- WQ.K_WAITING (WQ.register_waiter) until the longest it may wait, skipped scripts included (see
-- redisprovider's poll), so a busy queue pays one ZMSCORE per wake-up instead of list pushes nobody
-- takes.
function WQ.wake_suffix(class, tk, owner)
  if owner then return class .. ':' .. tk .. ':' .. owner end
  return class .. ':' .. tk
end
function WQ.k_wake(class, tk, owner) return P .. 'wq:wake:' .. WQ.wake_suffix(class, tk, owner) end

-- Wake n (default 1) fetchers that may take an item of (class, tk, owner), and as many TagFilter
-- Any fetchers.
function WQ.wake_for(class, tk, owner, n)
  local s = redis.call('ZMSCORE', WQ.K_WAITING, WQ.wake_suffix(class, tk, owner), WQ.wake_suffix(class, '*', owner))
  if not (s[1] or s[2]) then return end
  local now = now_ms()
  if s[1] and s[1] + 0 >= now then wake(WQ.k_wake(class, tk, owner), n or 1) end
  if s[2] and s[2] + 0 >= now then wake(WQ.k_wake(class, '*', owner), n or 1) end
end

-- Register the wake lists of a fetcher with tag keys tks (or {'*'}) and owner ('' none) for
-- wait_ms. The registry expires once nobody registered for up to twice that long. Cost: ZADD and
-- PTTL; a ZREMRANGEBYSCORE when a list is new to the registry, a PEXPIRE once per wait_ms.
function WQ.register_waiter(tks, owner, wait_ms)
  local until_ms = now_ms() + wait_ms
  local args = { 'GT' }
  until_ms = d(until_ms)
  for _, tk in ipairs(tks) do
    args[#args + 1], args[#args + 2] = until_ms, WQ.wake_suffix('p', tk)
    if owner ~= '' then
      args[#args + 1], args[#args + 2] = until_ms, WQ.wake_suffix('s', tk)
      args[#args + 1], args[#args + 2] = until_ms, WQ.wake_suffix('o', tk, owner)
    end
  end
  if #args > 1 and redis.call('ZADD', WQ.K_WAITING, unpack(args)) > 0 then
    redis.call('ZREMRANGEBYSCORE', WQ.K_WAITING, '-inf', '(' .. now_ms())
  end
  if redis.call('PTTL', WQ.K_WAITING) < wait_ms then redis.call('PEXPIRE', WQ.K_WAITING, 2 * wait_ms) end
end

-- The wake class of an item of session sid ('' none) with tag key tk: class, owner.
function WQ.wake_class(sid, tk)
  if sid == '' then return 'p', nil end
  local _, owner = WQ.group_index(sid, tk)
  if owner then return 'o', owner end
  return 's', nil
end

-- Point the group's index entry at its oldest ready item, or drop it when the group is empty.
function WQ.reindex_group(sid, tk)
  local idx = WQ.group_index(sid, tk)
  local h = redis.call('ZRANGE', WQ.k_sitems(tk, sid), '0', '0', 'WITHSCORES')
  if h[1] then redis.call('ZADD', idx, h[2], sid) else redis.call('ZREM', idx, sid) end
end

-- Make item id visible (unlocked) where its session and tag key select: a session-less item in
-- its schedule at time `at` (its enqueue ms: it keeps its place), a session item in its group by
-- sequence number. With wake_it, wake a fetcher that may take it.
function WQ.make_ready(id, sid, tk, wake_it, at)
  if sid == '' then
    redis.call('ZADD', WQ.k_q(tk), at, id)
    if wake_it then WQ.wake_for('p', tk) end
    return
  end
  local n = string.sub(id, 2) -- the sequence number, as the string Redis is given
  redis.call('ZADD', WQ.k_sitems(tk, sid), n, id)
  redis.call('SADD', WQ.k_stags(sid), tk)
  local idx, owner = WQ.group_index(sid, tk)
  local cur = redis.call('ZSCORE', idx, sid)
  if not cur or tonumber(cur) > tonumber(n) then redis.call('ZADD', idx, n, sid) end
  if wake_it then
    if owner then WQ.wake_for('o', tk, owner) else WQ.wake_for('s', tk) end
  end
end

-- Take session item id out of its group (no-op when it is not there).
function WQ.unready(id, sid, tk)
  if redis.call('ZREM', WQ.k_sitems(tk, sid), id) == 1 then WQ.reindex_group(sid, tk) end
end

-- Release a session from its owner's index (its lock expired): its groups become claimable, and a
-- session-aware fetcher is woken for each. Cost: O(tag keys of the session).
function WQ.release(sid)
  local owner = redis.call('HGET', WQ.k_sess(sid), 'o')
  local kt = WQ.k_stags(sid)
  for _, tk in ipairs(redis.call('SMEMBERS', kt)) do
    local h = owner and redis.call('ZSCORE', WQ.k_sown(tk, owner), sid)
    if h then
      redis.call('ZREM', WQ.k_sown(tk, owner), sid)
      redis.call('ZADD', WQ.k_sfree(tk), h, sid)
      WQ.wake_for('s', tk)
    else
      redis.call('SREM', kt, tk) -- nothing ready under tk; make_ready adds it back
    end
  end
  redis.call('ZREM', WQ.K_SOWNED, sid)
  if owner then redis.call('SREM', WQ.k_owner(owner), sid) end
end

-- Give session sid to owner: claim it (unowned or released), or refresh it when owner already
-- holds it (the lock is never shortened). Records locked_until and last_activity. Cost: O(tag
-- keys of the session).
function WQ.claim(sid, owner, lock_ms, now)
  local ks = WQ.k_sess(sid)
  local until_ms = now + lock_ms
  if redis.call('ZSCORE', WQ.K_SOWNED, sid) then
    local rec = redis.call('HMGET', ks, 'o', 'u')
    if rec[1] == owner then
      local u = tonumber(rec[2]) or 0
      if u > until_ms then until_ms = u end
      redis.call('HSET', ks, 'u', until_ms, 'l', now)
      redis.call('ZADD', WQ.K_SOWNED, until_ms, sid)
      redis.call('SADD', WQ.k_owner(owner), sid)
      return
    end
    WQ.release(sid)
  end
  for _, tk in ipairs(redis.call('SMEMBERS', WQ.k_stags(sid))) do
    local h = redis.call('ZSCORE', WQ.k_sfree(tk), sid)
    if h then
      redis.call('ZREM', WQ.k_sfree(tk), sid)
      redis.call('ZADD', WQ.k_sown(tk, owner), h, sid)
    end
  end
  redis.call('HSET', ks, 'o', owner, 'u', until_ms, 'l', now)
  redis.call('ZADD', WQ.K_SOWNED, until_ms, sid)
  redis.call('SADD', WQ.k_owner(owner), sid)
end

-- Refresh a session's last activity while its lock is valid (ack and renew; ownership not checked).
function WQ.touch_session(sid, now)
  if sid == '' then return end
  local u = redis.call('HGET', WQ.k_sess(sid), 'u')
  if u and tonumber(u) > now then redis.call('HSET', WQ.k_sess(sid), 'l', now) end
end

-- A batched worker ack's gathered writes (work_ack_many sets GROUP to WQ.group() before its acks
-- and runs WQ.group_flush after them): the completions by target instance, in ack order, and the
-- count of each outcome for the per-minute stats (work_ack); the schedule entries and instance-index
-- fields of the items deleted (WQ.delete; the item hashes themselves go at once, so that a token
-- repeated in the batch finds its item gone). Each is then written with one command per key
-- instead of one per item (dxbench W2 at 32 activity slots: 270 -> 176 commands per fan-out).
function WQ.group()
  return { targets = {}, msgs = {}, ac = 0, af = 0, tks = {}, zrem = {}, insts = {}, hdel = {} }
end

function WQ.group_flush(g, now)
  GROUP = nil
  for _, tk in ipairs(g.tks) do call_chunked('ZREM', WQ.k_q(tk), g.zrem[tk]) end
  for _, kx in ipairs(g.insts) do call_chunked('HDEL', kx, g.hdel[kx]) end
  for _, target in ipairs(g.targets) do
    local pin = oq_enqueue_now(target, g.msgs[target], now)
    if pin then wake_orch(pin, 1) end
  end
  if g.ac > 0 then stats_count('ac', g.ac) end
  if g.af > 0 then stats_count('af', g.af) end
end

-- Delete worker item id wherever it stands; a held lock token stops working. keep_inst skips the
-- instance index (the caller drops that entry itself). it, when the caller read them already, are
-- the item's fields as WQ.held reads them, {k, u, s, t, n, i, e, a, x, c, r} (the table WQ.held
-- returned, not a copy; a held item is no dead letter, so d, the 12th, is absent). Returns true when
-- the item existed.
function WQ.delete(id, keep_inst, it)
  local ki = WQ.k_item(id)
  it = it or redis.call('HMGET', ki, 'k', 'u', 's', 't', 'n', 'i', 'e', 'a', 'x', 'c', 'r', 'd')
  local inst, sid, tk, tok = it[6], it[3], it[4], it[1]
  if not inst then return false end
  if it[12] then redis.call('ZREM', WQ.K_DEAD, id) end -- a dead letter (work_dead)
  if sid == '' then
    if GROUP then group_push(GROUP.tks, GROUP.zrem, tk, id) else redis.call('ZREM', WQ.k_q(tk), id) end
    if it[11] == '1' then WQ.cap_release(tk, id) end
  elseif tok then
    redis.call('ZREM', WQ.K_SHOLD, id)
  elseif redis.call('ZREM', WQ.K_SHOLD, id) == 0 then -- delayed, or else ready in its group
    WQ.unready(id, sid, tk)
  end
  redis.call('DEL', ki)
  if not keep_inst then
    local kx, f = WQ.k_inst(inst), it[7] .. ':' .. it[8]
    local rest = {}
    if it[9] ~= '1' then -- x '1': the entry is this item's alone (wq_enqueue), no need to read it
      for w in string.gmatch(redis.call('HGET', kx, f) or '', '%S+') do
        if w ~= id then rest[#rest + 1] = w end
      end
    end
    if #rest > 0 then
      redis.call('HSET', kx, f, table.concat(rest, ' '))
    elseif GROUP then
      group_push(GROUP.insts, GROUP.hdel, kx, f)
    else
      redis.call('HDEL', kx, f)
    end
  end
  if sid ~= '' and redis.call('HINCRBY', WQ.K_SCOUNT, sid, '-1') <= 0 then
    redis.call('HDEL', WQ.K_SCOUNT, sid)
    redis.call('DEL', WQ.k_stags(sid))
    local u = redis.call('HGET', WQ.k_sess(sid), 'u')
    if u then redis.call('ZADD', WQ.K_SIDLE, u, sid) end
  end
  return true
end

-- Lock item id (session sid, tag key tk; a session item already taken out of its group) for
-- token until until_ms: the lock's expiry becomes its score in its schedule (wq:shold for a
-- session item). Returns {attempt, json, token}, or nil when the item does not exist.
function WQ.lock(id, token, until_ms, sid, tk)
  local u = d(until_ms)
  local r = WQ.lock_item(id, token, u)
  if r then redis.call('ZADD', sid == '' and WQ.k_q(tk) or WQ.K_SHOLD, u, id) end
  return r
end

-- The item hash's part of a lock (WQ.lock, WQ.lock_many): item id's token (token '.' id), expiry
-- u (ms, as text) and delivery count. Returns {delivery, json, token}, or nil when it is gone.
function WQ.lock_item(id, token, u)
  local ki = WQ.k_item(id)
  local it = redis.call('HMGET', ki, 'j', 'n')
  if not it[1] then return nil end
  local n = (it[2] or 0) + 1
  token = token .. '.' .. id
  redis.call('HSET', ki, 'k', token, 'u', u, 'n', d(n))
  return { n, it[1], token }
end

-- Lock the due heads of tag key tk's schedule, at most want, for token until until_ms, in
-- schedule order (what as many work_fetches would take one after the other from one tag key
-- without sessions or caps), with one read and one write of the schedule for all. Returns
-- work_fetch's reply for each, and when the schedule's first entry not due comes due (-1: none),
-- or nil for that when a stale entry was dropped (the caller looks again).
function WQ.lock_many(tk, token, now, until_ms, want)
  local kq = WQ.k_q(tk)
  local u = d(until_ms)
  local zargs, out, stale, later = {}, {}, nil, -1
  local h = redis.call('ZRANGE', kq, '0', d(want - 1), 'WITHSCORES')
  for i = 1, #h, 2 do
    local id, at = h[i], h[i + 1] + 0
    if at > now then
      later = at
      break
    end
    local r = WQ.lock_item(id, token, u)
    if r then
      zargs[#zargs + 1], zargs[#zargs + 2] = u, id
      out[#out + 1] = { 1, r[1], r[2], r[3] }
    else -- a stale entry (never expected), as work_fetch drops one
      stale = stale or {}
      stale[#stale + 1] = id
    end
  end
  if zargs[1] then redis.call('ZADD', kq, unpack(zargs)) end
  if stale then
    redis.call('ZREM', kq, unpack(stale))
    return out, nil
  end
  return out, later
end

-- A batched fetch's items (work_fetch_many, work_ack_many): up to want replies of fetch
-- (op_work_fetch) with ARGV fa appended to out. The first fetch runs with fa as given: when it
-- finds nothing it registers the caller's wait (a wait_ms in fa), and with keep_empty its empty
-- reply goes to out; the others register nothing. A fetch of one tag key without sessions or caps
-- locks every item it may take at once (work_fetch, MANY); others take one per fetch.
function WQ.fetch_many(fetch, KEYS, fa, want, out, keep_empty)
  local got = 0
  while got < want do
    MANY, EXTRA = want - got, nil
    local r = fetch(KEYS, fa)
    MANY = nil
    if r[1] ~= 1 then
      if got == 0 and keep_empty then out[#out + 1] = r end
      return
    end
    out[#out + 1], got = r, got + 1
    fa[6] = '0' -- wait_ms (work_fetch's fifth argument): only the first fetch registers a wait
    if EXTRA then
      for _, x in ipairs(EXTRA) do out[#out + 1] = x end
      got = got + #EXTRA
      return -- the fetch took all it could
    end
  end
end

-- Look up a held lock: returns the item id and its fields {k, u, s, t, n, i, e, a, x, c, r}, or nil
-- and an error reply. An expired lock is still "held" until a fetch reclaims it; given now, an
-- expired one is refused.
function WQ.held(token, now)
  local id = nil
  if #token > 37 and string.sub(token, 37, 37) == '.' then id = string.sub(token, 38) end
  if not id or not string.match(id, '^%l%d+$') then
    return nil, fail('INVALID_TOKEN', 'Invalid lock token: unknown worker lock_token (acked, abandoned, '
      .. 'expired and reclaimed, or the activity was cancelled)')
  end
  local it = redis.call('HMGET', WQ.k_item(id), 'k', 'u', 's', 't', 'n', 'i', 'e', 'a', 'x', 'c', 'r')
  if it[1] == false then
    return nil, fail('INVALID_TOKEN', 'Invalid lock token: unknown worker lock_token (acked, abandoned, '
      .. 'expired and reclaimed, or the activity was cancelled)')
  end
  if it[1] ~= token then
    return nil, fail('INVALID_TOKEN', 'Invalid lock token: the worker item no longer holds this lock_token')
  end
  local until_ms = it[2] + 0
  if now and until_ms <= now then
    return nil, fail('INVALID_TOKEN', 'Invalid lock token: the worker item lock expired')
  end
  LOCK_UNTIL = until_ms
  return id, it
end

-- work_fetch's candidate among the due heads of the schedules of tag keys tks and, with sess (an
-- owner while session items exist), the head groups of the session indexes: the smallest sequence
-- number wins (FIFO). Returns its sequence number, member (item id, or session id for a group), tag
-- key and index (nil for a schedule's item), and nxt lowered to a schedule head not due yet. With
-- all_tags, a tag key without items leaves wq:tks while no session items exist.
function WQ.pick(tks, all_tags, owner, sess, now, nxt)
  local best, best_member, best_tk, best_idx = nil, nil, nil, nil
  local sessions = sess or nil
  for i = 1, #tks do
    local tk = tks[i]
    local h = redis.call('ZRANGE', WQ.k_q(tk), '0', '0', 'WITHSCORES')
    if h[1] then
      local at = h[2] + 0 -- (a score: + 0 converts once, tonumber twice)
      if at > now then
        if nxt < 0 or at < nxt then nxt = at end
      else
        local open, retry = true, nil
        if WQ.CAPS and WQ.CAPS[tk] then open, retry = WQ.cap_open(tk, now) end
        if open then
          local s = WQ.seq(h[1])
          if best == nil or s < best then best, best_member, best_tk, best_idx = s, h[1], tk, nil end
        elseif nxt < 0 or retry < nxt then
          nxt = retry -- capped: look again when a slot or a token comes free (or a release wakes it)
        end
      end
    elseif all_tags and i > 1 then
      if sessions == nil then sessions = redis.call('EXISTS', WQ.K_SCOUNT) == 1 end
      if not sessions then redis.call('SREM', WQ.K_TKS, tk) end -- no item has this tag key any more
    end
    if sess then
      for _, idx in ipairs({ WQ.k_sown(tk, owner), WQ.k_sfree(tk) }) do
        local g = redis.call('ZRANGE', idx, '0', '0', 'WITHSCORES')
        if g[1] and (best == nil or tonumber(g[2]) < best) then
          best, best_member, best_tk, best_idx = tonumber(g[2]), g[1], tk, idx
        end
      end
    end
  end
  return best, best_member, best_tk, best_idx, nxt
end

-- Session housekeeping of a session-aware fetch while session items exist (DESIGN.md S5):
-- release expired sessions to the claimable indexes, and move the session items of wq:shold
-- whose lock expired or whose delay passed back to their group (an expired lock's token stops
-- working; the next delivery counts one more attempt), waking fetchers that may take them; at
-- most BATCH of each. Session-less items need none: their schedule's order is their due time.
-- now: the call's time, ms, as a string.
function WQ.maintain_sessions(now)
  for _, sid in ipairs(redis.call('ZRANGEBYSCORE', WQ.K_SOWNED, '-inf', now, 'LIMIT', '0', WQ.BATCH)) do
    WQ.release(sid)
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', WQ.K_SHOLD, '-inf', now, 'LIMIT', '0', WQ.BATCH)) do
    redis.call('ZREM', WQ.K_SHOLD, id)
    local it = redis.call('HMGET', WQ.k_item(id), 'k', 's', 't')
    if it[1] then redis.call('HDEL', WQ.k_item(id), 'k', 'u') end
    if it[3] then WQ.make_ready(id, it[2], it[3], true) end
  end
end

-- Add one worker item (session and tag '' for none), visible at once, and wake a fetcher that may
-- take it (worker fetchers block on the WQ.k_wake lists). Cost: O(1) (O(log N) index updates).
-- Item hash fields: j JSON, i instance, e execution, a activity id, s session, t tag key, n
-- deliveries, c created ms, k/u lock token and until while locked, x '1' while the item is the only
-- one in its activity's entry of the instance index wq:inst:<id> (deleting it then drops the entry
-- without reading it; an activity scheduled twice lists several items there). A tagged item's tag
-- key joins wq:tks (the tag keys TagFilter Any reads).
local function wq_enqueue(now, json, inst, exec, actid, session, tag)
  local id = WQ.id(next_seq(1))
  local tk = WQ.tag_key(tag)
  local created = now == now_ms() and now_s() or d(now)
  local kx, f = WQ.k_inst(inst), exec .. ':' .. actid
  local alone = redis.call('HSETNX', kx, f, id) == 1
  if not alone then
    local list = redis.call('HGET', kx, f)
    for o in string.gmatch(list, '%S+') do redis.call('HDEL', WQ.k_item(o), 'x') end
    redis.call('HSET', kx, f, list .. ' ' .. id)
  end
  redis.call('HSET', WQ.k_item(id), 'j', json, 'i', inst, 'e', exec, 'a', actid, 's', session, 't', tk,
    'n', '0', 'c', created, 'x', alone and '1' or '0')
  if tk ~= '-' then redis.call('SADD', WQ.K_TKS, tk) end
  if session ~= '' and redis.call('HINCRBY', WQ.K_SCOUNT, session, '1') == 1 then
    redis.call('ZREM', WQ.K_SIDLE, session)
  end
  WQ.make_ready(id, session, tk, true, created)
end

-- Add a turn's worker items, n entries {json, inst, exec, actid, session, tag} of A from at on (a
-- section read in place, args.go: item i's fields are A[at + 6i - 5] ... A[at + 6i]), in
-- fewer commands than one wq_enqueue each: one HINCRBY for their sequence numbers, one read and
-- one write of each instance's index entries, and for the session-less items one ZADD and one
-- wake-up check per tag key. The effect is that of wq_enqueue on each in order. Cost: O(items)
-- (O(log N) index updates), items + ~5 commands for one instance and tag. One item takes
-- wq_enqueue: the batch's bookkeeping tables cost a hello 2.9% more Redis instructions
-- (callgrind) for the same commands.
local function wq_enqueue_many(now, A, at, n)
  if n == 1 then wq_enqueue(now, A[at + 1], A[at + 2], A[at + 3], A[at + 4], A[at + 5], A[at + 6]) end
  if n <= 1 then return end
  local s0 = next_seq(d(n)) - n
  local created = now == now_ms() and now_s() or d(now)
  -- The instance index entries the items go to, read once per instance (an ack's items are all
  -- its own instance's): byinst[inst] = {kx, fields, got}, got[field] the entry.
  local byinst, insts = {}, {}
  for i = 1, n do
    local b = at + 6 * i - 6 -- item i's fields: A[b + 1] ... A[b + 6]
    local e = byinst[A[b + 2]]
    if not e then
      e = { WQ.k_inst(A[b + 2]), {}, {} }
      byinst[A[b + 2]], insts[#insts + 1] = e, e
    end
    e[2][#e[2] + 1] = A[b + 3] .. ':' .. A[b + 4]
  end
  for _, e in ipairs(insts) do
    local fl, got = e[2], e[3]
    local part = call_chunked('HMGET', e[1], fl)
    for j = 1, #fl do got[fl[j]] = part[j] end
  end
  -- Each item joins its activity's entry, alone ('1') when the entry was empty, else '0'; items
  -- already there lose their mark: in this batch (alone false: no field), or in Redis (HDEL).
  local alone, batch = {}, {}
  for i = 1, n do
    local b = at + 6 * i - 6
    local id = WQ.id(s0 + i)
    batch[id] = i
    local got, f = byinst[A[b + 2]][3], A[b + 3] .. ':' .. A[b + 4]
    local list = got[f]
    if list then
      for o in string.gmatch(list, '%S+') do
        if batch[o] then alone[batch[o]] = false else redis.call('HDEL', WQ.k_item(o), 'x') end
      end
      got[f] = list .. ' ' .. id
      alone[i] = '0'
    else
      got[f] = id
      alone[i] = '1'
    end
  end
  for _, e in ipairs(insts) do
    local args, seen = {}, {}
    for _, f in ipairs(e[2]) do
      if not seen[f] then
        seen[f] = true
        args[#args + 1], args[#args + 2] = f, e[3][f]
      end
    end
    call_chunked('HSET', e[1], args)
  end
  local ready, tks = {}, {}
  for i = 1, n do
    local b = at + 6 * i - 6
    local id, session, tk = WQ.id(s0 + i), A[b + 5], WQ.tag_key(A[b + 6])
    local ki = WQ.k_item(id) -- (one HSET either way, no table of its arguments)
    if alone[i] then
      redis.call('HSET', ki, 'j', A[b + 1], 'i', A[b + 2], 'e', A[b + 3], 'a', A[b + 4], 's', session, 't', tk, 'n', '0', 'c', created, 'x', alone[i])
    else
      redis.call('HSET', ki, 'j', A[b + 1], 'i', A[b + 2], 'e', A[b + 3], 'a', A[b + 4], 's', session, 't', tk, 'n', '0', 'c', created)
    end
    if not ready[tk] then
      ready[tk] = {}
      tks[#tks + 1] = tk
      if tk ~= '-' then redis.call('SADD', WQ.K_TKS, tk) end
    end
    if session ~= '' then
      if redis.call('HINCRBY', WQ.K_SCOUNT, session, '1') == 1 then redis.call('ZREM', WQ.K_SIDLE, session) end
      WQ.make_ready(id, session, tk, true)
    else
      local r = ready[tk]
      r[#r + 1], r[#r + 2] = created, id
    end
  end
  for _, tk in ipairs(tks) do
    local r = ready[tk]
    if #r > 0 then
      call_chunked('ZADD', WQ.k_q(tk), r)
      WQ.wake_for('p', tk, nil, #r / 2)
    end
  end
end

-- Delete the worker items of activity (inst, exec, actid), even locked ones (their tokens stop
-- working: ack and renew then fail permanently). No-op when absent. Returns how many were deleted.
-- Cost: O(items of that activity).
local function wq_cancel(inst, exec, actid)
  local kx, f = WQ.k_inst(inst), exec .. ':' .. actid
  local list = redis.call('HGET', kx, f)
  if not list then return 0 end
  redis.call('HDEL', kx, f)
  if string.byte(list, 1) == 64 then -- '@<partition>': a session item homed there (orch_ack, xw)
    ob_put(string.sub(list, 2), 'x', inst, exec, actid)
    return 0
  end
  local n = 0
  for id in string.gmatch(list, '%S+') do
    if WQ.delete(id, true) then n = n + 1 end
  end
  return n
end

-- Delete every worker item of an instance (locked ones too). Returns how many were deleted.
-- Cost: O(worker items of the instance).
local function wq_delete_instance(inst)
  local kx = WQ.k_inst(inst)
  local n = 0
  if MULTI then -- entries may note session items homed in other partitions (wq_cancel)
    local all = redis.call('HGETALL', kx)
    redis.call('DEL', kx)
    for i = 1, #all, 2 do
      local list = all[i + 1]
      if string.byte(list, 1) == 64 then
        local exec, actid = string.match(all[i], '^(%d+):(%d+)$')
        ob_put(string.sub(list, 2), 'x', inst, exec, actid)
      else
        for id in string.gmatch(list, '%S+') do
          if WQ.delete(id, true) then n = n + 1 end
        end
      end
    end
    return n
  end
  local lists = redis.call('HVALS', kx)
  redis.call('DEL', kx)
  for _, list in ipairs(lists) do
    for id in string.gmatch(list, '%S+') do
      if WQ.delete(id, true) then n = n + 1 end
    end
  end
  return n
end
