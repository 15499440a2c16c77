-- ob_apply: apply entries of another partition's outbox for this one, each exactly once and in
-- order (lib.lua, ob_put, which lists the kinds).
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   source: the source partition
--   retention: retention ms (0 = keep forever), for the settle entries
--   entries[entry]...: the entries as ob_take read them, in order, to the end
-- Entries at or below the source's high-water mark (ib:hwm) were applied before and are skipped;
--   the others must follow it without a gap (a gap means the caller read them before a trim it
--   raced with: the rest is left for its next read). Every entry is checked before anything is
--   written.
-- Reply: the source's high-water mark after the call.
-- Errors: DX_INVALID an entry that does not parse (nothing written).
-- Cost: O(entries), each as its local counterpart (oq_enqueue, wq_enqueue, wq_cancel, ...).
local now = now_ms()
local hwm = tonumber(redis.call('HGET', P .. 'ib:hwm', source)) or 0
local todo = {}
local want = hwm + 1
for _, e in ipairs(entries) do
  local seq, kind, rest = string.match(e, '^(%d+) (%a) ()')
  local f = seq and ob_fields(e, rest)
  if not f then return fail('INVALID', 'outbox entry does not parse: ' .. string.sub(e, 1, 80)) end
  seq = seq + 0
  if seq == want then
    todo[#todo + 1] = { kind, f }
    want = seq + 1
  elseif seq > want then
    break
  end
end
if #todo == 0 then return hwm end
local woken = nil -- pin key -> instances made ready
local function woke(pin)
  if pin then
    woken = woken or {}
    woken[pin] = (woken[pin] or 0) + 1
  end
end
for _, t in ipairs(todo) do
  local kind, f = t[1], t[2]
  if kind == 'o' then
    woke(oq_enqueue(f[1], f[2], f[3], f[4] + 0, now))
  elseif kind == 'k' then
    local kx, af = WQ.k_inst(f[1]), f[3] .. ':' .. f[4]
    local note = redis.call('HGET', kx, af)
    if note and string.byte(note, 1) == 64 then redis.call('HDEL', kx, af) end
    woke(oq_enqueue(f[1], f[2], 'O', now, now))
  elseif kind == 'w' then
    wq_enqueue(now, f[1], f[2], f[3], f[4], f[5], f[6])
  elseif kind == 'x' then
    wq_cancel(f[1], f[2], f[3])
  elseif kind == 'c' then
    local parent, child = f[1], f[2]
    redis.call('SADD', k_children(parent), child)
    redis.call('HSET', P .. 'chx:' .. parent, child, f[3])
    if redis.call('EXISTS', k_inst(parent)) == 1 then -- a new child runs: its parent is not settled
      local was = settled(parent)
      redis.call('HINCRBY', k_inst(parent), 'open', '1')
      if was then tree_settle_changed(parent, false, now, retention) end
    end
  elseif kind == 's' then
    local parent, is_settled = f[1], f[2] == '1'
    if redis.call('EXISTS', k_inst(parent)) == 1 then
      local was = settled(parent)
      redis.call('HINCRBY', k_inst(parent), 'open', is_settled and '-1' or '1')
      if settled(parent) ~= was then tree_settle_changed(parent, is_settled, now, retention) end
    end
  elseif kind == 'r' then
    reap(f[1])
  elseif kind == 'u' then
    redis.call('SREM', k_children(f[1]), f[2])
    redis.call('HDEL', P .. 'chx:' .. f[1], f[2])
  end
end
if woken then
  for pin, n in pairs(woken) do wake_orch(pin, n) end
end
redis.call('HSET', P .. 'ib:hwm', source, d(want - 1))
return want - 1
