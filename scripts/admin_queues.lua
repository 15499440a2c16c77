-- admin_queues: queue statistics, walked one page of an orchestrator index per call so that a long
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- queue never blocks the server for long. Each instance with queued messages is counted once:
-- unlocked instances through oq:ready:<pin> (any visible message) or, when only delayed messages
-- remain, oq:due; locked instances through oq:locked.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   what: the view (below)
--   pin: optional: 'ready': the pin; the other pages: unused ('')
--   off: optional, pages: rank offset
--   n: optional, pages: page size
-- Views (the arguments they read; Reply after each '->'):
--   'head'                 -> {now ms, {pin...}, due instances, locked instances,
--                              {worker unlocked, worker locked, ms since which the oldest visible worker item waits, or -1,
--                               {tag key, queued items, session-less ready items, ...}}}
--   'ready'                pin, off, n
--   'due'                  off, n
--   'locked'               off, n
--   'orphans'              off, n (parked orphans, lib.lua)
--       -> {entries examined, visible, delayed, locked messages, oldest visible_at ms or -1,
--           expired locks, orphan messages}
--   'wlocked'/'wdue'       off, n (worker items of wq:locked / wq:due)
--       -> {entries examined, {tag key, items, ...}}
-- "visible"/"delayed" count unlocked messages (for a locked instance: those that arrived during
-- the lock); "locked" counts the messages a held lock covers. Worker items are counted from the
-- per-tag counters of lib_worker (unlocked = queued - locked, locked ones expired or not).
-- Errors: none.
-- Cost: 'head' O(pins + worker tag keys); pages O(log N + page * log M) (M = messages of an
--   instance); worker pages O(log N + page).
local now = now_ms()

-- Worker queue (keys_worker.go): wq:tags counts every queued item by tag key, wq:locked holds the
-- locked ones. The oldest visible item is looked for at the heads of the session-less ready sets,
-- of the claimable session groups and of wq:due (items due but not yet moved back by a fetch);
-- items of sessions an owner holds are not considered.
local function worker_stats()
  local queued, oldest = 0, -1
  local function seen(at)
    at = tonumber(at)
    if at and (oldest < 0 or at < oldest) then oldest = at end
  end
  local tags, per_tag = redis.call('HGETALL', WQ.K_TAGS), {}
  for i = 1, #tags, 2 do
    queued = queued + tonumber(tags[i + 1])
    per_tag[#per_tag + 1] = tags[i]
    per_tag[#per_tag + 1] = tonumber(tags[i + 1])
    per_tag[#per_tag + 1] = redis.call('ZCARD', WQ.k_ready(tags[i]))
    local h = redis.call('ZRANGE', WQ.k_ready(tags[i]), 0, 0)
    if h[1] then seen(redis.call('HGET', WQ.k_item(h[1]), 'c')) end
    local f = redis.call('ZRANGE', WQ.k_sfree(tags[i]), 0, 0, 'WITHSCORES')
    if f[2] then seen(redis.call('HGET', WQ.k_item(f[2]), 'c')) end
  end
  local d = redis.call('ZRANGEBYSCORE', WQ.K_DUE, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
  if d[2] then seen(d[2]) end
  local locked = redis.call('ZCARD', WQ.K_LOCKED)
  return { queued - locked, locked, oldest, per_tag }
end

-- One page of wq:locked or wq:due: its items counted by tag key (the item's t field).
local function worker_tag_page(key, off, n)
  local ids, count, order = redis.call('ZRANGE', key, off, off + n - 1), {}, {}
  for _, s in ipairs(ids) do
    local tk = redis.call('HGET', WQ.k_item(s), 't')
    if tk then
      if not count[tk] then order[#order + 1] = tk; count[tk] = 0 end
      count[tk] = count[tk] + 1
    end
  end
  local out = {}
  for _, tk in ipairs(order) do out[#out + 1] = tk; out[#out + 1] = count[tk] end
  return { #ids, out }
end
if what == 'wlocked' or what == 'wdue' then
  return worker_tag_page(what == 'wlocked' and WQ.K_LOCKED or WQ.K_DUE, off, n)
end

if what == 'head' then
  return { now, ready_pins(), redis.call('ZCARD', K_DUE), redis.call('ZCARD', K_LOCKED), worker_stats() }
end

local key
if what == 'ready' then
  key = k_ready(pin)
elseif what == 'due' then
  key = K_DUE
elseif what == 'orphans' then
  key = K_ORPHANS
else
  key = K_LOCKED
end
local ids = redis.call('ZRANGE', key, off, off + n - 1)
local visible, delayed, locked, oldest, expired, orphaned = 0, 0, 0, -1, 0, 0

-- An instance's messages: how many, how many are visible now, and the visible time of the oldest
-- visible one (-1 none). Cost: O(messages).
local function messages(id)
  local seqs, _, f = oq_messages(id, now)
  local total, first = 0, -1
  for name in pairs(f) do
    if string.byte(name, 1) == 116 then total = total + 1 end -- 't'
  end
  for _, s in ipairs(seqs) do
    local at = tonumber(string.sub(f['t' .. s], 2))
    if first < 0 or at < first then first = at end
  end
  return total, #seqs, first
end

local function count_unlocked(id)
  local total, vis, first = messages(id)
  visible, delayed = visible + vis, delayed + total - vis
  if vis > 0 and (oldest < 0 or first < oldest) then oldest = first end
end

for _, id in ipairs(ids) do
  if what == 'orphans' then
    orphaned = orphaned + oq_count(id)
  elseif what == 'locked' then
    local lk = redis.call('HMGET', k_lock(id), 'until', 'seqs')
    local held = 0
    for _, s in ipairs(words(lk[2])) do
      if redis.call('HEXISTS', k_msgs(id), 'm' .. s) == 1 then held = held + 1 end
    end
    if lk[1] and tonumber(lk[1]) <= now then expired = expired + 1 end
    local total, vis = messages(id)
    locked = locked + held
    visible, delayed = visible + vis - held, delayed + total - vis
  elseif not is_locked(id) then
    -- An instance with visible messages is in a ready set and may also be in oq:due (for its
    -- delayed ones): count it on the ready pass only.
    -- Parked orphans (possibly in oq:due for their delayed messages) count on the orphans pass.
    if what == 'ready' or not (redis.call('ZSCORE', k_ready(pin_of(id)), id) or redis.call('ZSCORE', K_ORPHANS, id)) then
      count_unlocked(id)
    end
  end
end
return { #ids, visible, delayed, locked, oldest, expired, orphaned }
