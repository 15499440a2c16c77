-- work_fetch: lock the oldest visible worker item the caller may take, for the lock timeout.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token nonce (36 characters; the token is '<nonce>.<id>')
--   lock_ms: lock ms
--   owner: session owner ('' = no session config: session-bound items are never returned)
--   slock_ms: session lock ms
--   wait_ms: the ms for which the caller may wait after an empty fetch (its wake lists stay
--     registered that long, see WQ.register_waiter)
--   mode: '' plain; for namespaces of several partitions (redisprovider picks the partition with
--     the oldest work): 'h' adds the partition's next candidate's sequence number to a reply with an
--     item (-1: none); 'p' (peek) locks nothing and replies {0, now ms, next ms, the oldest
--     candidate's sequence number or -1}
--   caps: '1' to apply the caps per tag (keys_worker.go, "Caps"; redisprovider sets it where a
--     cap is set), else ''
--   any: '*' for every tag key in use (TagFilter Any) or '' for the list that follows
--   tks[tag_key]...: tag keys ('-' untagged, '<len>:<tag>'), to the end
-- Reply: {1, attempt, item JSON, lock token} when an item was locked (attempt counts this delivery), else
--   {0, now ms, next ms}: next is when an item of the caller's tag keys next becomes takeable (a
--   delay ends or a lock expires) or, with an owner while session items exist, a session item's
--   lock or delay or a session lock next comes due; -1 when nothing is pending.
-- Effects: a session-less item whose lock expired is taken again (attempt + 1) as any other due
--   head of its schedule. With an owner while session items exist, first releases expired sessions
--   to the claimable indexes and moves due session items of wq:shold back to their group (at most
--   100 of each), waking fetchers that may take them. Taking a session item claims the session for
--   the owner (owner, locked_until = now + session lock, last_activity = now), or refreshes it when
--   the owner already holds it (never shortening its lock). TagFilter Any drops from wq:tks the tag
--   keys it finds without items while no session items exist.
-- Errors: none.
-- Cost: O(tag keys x (1 schedule head + 2 session index heads with an owner) + due session items
--   and expired sessions handled (<= 100 each) + tag keys of the claimed session) x O(log N);
--   TagFilter Any adds SMEMBERS of wq:tks. Independent of how many items the tag filter or the
--   session rules exclude: session items never sit in the schedules, and sessions held by other
--   owners never sit in the free or this owner's indexes. One tag key and no session items:
--   TIME, ZRANGE, HMGET, HSET, ZADD.
WQ.CAPS = nil
if caps then WQ.load_caps() end
local all_tags = any == '*'
if all_tags then
  tks = { '-' }
  for _, tk in ipairs(redis.call('SMEMBERS', WQ.K_TKS)) do tks[#tks + 1] = tk end
end
local now = now_ms()
-- Whether session items exist (wq:scount counts the items of each session that has some: without
-- it the session indexes and wq:shold are empty); nil until read. Numeric arguments go to Redis as
-- strings ('0'): Redis formats a Lua number with snprintf, which a hot path notices.
local sessions = nil
if owner ~= '' then
  sessions = redis.call('EXISTS', WQ.K_SCOUNT) == 1
  if sessions then WQ.maintain_sessions(now_s()) end
end
local sess = sessions == true

-- Candidates: the due head of each schedule and the head group of each session index the filter
-- selects; the smallest sequence number wins (FIFO). A schedule's head not due yet says when the
-- caller should look again (nxt).
local nxt = -1
if mode == 'p' then
  local best, _, _, _, n2 = WQ.pick(tks, all_tags, owner, sess, now, nxt)
  if not best and wait_ms > 0 then WQ.register_waiter(all_tags and { '*' } or tks, owner, wait_ms) end
  return { 0, now, n2, best or -1 }
end
-- A batched fetch (MANY items, lib_worker.lua WQ.fetch_many) of one tag key without sessions or
-- caps locks the due heads of its schedule at once: the first is the reply, the others EXTRA.
-- Finding none due, it replies as the search below would, without reading the schedule again.
if MANY and MANY > 1 and not sess and #tks == 1 and not all_tags and mode == '' and not (WQ.CAPS and WQ.CAPS[tks[1]]) then
  local got, later = WQ.lock_many(tks[1], token, now, now + lock_ms, MANY)
  if got[1] then
    EXTRA = { unpack(got, 2) }
    return got[1]
  end
  if later then
    if wait_ms > 0 then WQ.register_waiter(tks, owner, wait_ms) end
    return { 0, now, later }
  end
end
local r = nil
for _ = 1, 10 do -- retries only if an index entry is stale (never expected)
  local best, best_member, best_tk, best_idx
  best, best_member, best_tk, best_idx, nxt = WQ.pick(tks, all_tags, owner, sess, now, nxt)
  if best == nil then break end
  if best_idx == nil then
    r = WQ.lock(best_member, token, now + lock_ms, '', best_tk)
    if r then
      WQ.cap_take(best_tk, best_member, now + lock_ms, now)
      break
    end
    redis.call('ZREM', WQ.k_q(best_tk), best_member)
  else
    local sid = best_member
    local ks = WQ.k_sitems(best_tk, sid)
    local h = redis.call('ZRANGE', ks, '0', '0')
    if h[1] then
      redis.call('ZREM', ks, h[1])
      WQ.claim(sid, owner, slock_ms, now)
      WQ.reindex_group(sid, best_tk)
      r = WQ.lock(h[1], token, now + lock_ms, sid, best_tk)
      if r then break end
    else
      redis.call('ZREM', best_idx, sid)
    end
  end
end

if not r then
  -- The caller may now wait: register its wake lists, in this same script, so that every wake-up
  -- for work it may take reaches them from now on.
  if wait_ms > 0 then WQ.register_waiter(all_tags and { '*' } or tks, owner, wait_ms) end
  if sess then
    for _, key in ipairs({ WQ.K_SHOLD, WQ.K_SOWNED }) do
      local h = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
      if h[2] and (nxt < 0 or tonumber(h[2]) < nxt) then nxt = tonumber(h[2]) end
    end
  end
  return { 0, now, nxt }
end
if mode == 'h' then
  local best = WQ.pick(tks, all_tags, owner, sess, now, nxt)
  return { 1, r[1], r[2], r[3], best or -1 }
end
return { 1, r[1], r[2], r[3] }
