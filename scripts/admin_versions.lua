-- admin_versions: one page of the instances in flight, with what the versions panel counts.
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- Walks idx:status:<status> (Running, or ContinuedAsNew: between a continue-as-new and its next
-- execution's first turn) in index order, after a cursor, as admin_list does.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   status: the status index to walk
--   cscore: cursor score ('' = from the start)
--   cmember: cursor member (the last id of the previous page)
--   limit: page size (>= 1)
-- Reply: {next score or '', next member or '', then five values per instance: id, name, version,
--   started (ms: its current execution's start), held ('1' while the runtime holds it, else '')}.
--   An id whose record is gone (a retained root awaiting its sweep) is left out. next is '' when
--   no id follows the page.
-- Errors: none.
-- Cost: O(log N + page): two hash reads per instance.
local key = k_idx_status(status)
local start = 0
if cscore ~= '' then start = zrank_after(key, cscore, cmember) end
local r = redis.call('ZRANGE', key, start, start + limit, 'WITHSCORES')
local n = math.min(#r / 2, limit)
local out = { '', '' }
for i = 1, n do
  local id = r[2 * i - 1]
  local f = redis.call('HMGET', k_inst(id), 'name', 'ver', 'xs', 'created')
  if f[1] then
    local held = redis.call('HEXISTS', k_msgs(id), 'h') == 1 and '1' or ''
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = id, f[1], f[2] or '', f[3] or f[4] or '0', held
  end
end
if #r / 2 > limit then out[1], out[2] = r[2 * n], r[2 * n - 1] end
return out
