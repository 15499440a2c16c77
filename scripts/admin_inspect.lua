-- admin_inspect: read-only views of one instance for the management API.
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   what: 'info' | 'exec' | 'execs' | 'latest' | 'children' | 'parent'
--   id: instance
--   exec_id: optional, for 'exec': execution id
-- An instance is known when it has an instance hash: created by an ack with name and version, or
-- holding the record of an execution acked or appended without them (lib.lua, Executions).
-- Reply by what:
--   'info'     {known 0/1, created (has a name) 0/1, name, ver, exec, status, output or false,
--              created, updated, parent or false, 'q' when the output is JSON-quoted}
--   'exec'     {exists 0/1, status, output or false, started, completed, event count, 'q' when
--              the output is JSON-quoted}
--   'execs'    {execution id...} ascending
--   'latest'   current execution id, or false
--   'children' {child id...}
--   'parent'   {known 0/1, parent or false}
-- Errors: none.
-- Cost: O(1), except 'execs' O(executions) and 'children' O(children).

local function known() return inst_known(id) end

if what == 'info' then
  if not known() then return { 0 } end
  -- One read of the instance hash: the record fields exec_record takes, then name, ver, parent,
  -- created, updated. An instance without a name is described from its current execution.
  local i = redis.call('HMGET', k_inst(id), 'exec', 'xs', 'status', 'done', 'out', 'hn', 'hd', 'name', 'ver', 'parent',
    'created', 'updated')
  local exec, has = i[1], i[8] and 1 or 0
  local created, updated, output, quoted = i[11], i[12], false, ''
  if exec then output, quoted = exec_output(id, exec, i[5]) end
  if has == 0 then created, updated = i[2], i[2] end
  return { 1, has, i[8] or '', i[9] or '', exec or '0', i[3] or '', output or false,
    created or '0', updated or '0', i[10] or false, quoted }
elseif what == 'exec' then
  local e = exec_id
  if not has_exec(id, e) then return { 0 } end
  local x = exec_record(id, e)
  local output, quoted = exec_output(id, e, x[4])
  return { 1, x[1] or '', output or false, x[2] or '0', x[3] or '0', exec_events(x), quoted }
elseif what == 'execs' then
  return executions(id)
elseif what == 'latest' then
  local e = current_exec(id)
  if e then return tostring(e) end
  return false
elseif what == 'children' then
  return redis.call('SMEMBERS', k_children(id))
elseif what == 'parent' then
  if not known() then return { 0 } end
  return { 1, redis.call('HGET', k_inst(id), 'parent') or false }
end
return redis.error_reply('DX_INVALID unknown inspect view ' .. tostring(what))
