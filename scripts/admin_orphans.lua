-- admin_orphans: delete parked orphan messages (messages for instances that do not exist, see
-- lib.lua), at most a page of orphan instances per call.
-- flags: allow-oom (only frees memory, so it runs when Redis is out of memory)
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   n: most orphan instances to handle
-- Reply: {orphan instances handled, messages deleted}; fewer instances than asked: none left.
-- Errors: none.
-- Cost: O(page + messages deleted).
local ids = redis.call('ZRANGE', K_ORPHANS, 0, n - 1)
local msgs = 0
for _, id in ipairs(ids) do
  -- An instance created meanwhile owns its messages; only true orphans go.
  if not inst_known(id) then
    msgs = msgs + oq_count(id)
    oq_unindex(id)
    redis.call('DEL', k_msgs(id))
  end
  redis.call('ZREM', K_ORPHANS, id)
end
return { #ids, msgs }
