-- ns_init: create the format records of a namespace of several partitions (redisprovider.New),
-- or read them.
-- format: any (it writes the records the format check reads)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   mode: 'root' for the root record (keys.go, RootMeta: the prefix is '{<ns>:0}:'), 'part' for
--     one partition's record
--   partitions: the namespace's partition count (> 1)
--   tags: 'root': every partition's hash tag, space-separated; 'part': the partition's own
-- 'root' creates the root record unless the namespace has one or holds data of format 1: format
--   2, the partition count, the tags, and the keys a format-1 process touches first made hashes it
--   cannot use (as lib.lua's format_check does for a namespace of one partition).
-- 'part' creates the partition's record (format 2, the partition count, its tag) unless it exists.
-- Reply: the record as it is now: {format or '' (none: format-1 data when root), partitions or
--   '1', tags or '', migrating or ''}.
-- Errors: none.
-- Cost: O(1).
local m = redis.call('HMGET', K_META, 'format', 'partitions', 'tags', 'migrating')
if m[1] == false and not (mode == 'root' and redis.call('EXISTS', P .. 'seq') == 1) then
  redis.call('HSET', K_META, 'format', FORMAT, 'partitions', d(partitions), 'tags', tags)
  if mode == 'root' then
    for _, k in ipairs(FORMAT1_KEYS) do redis.call('HSET', P .. k, 'format', FORMAT) end
  end
  m = { FORMAT, d(partitions), tags, false }
end
return { m[1] or '', m[2] or '1', m[3] or '', m[4] or '' }
