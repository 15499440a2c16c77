-- work_ack_fetch: work_ack, then, only when it succeeded, work_fetch (the caller never waits on
-- its reply) — one round trip per activity (provider.WorkAckFetcher).
-- include: work_ack, work_fetch
-- attempt: ack only (the ack part runs at most once per attempt, the fetch on every try)
-- KEYS[1] meta key (routing only), KEYS[2] attempt key of the ack.
-- ARGV[1] prefix, [2 .. 1+n] work_ack's ARGV[2..], then work_fetch's ARGV[2..], last n (the count of
--   work_ack's arguments; work_ack never reads past its own).
-- Reply: work_fetch's reply. Errors: work_ack's (nothing written, nothing fetched).
-- Cost: work_ack's plus work_fetch's.
return ack_then_fetch(op_work_ack, op_work_fetch, KEYS, ARGV)
