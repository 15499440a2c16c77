-- work_enqueue: add one ActivityExecute to the worker queue, visible at once, and wake a fetcher
-- that may take it.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, ARGV[2] item JSON (stored verbatim), ARGV[3] instance, ARGV[4] execution id,
--      ARGV[5] activity id, ARGV[6] session id ('' none), ARGV[7] tag ('' untagged).
-- Reply: 1.
-- Errors: none.
-- Cost: O(log N): one item hash, one instance-index field, one schedule insert (plus the session
--   group head for a session item).
local now = now_ms()
wq_enqueue(now, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
return 1
