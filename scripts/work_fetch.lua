-- work_fetch: lock the oldest visible worker item the caller may take, for the lock timeout.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token nonce (36 characters; the token is '<nonce>.<s>')
--   lock_ms: lock ms
--   owner: session owner ('' = no session config: session-bound items are never returned)
--   slock_ms: session lock ms
--   wait_ms: the ms for which the caller may wait after an empty fetch (its wake lists stay
--     registered that long, see WQ.register_waiter)
--   any: '*' for every tag key in use (TagFilter Any) or '' for the list that follows
--   tks[tag_key]...: tag keys ('-' untagged, '<len>:<tag>'), to the end
-- Reply: {1, attempt, item JSON, lock token} when an item was locked (attempt counts this delivery), else
--   {0, now ms, next ms}: next is when delayed work, an item lock or (with an owner) a session lock
--   next comes due, -1 when nothing is pending.
-- Effects: first reclaims expired item locks (attempt + 1 on redelivery) and makes due delayed
--   items visible, waking fetchers that may take them, and releases expired sessions to the
--   claimable indexes (at most 100 of each per call). Taking a session item claims the session for
--   the owner (owner, locked_until = now + session lock, last_activity = now), or refreshes it when
--   the owner already holds it (never shortening its lock).
-- Errors: none.
-- Cost: O(tag keys x 3 index heads + expired locks, due items and expired sessions handled (<= 100
--   each) + tag keys of the claimed session) x O(log N); TagFilter Any adds HKEYS of wq:tags. Independent of how many items the tag
--   filter or the session rules exclude: session items never sit in the plain ready sets, and
--   sessions held by other owners never sit in the free or this owner's indexes.
if any == '*' then tks = redis.call('HKEYS', WQ.K_TAGS) end
local now = now_ms()
WQ.maintain(now)

-- Candidates: the head of each set the filter selects; the smallest sequence number wins (FIFO).
-- A candidate is a plain item (member = its sequence number) or a session group (member = the
-- session id, in index key idx).
local best, best_member, best_tk, best_idx
local function consider(r, tk, idx)
  if r[1] == nil then return end
  local score = tonumber(r[2])
  if best == nil or score < best then best, best_member, best_tk, best_idx = score, r[1], tk, idx end
end

local found = nil
-- One set to take from (one tag key, and no session items anywhere: wq:scount counts the items of
-- each session that has some, so the session indexes are empty without it): its head, in one
-- command.
local single = #tks == 1 and (owner == '' or redis.call('EXISTS', WQ.K_SCOUNT) == 0)
if single then found = redis.call('ZPOPMIN', WQ.k_ready(tks[1]))[1] end
for _ = 1, single and 0 or 10 do -- retries only if an index entry is stale (never expected)
  best, best_member, best_tk, best_idx = nil, nil, nil, nil
  for _, tk in ipairs(tks) do
    consider(redis.call('ZRANGE', WQ.k_ready(tk), 0, 0, 'WITHSCORES'), tk, nil)
    if owner ~= '' then
      local ko, kf = WQ.k_sown(tk, owner), WQ.k_sfree(tk)
      consider(redis.call('ZRANGE', ko, 0, 0, 'WITHSCORES'), tk, ko)
      consider(redis.call('ZRANGE', kf, 0, 0, 'WITHSCORES'), tk, kf)
    end
  end
  if best == nil then break end
  if best_idx == nil then
    redis.call('ZREM', WQ.k_ready(best_tk), best_member)
    found = best_member
    break
  end
  local sid = best_member
  local ks = WQ.k_sitems(best_tk, sid)
  local h = redis.call('ZRANGE', ks, 0, 0)
  if h[1] then
    redis.call('ZREM', ks, h[1])
    WQ.claim(sid, owner, slock_ms, now)
    WQ.reindex_group(sid, best_tk)
    found = h[1]
    break
  end
  redis.call('ZREM', best_idx, sid)
end

if not found then
  -- The caller may now wait: register its wake lists, in this same script, so that every wake-up
  -- for work it may take reaches them from now on.
  if wait_ms > 0 then WQ.register_waiter(any == '*' and { '*' } or tks, owner, wait_ms) end
  return { 0, now, WQ.next_due(owner ~= '') }
end
local r = WQ.lock(found, token, now + lock_ms)
return { 1, r[1], r[2], r[3] }
