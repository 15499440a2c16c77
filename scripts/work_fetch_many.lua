-- work_fetch_many: up to want work_fetches in one call (provider.WorkBatchFetcher): the first as
-- work_fetch with the caller's arguments (it registers the caller's wait when it finds nothing),
-- the others, only while items are found, without registering a wait (wait_ms 0): a caller that
-- got an item does not wait.
-- include: work_fetch
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go):
--   want: how many items to fetch (at least 1)
--   fetch[arg]...: work_fetch's arguments after its prefix; its lock nonce serves every fetch (a
--     lock token is the nonce and the item's id)
-- Reply: work_fetch's reply for each item locked, in order (at most want); when none was, the one
--   empty reply of the first fetch ({0, now ms, next ms}).
-- Errors: none.
-- Cost: work_fetch's per item, one FCALL's setup for all.
local fa = { P, unpack(fetch) }
local out = {}
for i = 1, want do
  local r = op_work_fetch({ KEYS[1] }, fa)
  if r[1] ~= 1 then
    if i == 1 then out[1] = r end
    break
  end
  out[i] = r
  fa[6] = '0' -- wait_ms (work_fetch's fifth argument): only the first fetch registers a wait
end
return out
