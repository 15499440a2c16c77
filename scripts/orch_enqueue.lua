-- orch_enqueue: add one message to an instance's orchestrator queue. Never creates the instance.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, [2] target instance, [3] work item JSON, [4] type code ('S' start, 'Q' queue
--   message, 'O' other), [5] delay ms (0 = visible at once), [6] optional: '1' = start only if
--   absent (a start, type code 'S': enqueued only when the instance neither exists nor has a start
--   queued).
-- Reply: 1 enqueued; 0 nothing written: with [6], the instance exists or has a start queued;
--   without, the message was a QueueMessage for an instance that does not exist, dropped
--   (lib.lua, orphan_fate).
-- Errors: none. Cost: O(log N); start if absent: + O(messages queued for the instance).
local now = now_ms()
if ARGV[6] == '1' and (inst_known(ARGV[2]) or start_queued(ARGV[2])) then return 0 end
local pin = oq_enqueue(ARGV[2], ARGV[3], ARGV[4], now + tonumber(ARGV[5]), now)
if pin then wake_orch(pin, 1) end
if pin == DROPPED then return 0 end
return 1
