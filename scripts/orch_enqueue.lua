-- orch_enqueue: add one message to an instance's orchestrator queue. Never creates the instance.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   target: target instance
--   item: work item JSON
--   code: type code ('S' start, 'Q' queue message, 'O' other)
--   delay: delay ms (0 = visible at once)
--   if_absent: optional: '1' = start only if absent (a start, type code 'S': enqueued only when
--     the instance neither exists nor has a start queued)
-- Reply: 1 enqueued; 0 nothing written: with if_absent, the instance exists or has a start queued;
--   without, the message was a QueueMessage for an instance that does not exist, dropped
--   (lib.lua, orphan_fate).
-- Errors: none. Cost: O(log N); start if absent: + O(messages queued for the instance).
local now = now_ms()
if if_absent and (inst_known(target) or start_queued(target)) then return 0 end
local pin = oq_enqueue(target, item, code, now + delay, now)
if pin then wake_orch(pin, 1) end
if pin == DROPPED then return 0 end
return 1
