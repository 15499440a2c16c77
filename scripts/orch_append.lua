-- orch_append: append events to an execution's history outside a turn (tests and tools).
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   id: instance
--   exec: execution
--   hist[event_id, json]: the events
-- Reply: 1. Errors (nothing written): DX_DUPLICATE event id exists or repeats.
-- Cost: O(events appended).
-- The execution's record (lib.lua, Executions) says whether its ids are dense: the instance
-- hash's when the execution is current, else x:<e>:<id>. An instance without an execution gets
-- this one as its current execution (a record without name or status: no ack started it); an
-- execution that is not current and has no record gets one in x:<e>:<id>. Appending never changes
-- which execution is current.
local iv = redis.call('HMGET', k_inst(id), 'exec', 'hn', 'hb', 'hd')
local key, rec, new = k_inst(id), { iv[2], iv[4] }, false
if iv[1] == false then
  rec, new = { '0', '1' }, true
elseif iv[1] ~= exec then
  key = k_exec(id, exec)
  rec = redis.call('HMGET', key, 'hn', 'hd')
  if not rec[1] then rec, new = { '0', '1' }, true end
end
local hn = tonumber(rec[1])
local dense = nil
if rec[2] == '1' then dense = hn end
local still = dense ~= nil and dense_next(dense, ARGV, hist_at, hist_n)
local dup = history_check(id, exec, ARGV, hist_at, hist_n, dense, still)
if dup then return dup end
local added = history_append(id, exec, ARGV, hist_at, hist_n, nil, dense, still)
local f = { 'hn', d(hn + hist_n), 'hd', still and '1' or '0' }
if key == k_inst(id) then
  f[#f + 1], f[#f + 2] = 'hb', d((tonumber(iv[3]) or 0) + added)
  if new then f[#f + 1], f[#f + 2] = 'exec', exec end
end
if new then f[#f + 1], f[#f + 2] = 'out', '-' end
redis.call('HSET', key, unpack(f))
if iv[1] and iv[1] ~= exec then execs_add(id, exec) end
return 1
