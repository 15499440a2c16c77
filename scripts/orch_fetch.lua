-- orch_fetch: lock the instance owning the oldest visible orchestrator message and return its turn.
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, ARGV[2] new lock token, ARGV[3] lock ms,
--      ARGV[4] filter: '0' none, '1' ranges follow; ARGV[5] range count n, then n pairs lo, hi
--      (sortable pin keys, inclusive); then the ms for which the caller may wait after an empty
--      fetch (its filter stays registered for wake-ups that long).
-- Reply: when nothing is eligible {'', next_ms, now_ms}: next_ms is when delayed work or a held lock
--   next comes due (-1 when never); otherwise {token, instance, attempt, exec or '', instance
--   fields {name, ver} (empty when not created), messages {json...}, history (event JSON lines),
--   kv {key, "<ms>|<value>", ...}}.
-- Errors: none.
-- Cost: O(expired locks + expired retained instances + due instances + distinct pins + orphan instances skipped (<= 100) + messages
--   and history of the chosen instance); an empty fetch also registers its filter (O(log N)). Independent of queue length and of instances the filter
--   excludes (ready instances are indexed by pin).
local token, lock_ms = ARGV[2], tonumber(ARGV[3])
local filtered = ARGV[4] == '1'
local ranges, bounds = {}, {}
local nranges = filtered and tonumber(ARGV[5]) or 0
for i = 0, nranges - 1 do
  ranges[#ranges + 1] = { ARGV[6 + 2 * i], ARGV[7 + 2 * i] }
  bounds[#bounds + 1], bounds[#bounds + 2] = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
end
local wait_ms = tonumber(ARGV[6 + 2 * nranges])
local now = now_ms()


-- Reclaim expired instance locks (principle 5: no background process needed).
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_LOCKED, '-inf', now, 'LIMIT', 0, 100)) do
  oq_unlock(id, redis.call('HGET', k_lock(id), 'tok'), now)
end
-- Drop instances whose retention expired from the listing indexes, and expired orphans.
sweep_expired(now)
orphan_sweep(now)
-- Make due delayed messages visible.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'LIMIT', 0, 100)) do
  if is_locked(id) then redis.call('ZREM', K_DUE, id) else oq_reindex(id, now) end
end

local function compatible(pin)
  if pin == '-' or not filtered then return true end
  for _, r in ipairs(ranges) do
    if pin >= r[1] and pin <= r[2] then return true end
  end
  return false
end

local function next_candidate()
  local best, best_score, best_pin = nil, nil, nil
  for _, pin in ipairs(redis.call('SMEMBERS', K_PINS)) do
    if compatible(pin) then
      local r = redis.call('ZRANGE', k_ready(pin), 0, 0, 'WITHSCORES')
      if r[1] == nil then
        if pin ~= '-' then redis.call('SREM', K_PINS, pin) end
      elseif best == nil or tonumber(r[2]) < best_score then
        best, best_score, best_pin = r[1], tonumber(r[2]), pin
      end
    end
  end
  return best, best_pin
end

local orphans = 0 -- orphan instances handled by this call, at most ORPHAN_BATCH
local ORPHAN_BATCH = 100
while true do
  local id, pin = next_candidate()
  if id == nil then
    -- The caller may now wait: register its filter, in this same script, so that every wake-up
    -- for work it accepts reaches its list from now on (see wake_orch).
    redis.call('ZREMRANGEBYSCORE', K_WAKE_FILTERS, '-inf', now)
    local f, until_ms = filtered and table.concat(bounds, ' ') or '*', now + wait_ms
    local cur = redis.call('ZSCORE', K_WAKE_FILTERS, f) -- never shorten another waiter's registration
    if not cur or tonumber(cur) < until_ms then redis.call('ZADD', K_WAKE_FILTERS, until_ms, f) end
    if redis.call('PTTL', K_WAKE_FILTERS) < wait_ms then redis.call('PEXPIRE', K_WAKE_FILTERS, wait_ms) end -- gone once nobody waits
    local nxt = -1
    local d = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    if d[2] then nxt = tonumber(d[2]) end
    local l = redis.call('ZRANGE', K_LOCKED, 0, 0, 'WITHSCORES')
    if l[2] and (nxt < 0 or tonumber(l[2]) < nxt) then nxt = tonumber(l[2]) end
    return { '', nxt, now }
  end
  redis.call('ZREM', k_ready(pin), id)

  local seqs = redis.call('ZRANGEBYSCORE', k_vis(id), '-inf', now)
  local has_inst = redis.call('EXISTS', k_inst(id)) == 1
  local exec = current_exec(id)
  local ok = #seqs > 0
  if ok and not has_inst and exec == nil then
    -- Not created yet: needs a start item in the batch. A batch of QueueMessages only is dropped
    -- (duroxide's rule); other messages are parked as orphans (lib.lua) until a start arrives
    -- or they expire.
    local types = {}
    for _, s in ipairs(seqs) do types[#types + 1] = redis.call('HGET', k_msgs(id), 't' .. s) end
    local has_start, only_queue = false, true
    for _, t in ipairs(types) do
      if t == 'S' then has_start = true end
      if t ~= 'Q' then only_queue = false end
    end
    if not has_start then
      ok = false
      if only_queue then
        oq_delete_many(id, seqs)
        oq_reindex(id, now)
      else
        orphan_park(id, now)
      end
      -- Bounded work per call: after ORPHAN_BATCH orphans, report work due now; the caller
      -- fetches again at once, and Redis serves others in between.
      orphans = orphans + 1
      if orphans >= ORPHAN_BATCH then return { '', now, now } end
    end
  end

  if ok then
    table.sort(seqs, function(a, b) return tonumber(a) < tonumber(b) end)
    redis.call('ZREM', K_DUE, id)
    local attempt, fields = 0, {}
    for i, s in ipairs(seqs) do
      local a = redis.call('HINCRBY', k_msgs(id), 'a' .. s, 1)
      if a > attempt then attempt = a end
      fields[i] = 'm' .. s
    end
    local msgs = {}
    for i = 1, #fields, 500 do -- chunked: Lua's unpack has a small stack
      local part = redis.call('HMGET', k_msgs(id), unpack(fields, i, math.min(i + 499, #fields)))
      for _, m in ipairs(part) do msgs[#msgs + 1] = m end
    end
    local until_ms = now + lock_ms
    -- inst: the instance existed at fetch (orch_ack refuses to re-create it if it expired since).
    redis.call('HSET', k_lock(id), 'tok', token, 'until', until_ms, 'seqs', table.concat(seqs, ' '),
      'inst', has_inst and '1' or '0')
    redis.call('ZADD', K_LOCKED, until_ms, id)
    redis.call('HSET', K_TOKENS, token, id)
    local inst, hist = {}, ''
    if has_inst then inst = redis.call('HMGET', k_inst(id), 'name', 'ver') end
    if exec then hist = redis.call('GET', k_hist(id, exec)) or '' end
    return { token, id, attempt, exec and tostring(exec) or '', inst, msgs, hist,
      redis.call('HGETALL', k_kv(id)) }
  end
end
