-- work_dead: the worker queue's dead letters (keys_worker.go, wq:dead): park a held item instead
-- of failing it, put a parked item back, or lock it for the caller (discard).
-- KEYS[1] meta key (routing only)
-- ARGV[1] prefix, then (declared in internal/luascripts/args.go, unpacked into these locals):
--   what: 'park' | 'redrive' | 'take' | 'oredrive'
--   token: 'park': the held lock token; 'take': the new lock's nonce (36 characters)
--   id: 'redrive', 'take': the parked item's id; 'oredrive': the instance held as poison (oq:dead)
--   lock_ms: 'take': lock ms
--   reason: 'park': the failure the item would have recorded (ErrorDetails JSON)
-- Reply: 'park', 'redrive', 'oredrive': 1; 'take': the lock token.
-- Effects: 'park' takes the item out of its schedule (or wq:shold), drops its lock (and its slot
--   of a concurrency cap) and lists it in wq:dead, with field d "<ms> <reason>"; nothing else
--   changes (its instance index entry stays, so a cancellation deletes it). 'redrive' makes it
--   ready again with its delivery count reset to 0, waking a fetcher. 'take' locks it as a fetch
--   would (its count unchanged). 'oredrive' deletes the instance's hold note and its messages'
--   delivery counts (q:<id> h, a<s>) and its oq:dead entry: its next turn runs.
-- Errors: 'park': DX_INVALID_TOKEN as work_ack; 'redrive', 'take', 'oredrive': DX_NOT_FOUND when
--   id is not parked (held). Nothing is written then.
-- Cost: O(log N); 'oredrive' O(fields of the instance's message hash).
local now = now_ms()
if what == 'oredrive' then
  -- An orchestration held as poison (orch_abandon, oq:dead): its deliveries are forgotten and
  -- its hold note deleted, so the next fetch (at the end of the hold's delay) runs its turn.
  if redis.call('ZREM', P .. 'oq:dead', id) == 0 or not redis.call('HGET', k_msgs(id), 'h') then
    return fail('NOT_FOUND', 'instance ' .. id .. ' is not held as poison')
  end
  local dead = { 'h' }
  for _, f in ipairs(redis.call('HKEYS', k_msgs(id))) do
    if string.match(f, '^a%d+$') then dead[#dead + 1] = f end
  end
  call_chunked('HDEL', k_msgs(id), dead)
  return 1
end
if what == 'park' then
  local id, it = WQ.held(token, now)
  if not id then return it end
  local sid, tk = it[3], it[4]
  local ki = WQ.k_item(id)
  redis.call('ZREM', sid == '' and WQ.k_q(tk) or WQ.K_SHOLD, id)
  redis.call('HDEL', ki, 'k', 'u')
  if it[11] == '1' then
    redis.call('HDEL', ki, 'r')
    WQ.cap_release(tk, id)
  end
  redis.call('HSET', ki, 'd', now_s() .. ' ' .. reason)
  redis.call('ZADD', WQ.K_DEAD, now_s(), id)
  return 1
end
if redis.call('ZREM', WQ.K_DEAD, id) == 0 then
  return fail('NOT_FOUND', 'worker item ' .. id .. ' is not a dead letter (redriven, discarded or cancelled)')
end
local ki = WQ.k_item(id)
local it = redis.call('HMGET', ki, 's', 't', 'c')
redis.call('HDEL', ki, 'd')
if what == 'redrive' then
  redis.call('HSET', ki, 'n', '0')
  WQ.make_ready(id, it[1], it[2], true, it[3] or now_s())
  return 1
end
return WQ.lock(id, token, now + lock_ms, it[1], it[2])[3]
