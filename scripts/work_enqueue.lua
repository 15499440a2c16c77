-- work_enqueue: add one ActivityExecute to the worker queue, visible at once, and wake a fetcher
-- that may take it.
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   item: item JSON (stored verbatim)
--   instance: instance
--   execution: execution id
--   activity: activity id
--   session: session id ('' none)
--   tag: tag ('' untagged)
-- Reply: 1.
-- Errors: none.
-- Cost: O(log N): one item hash, one instance-index field, one schedule insert (plus the session
--   group head for a session item).
local now = now_ms()
wq_enqueue(now, item, instance, execution, activity, session, tag)
return 1
