-- inst_read: one execution's history.
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   id: instance
--   exec: execution ('' = current)
-- Reply: {execution or '', history (event JSON lines)}. Errors: none. Cost: O(history bytes).
if exec == '' then
  local cur = current_exec(id)
  if cur == nil then return { '', '' } end
  exec = tostring(cur)
end
return { exec, redis.call('GET', k_hist(id, exec)) or '' }
