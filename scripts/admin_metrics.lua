-- admin_metrics: system-wide counts. Instance counts come from the indexes in O(1); execution and
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- event totals are summed over one page of idx:instances per call, so that a large namespace is
-- walked in many short scripts instead of one long one.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   off: rank offset in idx:instances
--   n: page size (0 = counts only)
-- Reply: {instances, running, completed, failed, instances examined, executions, events}.
-- Errors: none.
-- Cost: O(log N + page + executions of the page's instances) (HLEN and ZCARD are O(1)).
local out = {
  redis.call('ZCARD', K_IDX_INSTANCES),
  redis.call('ZCARD', k_idx_status('Running')),
  redis.call('ZCARD', k_idx_status('Completed')),
  redis.call('ZCARD', k_idx_status('Failed')),
  0, 0, 0,
}
if n <= 0 then return out end
local ids = redis.call('ZRANGE', K_IDX_INSTANCES, off, off + n - 1)
out[5] = #ids
for _, id in ipairs(ids) do
  local i = rec_fields(id) -- read once for all of the instance's executions
  for _, e in ipairs(executions(id, i)) do
    out[6] = out[6] + 1
    out[7] = out[7] + exec_events(exec_record(id, e, i))
  end
end
return out
