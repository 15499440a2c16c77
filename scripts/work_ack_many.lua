-- work_ack_many: several work_acks in one call (provider.WorkBatchAcker), each its own unit: each
-- runs at most once per attempt under its own attempt key, and one that fails (an unknown or
-- expired token) writes nothing and fails alone; the others commit. Then, when asked, up to
-- want work_fetches (the caller never waits on their reply).
-- include: work_ack, work_fetch
-- attempt: ack only (each ack applies dx_once with its own key; the fetches run on every try)
-- KEYS[1] meta key (routing only), KEYS[1 + i] the attempt key of the i-th ack (all of this
--   partition).
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go):
--   want: how many items to fetch after the acks (0: none)
--   acks[token, completed, target, completion, tpart, failed]: work_ack's arguments, one entry
--     per ack, all of tokens of this partition
--   fetch[arg]...: work_fetch's arguments after its prefix (empty when want is 0); its lock nonce
--     serves every fetch (a lock token is the nonce and the item's id)
-- Reply: one element per ack, in order: work_ack's reply (1, or 2 when its completion went to the
--   outbox), or the text of its error (DX_INVALID_TOKEN ...); then work_fetch's reply for each
--   item fetched (at most want, fewer when the queue ran out); then 'ob' when an outbox was written.
-- Errors: only those of the whole call (format, OOM): acks before it may have committed, and a
--   retry with the same attempt keys returns their replies.
-- Cost: work_ack's per ack, except that the completions for one instance are enqueued together
--   (one lock check, record read, sequence increment, message write and wake-up for all), the
--   stats counted once and the schedule and instance-index entries deleted with one command per
--   key (lib_worker.lua, WQ.group); work_fetch's per fetch; one FCALL's setup for all.
local out = {}
local g = WQ.group() -- the acks' completions, stats and index deletes, written after them (lib_worker.lua)
GROUP = g
for i = 1, acks_n do
  LOCK_UNTIL = nil
  local j = acks_at + 6 * i - 6 -- ack i's arguments: ARGV[j + 1] ... ARGV[j + 6] (a section, args.go)
  local r = dx_once(op_work_ack, { KEYS[1], KEYS[1 + i] }, { P, unpack(ARGV, j + 1, j + 6) })
  if type(r) == 'number' then
    if r == 2 then OB_WRITTEN = true end
    out[i] = r
  else
    out[i] = r.err
  end
end
WQ.group_flush(g, now_ms())
if want > 0 then WQ.fetch_many(op_work_fetch, { KEYS[1] }, { P, unpack(fetch) }, want, out, false) end
return ob_mark(out)
