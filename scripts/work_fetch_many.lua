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
-- Cost: work_fetch's per item, one FCALL's setup for all; for one tag key without sessions or
--   caps, one read and one write of its schedule for all (lib_worker.lua, WQ.lock_many).
local out = {}
WQ.fetch_many(op_work_fetch, { KEYS[1] }, { P, unpack(fetch) }, want, out, true)
return out
