-- admin_prune: delete old executions (execution hash and history) of instances. The current
-- flags: allow-oom (only frees memory, so it runs when Redis is out of memory)
-- execution (the highest id) and Running executions are never deleted; KV data is
-- instance-scoped and never touched. Each instance is pruned atomically.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   mode: 'one' | 'bulk'
--   keep: keep_last (0 and 1 both keep only the current execution)
--   exec_before: prune only executions completed before this ms ('0' = no such condition)
--   inst_before: bulk: select only instances whose current execution completed before this ms
--     ('0' = all)
--   limit: bulk: most instances to process
--   ids[id]...: instance ids ('one': exactly one), to the end
-- Reply: {instances processed, executions deleted, events deleted}. Bulk skips unknown ids and
--   ids the filter excludes; they are not counted as processed.
-- Errors (nothing written): DX_NOT_FOUND ('one') the instance does not exist.
-- Cost: O(executions of the instances + events deleted).
if keep < 1 then keep = 1 end

local known = inst_known

local res = { 0, 0, 0 }

local function prune(id)
  local rec = rec_fields(id) -- read once for all of the instance's executions
  local execs = executions(id, rec)
  for i = 1, #execs - keep do
    local e = execs[i]
    local x = exec_record(id, e, rec)
    local ok = x[1] ~= 'Running'
    if ok and exec_before > 0 then ok = x[3] and tonumber(x[3]) < exec_before end
    if ok then
      res[2] = res[2] + 1
      res[3] = res[3] + exec_events(x)
      redis.call('DEL', k_hist(id, e), k_hids(id, e), k_exec(id, e), k_xout(id, e))
      redis.call('ZREM', k_execs(id), e)
    end
  end
  res[1] = res[1] + 1
end

if mode == 'one' then
  local id = ids[1]
  if not known(id) then return fail('NOT_FOUND', 'instance ' .. id .. ' not found') end
  prune(id)
  return res
end

for _, id in ipairs(ids) do
  if res[1] >= limit then break end
  local ok = known(id)
  if ok and inst_before > 0 then
    local _, rec = current_record(id)
    local c = rec and rec[3]
    ok = c and tonumber(c) < inst_before
  end
  if ok then prune(id) end
end
return res
