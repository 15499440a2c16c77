-- inst_replay: what a full fetch would have returned for a lite-fetched turn
-- (provider.LiteFetcher.ReadForReplay): an execution's history, the KV snapshot and the tag.
-- flags: no-writes (a read: runs on replicas and when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   id: instance
--   exec: execution id
-- Reply: {history (event JSON lines), kv {key, "<ms>|<value>", ...}, tag ('' unless the execution is
--   the instance's current one)}.
-- Errors: none. Cost: O(history + KV keys).
local iv = redis.call('HMGET', k_inst(id), 'exec', 'tag')
local tag = ''
if iv[1] == exec and iv[2] then tag = iv[2] end
return { redis.call('GET', k_hist(id, exec)) or '', redis.call('HGETALL', k_kv(id)), tag }
