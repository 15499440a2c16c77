-- orch_enqueue: add one message to an instance's orchestrator queue. Never creates the instance.
-- KEYS[1] seq key (routing only)
-- ARGV[1] prefix, [2] target instance, [3] work item JSON, [4] type code ('S' start, 'Q' queue
--   message, 'O' other), [5] delay ms (0 = visible at once).
-- Reply: 1, or 0 when the message was dropped (a QueueMessage for an instance that does not
--   exist: lib.lua, orphan_fate). Errors: none. Cost: O(log N).
local now = now_ms()
local pin = oq_enqueue(ARGV[2], ARGV[3], ARGV[4], now + tonumber(ARGV[5]), now)
if pin then wake_orch(pin, 1) end
if pin == DROPPED then return 0 end
return 1
