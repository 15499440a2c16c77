-- orch_ack_fetch: orch_ack, then, only when it succeeded, orch_fetch (the caller never waits on
-- its reply) — one round trip per turn (provider.OrchestrationAckFetcher).
-- include: orch_ack, orch_fetch
-- attempt: ack only (the ack part runs at most once per attempt, the fetch on every try)
-- KEYS[1] meta key (routing only), KEYS[2] attempt key of the ack.
-- ARGV[1] prefix, [2 .. 1+n] orch_ack's ARGV[2..], then orch_fetch's ARGV[2..], last n (the count of
--   orch_ack's arguments; orch_ack never reads past its own).
-- Reply: orch_fetch's reply. Errors: orch_ack's (nothing written, nothing fetched).
-- Cost: orch_ack's plus orch_fetch's.
return ack_then_fetch(op_orch_ack, op_orch_fetch, KEYS, ARGV)
