-- admin_idle: whether nothing can happen in a partition without its clock moving, for virtual
-- clocks in tests (dxtest): no orchestration turn or activity locked (running), no orchestration
-- ready, no worker item ready, nothing delayed already due. Reads, in one atomic step, the
-- orchestrator's oq:locked, oq:ready:<pin> (the pins of ready_pins) and oq:due, and the worker's
-- schedules wq:q:<tk> ('-' and wq:tks), wq:shold and wq:scount (queued session items: more than
-- wq:shold holds means some are ready), and in a namespace of several partitions its outboxes.
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix
-- Reply: {0, earliest due ms of a delayed item, or -1 when none, written, applied} when idle; {1, -1}
--   when not. written is how many entries this partition ever wrote to its outboxes (the sum of
--   ob:seq), applied how many it applied from other partitions' (the sum of ib:hwm): partitions are
--   read one after another, so an entry forwarded between two reads (applied at a partition read
--   before, trimmed at one read after) is seen only as written exceeding applied over all of them.
-- Errors: none.
-- Cost: O(pins + worker tag keys + delayed worker items + partitions).
local now = now_ms()
if redis.call('ZCARD', K_LOCKED) > 0 then return { 1, -1 } end
if MULTI and redis.call('EXISTS', P .. 'ob:dirty') == 1 then return { 1, -1 } end -- messages to forward
for _, pin in ipairs(ready_pins()) do
  if redis.call('ZCARD', k_ready(pin)) > 0 then return { 1, -1 } end
end
local nxt = -1
local function later(s)
  if s <= now then return true end
  if nxt < 0 or s < nxt then nxt = s end
  return false
end
local r = redis.call('ZRANGE', K_DUE, '0', '0', 'WITHSCORES')
if r[2] and later(tonumber(r[2])) then return { 1, -1 } end
-- Worker sets: idle only while every entry is a delay not yet due (a lock is work running).
local sets = { WQ.k_q('-'), WQ.K_SHOLD }
for _, tk in ipairs(redis.call('SMEMBERS', WQ.K_TKS)) do sets[#sets + 1] = WQ.k_q(tk) end
for _, key in ipairs(sets) do
  local e = redis.call('ZRANGE', key, '0', '-1', 'WITHSCORES')
  for i = 1, #e, 2 do
    if later(tonumber(e[i + 1])) or redis.call('HEXISTS', WQ.k_item(e[i]), 'k') == 1 then return { 1, -1 } end
  end
end
local queued = 0
for _, n in ipairs(redis.call('HVALS', WQ.K_SCOUNT)) do queued = queued + tonumber(n) end
if queued > redis.call('ZCARD', WQ.K_SHOLD) then return { 1, -1 } end
local function sum(key)
  local n = 0
  for _, v in ipairs(redis.call('HVALS', key)) do n = n + tonumber(v) end
  return n
end
if not MULTI then return { 0, nxt, 0, 0 } end
return { 0, nxt, sum(P .. 'ob:seq'), sum(P .. 'ib:hwm') }
