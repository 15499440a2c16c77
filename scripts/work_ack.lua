-- work_ack: delete a locked worker item and, with a completion, enqueue it to the orchestrator
-- queue of its target instance, atomically.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   token: lock token
--   completed: '1' with a completion / '0' without
--   target: the completion's target instance
--   completion: completion JSON (ActivityCompleted/ActivityFailed)
--   tpart: the target's partition when it is not this one (a session item homed here for an
--     instance of another partition; keys.go), else ''
--   failed: '1' when the completion is an ActivityFailed (counted in the per-minute stats)
-- Reply: 1, or 2 when the completion went to the outbox (lib.lua, ob_put; redisprovider forwards it).
-- Effects: counts the activity's outcome in the per-minute stats (lib.lua, stats_count) when
--   a completion is given; refreshes the item's session last_activity while the session lock is valid (session
--   ownership does not gate the ack); wakes an orchestration fetcher when the completion is visible.
-- Errors: DX_INVALID_TOKEN when the token is unknown (acked, abandoned, reclaimed, cancelled) or its
--   lock expired; nothing is written then and the item stays queued.
-- Cost: O(log N) + O(items of the same activity) for the instance index.
local now = now_ms()
local id, it = WQ.held(token, now)
if not id then return it end
-- Checks done; writes follow.
if completed and tpart ~= '' then
  ob_put(tpart, 'k', target, completion, it[7], it[8])
elseif completed and GROUP then -- a batched ack (work_ack_many): written after the batch's acks
  group_push(GROUP.targets, GROUP.msgs, target, completion)
elseif completed then
  local pin = oq_enqueue(target, completion, 'O', now, now)
  if pin then wake_orch(pin, 1) end
end
if completed then
  local kind = failed and 'af' or 'ac'
  if GROUP then GROUP[kind] = GROUP[kind] + 1 else stats_count(kind) end
end
WQ.touch_session(it[3], now)
WQ.delete(id, false, it)
if OB_WRITTEN then return 2 end
return 1
