-- orch_fetch: lock the instance owning the oldest visible orchestrator message and return its turn.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token nonce (36 characters; the token is '<nonce>.<instance>'); a batch that
--     begins an execution gets its first 12 hex digits as its execution tag (exec_tag)
--   lock_ms: lock ms
--   filtered: '1' when the ranges filter, '0' no filter
--   ranges[lo, hi]: the filter's ranges (sortable pin keys, inclusive; a count, then the pairs)
--   wait_ms: the ms for which the caller may wait after an empty fetch (its filter stays
--     registered for wake-ups that long; 0: not registered)
--   lite: '1' for a lite fetch (no history, no KV) or '0'
--   mode: optional, for namespaces of several partitions (redisprovider picks the partition with
--     the oldest work): 'h' adds the partition's next ready score to a reply with an item (-1:
--     none); 'p' (peek) locks nothing and replies {'', next_ms, now_ms, oldest ready score or -1}
-- Reply: when nothing is eligible {'', next_ms, now_ms}: next_ms is when delayed work, a held lock
--   or a chore (expiry sweeps, reaping) next comes due, possibly earlier (-1 when never; now when
--   chores are left over); otherwise {token, instance, attempt, exec or '', instance
--   fields {name, ver} (empty when not created), messages {json...}, history (event JSON lines; ''
--   when lite), kv {key, "<ms>|<value>", ...} (empty when lite), execution tag, history length,
--   '1' when history and kv are whole (always without lite; with lite, for a history of at most
--   2 KiB of an instance without KV), else '0'}.
-- Errors: none.
-- Cost: O(expired locks + due instances + distinct pins + orphan instances skipped (<= 100) +
--   messages of the chosen instance, and its history unless lite), plus the chores when due (expired
--   retained instances and orphans, <= 100 each); an empty fetch also registers its filter
--   (O(log N)). Independent of queue length and of instances the filter excludes (ready instances
--   are indexed by pin).
local LITE_WHOLE = 2048 -- history bytes a lite fetch sends anyway
local now = now_ms()

-- Housekeeping, only once the gate oq:next (lib.lua, oq_note) is due.
local gate = redis.call('GET', K_OQ_NEXT)
gate = gate and gate + 0 -- (false when absent; + 0 converts once, tonumber twice)
local housekeeping = not gate or gate <= now
if not housekeeping then OQ_NEXT = gate end
if housekeeping then
  -- Reclaim expired instance locks (DESIGN.md S5: no background process needed).
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_LOCKED, '-inf', now_s(), 'LIMIT', '0', '100')) do
    oq_unlock(id, now, true)
  end
  -- Drop instances whose retention expired from the listing indexes, and expired orphans.
  chores(now)
  -- Make due delayed messages visible, then set the gate to the earliest remaining score.
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now_s(), 'LIMIT', '0', '100')) do
    if is_locked(id) then redis.call('ZREM', K_DUE, id) else oq_reindex(id, now) end
  end
  local nxt = tonumber(redis.call('GET', K_CHORES)) or OQ_NEVER
  for _, key in ipairs({ K_DUE, K_LOCKED }) do
    local h = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
    if h[2] and tonumber(h[2]) < nxt then nxt = tonumber(h[2]) end
  end
  redis.call('SET', K_OQ_NEXT, d(nxt))
  OQ_NEXT = nxt
end

if mode == 'p' then
  local _, _, _, score = oq_next_candidate(filtered, ARGV, ranges_at, ranges_n)
  if not score and wait_ms > 0 then oq_register_waiter(filtered, ARGV, ranges_at, ranges_n, wait_ms, now) end
  local nxt = OQ_NEXT
  if nxt == nil or nxt >= OQ_NEVER then nxt = -1 end
  return ob_mark({ '', nxt, now, score or -1 })
end

