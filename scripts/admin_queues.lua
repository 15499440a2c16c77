-- admin_queues: queue statistics, walked one page of an orchestrator index per call so that a long
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- queue never blocks the server for long. Each instance with queued messages is counted once:
-- unlocked instances through oq:ready:<pin> (any visible message) or, when only delayed messages
-- remain, oq:due; locked instances through oq:locked.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   what: the view (below)
--   pin: optional: 'ready': the pin; 'wq': the tag key; 'wsess': the HSCAN cursor; the other
--     pages: unused ('')
--   off: optional, pages: rank offset
--   n: optional, pages: page size
-- Views (the arguments they read; Reply after each '->'):
--   'head'                 -> {now ms, {pin...}, due instances, locked instances,
--                              {ms since which the oldest visible worker item waits, or -1, {tag key...}}}
--   'ready'                pin, off, n
--   'due'                  off, n
--   'locked'               off, n
--   'orphans'              off, n (parked orphans, lib.lua)
--       -> {entries examined, visible, delayed, locked messages, oldest visible_at ms or -1,
--           expired locks, orphan messages}
--   'wq'                   pin (a worker tag key), off, n (a worker schedule)
--       -> {entries examined, ready, delayed, locked items}
--   'wshold'               off, n (worker session items of wq:shold)
--       -> {entries examined, {tag key, locked items, ...}, {tag key, delayed items, ...}}
--   'wsess'                pin (an HSCAN cursor of wq:scount), n
--       -> {next cursor, {tag key, ready session items, ...}}
-- "visible"/"delayed" count unlocked messages (for a locked instance: those that arrived during
-- the lock); "locked" counts the messages a held lock covers. Worker items are counted item by
-- item in the worker pages (locked ones expired or not).
-- Errors: none.
-- Cost: 'head' O(pins + worker tag keys); pages O(log N + page * log M) (M = messages of an
--   instance); worker pages O(log N + page), 'wsess' O(page x tag keys of a session).
local now = now_ms()

-- Worker queue (keys_worker.go). The head lists the tag keys in use ('-' and wq:tks) and the
-- age of the oldest item a fetch could take now, looked for at the heads of the schedules (a due
-- head: visible, delay ended or lock expired) and of the claimable session groups; items of
-- sessions an owner holds are not considered. The counts come from pages: of each schedule
-- ('wq'), of wq:shold ('wshold') and of the sessions with items ('wsess', through wq:scount).
local function worker_stats()
  local oldest = -1
  local function seen(at)
    at = tonumber(at)
    if at and (oldest < 0 or at < oldest) then oldest = at end
  end
  local tks = redis.call('SMEMBERS', WQ.K_TKS)
  table.insert(tks, 1, '-')
  for _, tk in ipairs(tks) do
    local h = redis.call('ZRANGE', WQ.k_q(tk), 0, 0, 'WITHSCORES')
    if h[1] and tonumber(h[2]) <= now then seen(redis.call('HGET', WQ.k_item(h[1]), 'c')) end
    local f = redis.call('ZRANGE', WQ.k_sfree(tk), 0, 0, 'WITHSCORES')
    if f[2] then seen(redis.call('HGET', WQ.k_item(WQ.id(tonumber(f[2]))), 'c')) end
  end
  return { oldest, tks }
end

-- Counts per tag key, flat: {tag key, n, ...} in first-seen order.
local function tally()
  local count, order = {}, {}
  return function(tk, n)
    if not count[tk] then order[#order + 1] = tk; count[tk] = 0 end
    count[tk] = count[tk] + (n or 1)
  end, function()
    local out = {}
    for _, tk in ipairs(order) do out[#out + 1] = tk; out[#out + 1] = count[tk] end
    return out
  end
end

if what == 'wq' then
  -- One page of a schedule: {entries examined, ready, delayed, locked (expired or not)}.
  local r = redis.call('ZRANGE', WQ.k_q(pin), off, off + n - 1, 'WITHSCORES')
  local ready, delayed, locked = 0, 0, 0
  for i = 1, #r, 2 do
    if redis.call('HEXISTS', WQ.k_item(r[i]), 'k') == 1 then
      locked = locked + 1
    elseif tonumber(r[i + 1]) > now then
      delayed = delayed + 1
    else
      ready = ready + 1
    end
  end
  return { #r / 2, ready, delayed, locked }
elseif what == 'wshold' then
  -- One page of wq:shold: {entries examined, {tag key, locked, ...}, {tag key, delayed, ...}}.
  local ids = redis.call('ZRANGE', WQ.K_SHOLD, off, off + n - 1)
  local add_l, out_l = tally()
  local add_d, out_d = tally()
  for _, id in ipairs(ids) do
    local it = redis.call('HMGET', WQ.k_item(id), 'k', 't')
    if it[2] then
      if it[1] then add_l(it[2]) else add_d(it[2]) end
    end
  end
  return { #ids, out_l(), out_d() }
elseif what == 'wsess' then
  -- One HSCAN page of wq:scount from cursor pin: {next cursor ('0' done), {tag key, ready
  -- session items, ...}}.
  local page = redis.call('HSCAN', WQ.K_SCOUNT, pin, 'COUNT', n)
  local add, out = tally()
  for i = 1, #page[2], 2 do
    local sid = page[2][i]
    for _, tk in ipairs(redis.call('SMEMBERS', WQ.k_stags(sid))) do
      add(tk, redis.call('ZCARD', WQ.k_sitems(tk, sid)))
    end
  end
  return { page[1], out() }
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
