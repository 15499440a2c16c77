-- admin_idle: whether nothing can happen in a partition without its clock moving, for virtual
-- clocks in tests (dxtest): no orchestration turn or activity locked (running), no orchestration
-- ready, no worker item ready, nothing delayed already due. Reads, in one atomic step, the
-- orchestrator's oq:locked, oq:ready:<pin> (the pins of ready_pins) and oq:due, and the worker's
-- wq:locked, wq:tags (queued items per tag: more than the delayed ones means some are ready) and
-- wq:due.
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix
-- Reply: {0, earliest due ms of a delayed item, or -1 when none} when idle; {1, -1} when not.
-- Errors: none.
-- Cost: O(pins + worker tag keys).
local now = now_ms()
if redis.call('ZCARD', K_LOCKED) > 0 or redis.call('ZCARD', WQ.K_LOCKED) > 0 then return { 1, -1 } end
for _, pin in ipairs(ready_pins()) do
  if redis.call('ZCARD', k_ready(pin)) > 0 then return { 1, -1 } end
end
local queued = 0
for _, n in ipairs(redis.call('HVALS', WQ.K_TAGS)) do queued = queued + tonumber(n) end
if queued > redis.call('ZCARD', WQ.K_DUE) then return { 1, -1 } end
local nxt = -1
for _, k in ipairs({ K_DUE, WQ.K_DUE }) do
  local r = redis.call('ZRANGE', k, '0', '0', 'WITHSCORES')
  if r[2] then
    local s = tonumber(r[2])
    if s <= now then return { 1, -1 } end
    if nxt < 0 or s < nxt then nxt = s end
  end
end
return { 0, nxt }