local orphans = 0 -- orphan instances handled by this call, at most ORPHAN_BATCH
local ORPHAN_BATCH = 100
while true do
  local id, pin, ready_key = oq_next_candidate(filtered, ARGV, ranges_at, ranges_n)
  if id == nil then
    -- The caller may now wait: register its filter, in this same script, so that every wake-up
    -- for work it accepts reaches its list from now on (see wake_orch).
    -- A caller that will not wait (wait_ms 0) registers nothing.
    if wait_ms > 0 then oq_register_waiter(filtered, ARGV, ranges_at, ranges_n, wait_ms, now) end
    -- The gate is at or before every due message, lock expiry and chore (lib.lua, oq_note): the
    -- caller fetches again then. Chores left over (reaping beyond one batch) keep the gate at
    -- now, so the caller goes on at once and a tree is reaped in as many calls as it needs, each
    -- bounded. An idle namespace has no gate time: its fetchers wait for wake-ups.
    local nxt = OQ_NEXT
    if nxt == nil or nxt >= OQ_NEVER then nxt = -1 end
    return ob_mark({ '', nxt, now })
  end
  redis.call('ZREM', ready_key, id)

  -- Every message of the instance: the visible ones form the batch; delayed ones ('more') keep
  -- the instance in the due index and make its ack reindex it.
  local seqs, later, msg = oq_messages(id, now)
  local more = later ~= nil
  -- Instance fields (see orch_ack): exec current execution, tag its tag, hn/hb its history's
  -- event count and bytes, kv '1' once KV was written.
  local iv = redis.call('HMGET', k_inst(id), 'name', 'ver', 'exec', 'tag', 'hn', 'kv', 'hb')
  local has_inst = iv[1] ~= false
  local exec = iv[3] and iv[3] + 0 or nil -- the current execution (lib.lua, Executions)
  local ok = #seqs > 0
  -- The batch's type codes (oq_messages: the first byte of t<s>).
  local has_start, has_can, only_queue = false, false, true
  for _, s in ipairs(seqs) do
    local t = string.byte(msg['t' .. s], 1)
    if t == 83 or t == 67 then has_start = true end -- 'S', 'C'
    if t == 67 then has_can = true end
    if t ~= 81 then only_queue = false end -- 'Q'
  end
  if ok and not has_inst and exec == nil and not has_start then
    -- Not created yet: needs a start item in the batch. A batch of QueueMessages only is dropped
    -- (duroxide's rule); other messages are parked as orphans (lib.lua) until a start arrives
    -- or they expire.
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
    if orphans >= ORPHAN_BATCH then return ob_mark({ '', now, now }) end
  end

  if ok then
    if more then redis.call('ZREM', K_DUE, id) end
    -- This delivery is attempt a+1 of each message; the count is written only if the lock ends
    -- without an ack (abandon, expiry: oq_unlock), since an ack deletes the messages anyway.
    local attempt, msgs = 0, {}
    for i, s in ipairs(seqs) do
      msgs[i] = msg['m' .. s]
      local a = (msg['a' .. s] or 0) + 1
      if a > attempt then attempt = a end
    end
    -- The batch begins an execution (a start for an instance without history, or a
    -- continue-as-new): the tag that execution gets when this turn is acked (orch_ack).
    local begins = has_can or (exec == nil and has_start)
    local tag = iv[4] or ''
    if begins or tag == '' then tag = exec_tag(token) end
    local until_ms = now + lock_ms
    local until_s = d(until_ms)
    local full = token .. '.' .. id
    -- Lock hash fields: see oq_held (lib.lua).
    local lkey, seqs_s, inst_s = k_lock(id), table.concat(seqs, ' '), has_inst and '1' or '0'
    if more then
      redis.call('HSET', lkey, 'tok', full, 'until', until_s, 'seqs', seqs_s, 'inst', inst_s, 'tag', tag, 'more', '1')
    else
      redis.call('HSET', lkey, 'tok', full, 'until', until_s, 'seqs', seqs_s, 'inst', inst_s, 'tag', tag)
    end
    redis.call('ZADD', K_LOCKED, until_s, id)
    oq_note(until_ms)
    local inst = has_inst and { iv[1], iv[2] } or {}
    local hist, kv, hn = '', nil, 0 -- kv: nil for none (one table less), {} in the reply
    if exec and not begins then hn = iv[5] + 0 end
    -- A lite fetch gets a small history all the same (one GET instead of the caller's second
    -- round trip when it does not hold the instance) if the instance has no KV to send.
    local whole = not lite or (exec and not begins and has_inst and not iv[6] and (iv[7] or LITE_WHOLE + 1) + 0 <= LITE_WHOLE)
    if whole then
      if exec then hist = redis.call('GET', k_hist(id, exec)) or '' end
      -- KV exists only once an ack wrote some (instance field kv, or no instance record).
      if exec and (iv[6] or not has_inst) then kv = redis.call('HGETALL', k_kv(id)) end
    end
    local reply = { full, id, attempt, exec and d(exec) or '', inst, msgs, hist, kv or {}, tag, hn, whole and '1' or '0' }
    if mode == 'h' then
      local _, _, _, score = oq_next_candidate(filtered, ARGV, ranges_at, ranges_n)
      reply[12] = score or -1
    end
    return ob_mark(reply)
  end
end
