-- admin_list: one page of instance ids from idx:instances (by created ms) or idx:status:<status>
-- flags: no-writes (read only: FCALL_RO, runs on replicas and when Redis is out of memory)
-- (by its score, a time in ms), in index order, after a cursor.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   status: '' = every instance
--   cscore: cursor score ('' = from the start)
--   cmember: cursor member (the last id of the previous page)
--   limit: page size (>= 1)
--   scores: optional, '1': each id is followed by its score (a namespace of several partitions
--     merges the pages of its partitions by (score, id))
-- Reply: {next score or '', next member or '', id...}; next is '' when no id follows the page.
--   The cursor is the (score, id) of the last id returned: a page resumes right after it in the
--   index's (score, id) order, so ids added or removed meanwhile never make a page skip or repeat
--   an id that stayed put. An instance's status index score only grows (it is a time), so an
--   instance rescored while a listing is under way may be listed twice, never missed.
-- Errors: none.
-- Cost: O(log N + page) when the cursor id is still indexed with its score; when it was removed,
--   O(log N + page + ids sharing its score).
local key = K_IDX_INSTANCES
if status ~= '' then key = k_idx_status(status) end

local start = 0
if cscore ~= '' then start = zrank_after(key, cscore, cmember) end
-- One entry more than the page says whether another page follows.
local r = redis.call('ZRANGE', key, start, start + limit, 'WITHSCORES')
local n = math.min(#r / 2, limit)
local out = { '', '' }
for i = 1, n do
  out[#out + 1] = r[2 * i - 1]
  if scores then out[#out + 1] = r[2 * i] end
end
if #r / 2 > limit then out[1], out[2] = r[2 * n], r[2 * n - 1] end
return out
