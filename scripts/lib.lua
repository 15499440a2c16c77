-- lib.lua: helpers shared by every script (scripts.go puts lib*.lua before each operation).
-- Key builders mirror keys.go exactly (TestLuaKeysMatchGo checks it). P is the partition prefix.
--
-- Loaded as a Redis Functions library (Redis 7+) this code runs once; as EVAL scripts it runs on
-- every call. So nothing here may depend on the call: dx_setup(ARGV[1]) sets P and the keys
-- derived from it at the start of every call, in both modes.
local P, MULTI, K_PINS, K_DUE, K_LOCKED, K_OQ_NEXT, OQ_NEXT, K_CHORES, K_META, K_WAKE_ORCH, K_WAKE_FILTERS, K_IDX_INSTANCES, K_IDX_EXPIRY, K_IDX_REAP, K_ORPHANS
local setup_hooks = {} -- keys of the other lib files derived from P (lib_worker.lua)

local OB_WRITTEN -- whether this call wrote to an outbox (ob_put)
local NOW, NOW_S, NOW_US -- the server time of this call, read once (now_ms), and as a string (now_s)
local LOCK_UNTIL -- the expiry (ms) of the lock this call's token holds, once checked (oq_held, WQ.held; see dx_once)
local GROUP -- a batched worker ack's writes gathered for after its acks (work_ack_many; nil otherwise)
local MANY, EXTRA -- a batched worker fetch: the items it still wants, and those locked beyond the first (WQ.fetch_many)
-- Under FUNCTION the library's state outlives the call: the keys derived from the prefix are
-- recomputed only when the prefix differs from the previous call's (about 25 string
-- concatenations and internings per call saved, most calls use one prefix); per-call state is
-- reset every time.
local IN_CLUSTER -- whether the server is a Redis Cluster node, once asked (dx_setup's slot probe)
local format_checked = {} -- prefixes whose format record this library load has checked (see format_check)
local format_check
local function dx_setup(prefix, writes)
  NOW, NOW_S, NOW_US, OQ_NEXT, LOCK_UNTIL, OB_WRITTEN, GROUP, MANY, EXTRA = nil, nil, nil, nil, nil, false, nil, nil, nil
  if prefix ~= P then
    P = prefix
    -- A namespace of several partitions: their tags are "<ns>:<p>/<k>" (keys.go, Keyspace); the
    -- one partition of a namespace of one is "<ns>:0".
    MULTI = string.find(P, '/', 1, true) ~= nil
    K_PINS = P .. 'oq:pins'
    K_DUE = P .. 'oq:due'
    K_LOCKED = P .. 'oq:locked'
    K_OQ_NEXT = P .. 'oq:gate'
    K_CHORES = P .. 'chores'
    K_META = P .. 'meta'
    K_WAKE_ORCH = P .. 'wake:orch'
    K_WAKE_FILTERS = P .. 'wake:filters'
    K_IDX_INSTANCES = P .. 'idx:instances'
    K_IDX_EXPIRY = P .. 'idx:expiry'
    K_IDX_REAP = P .. 'idx:reap'
    K_ORPHANS = P .. 'oq:parked'
    for _, hook in ipairs(setup_hooks) do hook() end
  end
  -- The slot probe (keys.go, "Slot migrations"): while a Redis Cluster migrates this partition's
  -- slot, some of its keys may be on each node, and a script would fail at its first key that
  -- moved (after writes) or, on the importing node, not see the keys still on the other. The
  -- probe key never exists: on a slot in migration this two-key read fails (TRYAGAIN or ASK, as
  -- "Script attempted to access a non local key"), before anything is read or written, and the
  -- caller retries until the slot has moved. Off a cluster, or on a settled slot, it reads nothing.
  -- Only a cluster node migrates slots: elsewhere the probe would be a command per call for nothing.
  if IN_CLUSTER == nil then IN_CLUSTER = type(redis.pcall('CLUSTER', 'MYID')) == 'string' end
  if IN_CLUSTER then redis.call('EXISTS', K_META, P .. 'slot:probe') end
  if writes and not format_checked[P] then return format_check() end
  return nil
end

-- The format record (keys.go, Meta): these scripts read and write format 2 only. A write checks
-- it once per prefix per library load (under EVAL, every call): a namespace of another format, or
-- one being migrated, is refused with DX_FORMAT before anything is written; a new namespace gets its
-- record, and the keys a format-1 process touches first (its sequence, its fetch gates, its orphan
-- index) become hashes it cannot use, so that an older release fails loudly (WRONGTYPE) at its first
-- call instead of mixing formats. redisprovider (NamespaceFormat) reads the record the same way.
local FORMAT = '2'
local FORMAT1_KEYS = { 'seq', 'oq:next', 'wq:next', 'oq:orphans' }
format_check = function()
  local m = redis.call('HMGET', K_META, 'format', 'migrating', 'partitions')
  if m[2] then
    return redis.error_reply('DX_FORMAT ' .. (m[1] or '1') .. ' the namespace is being migrated to format ' .. m[2] .. ' (dxctl migrate): wait for it to finish, or run it again if it stopped')
  end
  if m[1] == false then
    -- A partition of a namespace of several gets its record when the namespace is created
    -- (ns_init): without it, the caller's partition count is not the namespace's, or the record
    -- was lost.
    if MULTI then
      return redis.error_reply('DX_PARTITIONS 0 no partition record at ' .. K_META .. ': the namespace was not created with this partition count (or the record was lost: dxctl fsck)')
    end
    if redis.call('EXISTS', P .. 'seq') == 1 then
      return redis.error_reply('DX_FORMAT 1 the namespace holds format-1 data: stop its runtimes and run dxctl migrate')
    end
    redis.call('HSET', K_META, 'format', FORMAT, 'partitions', '1', 'tags', string.sub(P, 1, -2))
    for _, k in ipairs(FORMAT1_KEYS) do redis.call('HSET', P .. k, 'format', FORMAT) end
  elseif m[1] ~= FORMAT then
    return redis.error_reply('DX_FORMAT ' .. m[1] .. ' the namespace is format ' .. m[1] .. '; this dxredis reads and writes format ' .. FORMAT)
  elseif not MULTI and m[3] and m[3] ~= '1' then
    -- The root record of a namespace of several partitions: a caller that takes it for the one
    -- partition of a namespace of one is refused.
    return redis.error_reply('DX_PARTITIONS ' .. m[3] .. ' the namespace has ' .. m[3] .. ' partitions')
  end
  format_checked[P] = true
  return nil
end

-- The next n enqueue sequence numbers of the partition (FIFO order of both queues): returns the
-- last. Cost: O(1).
local now_us
local function next_seq(n)
  local s = redis.call('HINCRBY', K_META, 'seq', n)
  -- Several partitions: sequence numbers double as a clock (at least the server time in
  -- microseconds), so that the heads of different partitions compare in enqueue order (fetches
  -- take the oldest ready work across partitions). One partition keeps plain counting.
  if MULTI then
    local us = now_us()
    if s < us then
      redis.call('HSET', K_META, 'seq', string.format('%d', us))
      s = us
    end
  end
  return s
end

local function now_ms()
  if NOW == nil then
    local t = redis.call('TIME') -- {seconds, microseconds}
    local us = t[2]
    if #us < 6 then us = string.rep('0', 6 - #us) .. us end -- padded only when needed (a concat less)
    NOW_S = t[1] .. string.sub(us, 1, 3) -- the ms, unformatted
    NOW = NOW_S + 0 -- one conversion (tonumber converts twice: lua_isnumber, lua_tonumber)
    NOW_US = t -- kept for now_us, which only a namespace of several partitions calls
  end
  return NOW
end

-- The server time in microseconds (a number: exact in a double until the year 2255).
now_us = function()
  now_ms()
  local us = NOW_US[2]
  if #us < 6 then us = string.rep('0', 6 - #us) .. us end
  return (NOW_US[1] .. us) + 0
end

-- Numbers given to redis.call are formatted by the server with '%.17g', which costs more than
-- many commands (about 0.3 us each, and Lua's tostring as much); the hot paths pass strings:
-- integers through d ('%d' is several times faster), constants as literals, the time as now_s().
local function now_s()
  now_ms()
  return NOW_S
end
local function d(n) return string.format('%d', n) end

local function k_inst(id) return P .. 'i:' .. id end
local function k_execs(id) return P .. 'xs:' .. id end
local function k_exec(id, e) return P .. 'x:' .. e .. ':' .. id end
local function k_xout(id, e) return P .. 'xo:' .. e .. ':' .. id end
local function k_hist(id, e) return P .. 'h:' .. e .. ':' .. id end
local function k_hids(id, e) return P .. 'he:' .. e .. ':' .. id end
local function k_msgs(id) return P .. 'q:' .. id end
local function k_lock(id) return P .. 'lk:' .. id end
local function k_cs(id) return P .. 'cs:' .. id end
local function k_kv(id) return P .. 'kv:' .. id end
local function k_kd(id) return P .. 'kd:' .. id end
local function k_children(id) return P .. 'ch:' .. id end
local function k_ready(pin) return P .. 'oq:ready:' .. pin end
local function k_idx_status(s) return P .. 'idx:status:' .. s end

-- Append field f with value v to t, the arguments of an HSET being gathered.
local function add_field(t, f, v)
  t[#t + 1], t[#t + 2] = f, v
end

-- Errors: a reply "DX_<CODE> message" that redisprovider maps to a ProviderError.
local function fail(code, msg) return redis.error_reply('DX_' .. code .. ' ' .. msg) end

-- Outboxes (keys.go, "Outboxes"). In a namespace of several partitions, a script that must change
-- something in another partition (a message for an instance there, a session item, a child's
-- bookkeeping in its parent) appends an entry to this partition's outbox for that partition,
-- ob:<dest>, in the same script: it commits with the rest. redisprovider then forwards it (ob_take
-- here, ob_apply there, ob_trim here), and the destination applies each source's entries once and
-- in order (their sequence numbers against its high-water mark ib:hwm). An entry is "<seq> <kind>
-- " and its fields, each "<byte length>:<bytes>" (ob_fields). Kinds, applied by ob_apply:
--   o an orchestrator message: target, json, type code, visible_at
--   k an activity's completion from a session item here: target, json, execution, activity id
--     (ob_apply also drops the target's note that the activity's item lives elsewhere)
--   w a session item for a session homed there: json, instance, execution, activity id, session, tag
--   x the cancellation of such an item: instance, execution, activity id
--   c a child created here whose parent is there: parent, child, the child's partition
--   s a child here settled ('1') or runs again ('0') (retention's open counts): parent, '1' or '0'
--   r reap a descendant of an expired root (retention): id
--   u a child here was deleted: parent, child (the parent forgets it)
-- Cost: O(fields); a HINCRBY, an RPUSH and a ZADD.
local function ob_put(dest, kind, ...)
  local n = select('#', ...)
  local parts = {}
  for i = 1, n do
    local v = select(i, ...)
    parts[i] = #v .. ':' .. v
  end
  local seq = redis.call('HINCRBY', P .. 'ob:seq', dest, '1')
  redis.call('RPUSH', P .. 'ob:' .. dest, seq .. ' ' .. kind .. ' ' .. table.concat(parts))
  redis.call('ZADD', P .. 'ob:dirty', 'NX', now_s(), dest)
  OB_WRITTEN = true
end

-- A fetch's reply r, marked ('ob' last) when the call wrote to an outbox (retention's reaping of a
-- child in another partition): its caller forwards it.
local function ob_mark(r)
  if OB_WRITTEN and r[#r] ~= 'ob' then r[#r + 1] = 'ob' end
  return r
end

-- The fields of an outbox entry from byte pos on (see ob_put), or nil when they do not parse.
local function ob_fields(e, pos)
  local out = {}
  while pos <= #e do
    local c = string.find(e, ':', pos, true)
    local n = c and tonumber(string.sub(e, pos, c - 1))
    if not n or c + n > #e then return nil end
    out[#out + 1] = string.sub(e, c + 1, c + n)
    pos = c + n + 1
  end
  return out
end

-- At most once per attempt. redisprovider retries a write whose reply was lost (the call may have
-- run) with the same attempt key, KEYS[2]: a run that finds the key returns the reply stored there
-- by the run that succeeded and changes nothing; a successful run stores its reply (an integer)
-- for ATTEMPT_TTL_MS, longer than redisprovider retries (attemptWindow), and for a call under a
-- lock (an ack, an abandon) at least until that lock would have expired, plus ATTEMPT_TTL_MS: a
-- caller retries an ack with the same attempt id for as long as it holds the lock (dx does), so
-- the reply must outlive the longest lock. The key expires on its own and is never part of an
-- instance. Error replies are not stored: a failed run wrote nothing (DESIGN.md S8). The first try
-- of a call passes its key with a trailing '!': no earlier run can exist, so it skips the GET.
-- Cost: one SET on success (and one GET on a retry).
local ATTEMPT_TTL_MS = 20000

local function attempt_key(KEYS)
  local att = KEYS[2]
  if att and string.byte(att, -1) == 33 then return string.sub(att, 1, -2), true end -- 33: '!'
  return att, false
end
local function dx_once(op, KEYS, ARGV)
  local att, first = attempt_key(KEYS)
  if att and not first then
    local prev = redis.call('GET', att)
    if prev then return tonumber(prev) end
  end
  local r = op(KEYS, ARGV)
  if att and type(r) == 'number' then
    local ttl = ATTEMPT_TTL_MS
    if LOCK_UNTIL then ttl = ttl + math.max(0, LOCK_UNTIL - now_ms()) end
    redis.call('SET', att, r == 1 and '1' or d(r), 'PX', d(ttl))
  end
  return r
end

-- An ack-and-fetch script's body (orch_ack_fetch, work_ack_fetch): ARGV is the prefix, the ack's
-- n arguments after the prefix, the fetch's, then n. The ack reads ARGV itself (the arguments after
-- its own are never read), so only the fetch's few are copied. The ack runs at most once per
-- attempt (dx_once); the fetch runs only after an ack that succeeded.
local function ack_then_fetch(ack, fetch, KEYS, ARGV)
  local last = #ARGV
  local n = ARGV[last] + 0
  local r = dx_once(ack, KEYS, ARGV)
  if type(r) ~= 'number' then return r end
  if r == 2 then OB_WRITTEN = true end -- (a retry: the run whose reply was lost wrote it)
  return ob_mark(fetch(KEYS, { ARGV[1], unpack(ARGV, 2 + n, last - 1) })) -- OB_WRITTEN: by the ack or the fetch
end

-- Append v to lists[key], noting a new key in order (the gathering of GROUP, lib_worker.lua).
local function group_push(order, lists, key, v)
  local l = lists[key]
  if l then
    l[#l + 1] = v
  else
    lists[key], order[#order + 1] = { v }, key
  end
end

-- redis.call(cmd, key, args...) with args in chunks of at most 900 (Lua's unpack has a small
-- stack; an even size keeps pairs whole). Returns the reply's elements, concatenated over the
-- chunks ({} for no args, which call nothing).
local function call_chunked(cmd, key, args)
  if #args <= 900 then
    if #args == 0 then return {} end
    return redis.call(cmd, key, unpack(args))
  end
  local out = {}
  for i = 1, #args, 900 do
    local part = redis.call(cmd, key, unpack(args, i, math.min(i + 899, #args)))
    if type(part) == 'table' then
      for _, v in ipairs(part) do out[#out + 1] = v end
    end
  end
  return out
end

-- Per-minute outcome counts (keys.go, P stats; redisprovider's OutcomeStats): field
-- '<minute>:<kind>' (minute = ms / 60000; kind oc/of orchestrations completed/failed, ac/af
-- activities completed/failed) counts the outcomes of that minute, field 't' the minute of the
-- last trim. One HINCRBY per outcome; the first count of a kind in a minute (the reply is 1) also
-- deletes the minutes that left the window of STATS_MINUTES: every field is deleted once, so the
-- cost is O(1) amortized and the hash holds at most STATS_MINUTES + 1 minutes. Between the last
-- trim t and this minute no outcome was counted (it would have trimmed), so the minutes to delete
-- are t-STATS_MINUTES+1 .. min(t, m-STATS_MINUTES).
local STATS_MINUTES = 1440
local STATS_KINDS = { 'oc', 'of', 'ac', 'af' }
local function stats_count(kind, n) -- n: how many (default 1, passed as text without formatting)
  local m = math.floor(now_ms() / 60000)
  local key, ms = P .. 'stats', d(m)
  if redis.call('HINCRBY', key, ms .. ':' .. kind, n and d(n) or '1') ~= (n or 1) then return end
  local t = tonumber(redis.call('HGET', key, 't') or '')
  if t and t >= m then return end
  redis.call('HSET', key, 't', ms)
  if not t then return end
  local dead = {}
  for x = t - STATS_MINUTES + 1, math.min(t, m - STATS_MINUTES) do
    for _, k in ipairs(STATS_KINDS) do dead[#dead + 1] = d(x) .. ':' .. k end
  end
  call_chunked('HDEL', key, dead)
end

-- Wake up to n long-polling fetchers waiting on key. The list is capped and expires, so tokens
-- nobody takes cost at most a few spurious wakes, never a spin. The expiry is set when a push
-- creates the list (every push that creates one sets it), not on every push.
local function wake(key, n)
  if n <= 0 then return end
  if n > 16 then n = 16 end
  local len
  if n == 1 then
    len = redis.call('LPUSH', key, '1') -- the usual case, without the table
  else
    local tokens = { key }
    for i = 1, n do tokens[i + 1] = '1' end
    len = redis.call('LPUSH', unpack(tokens))
  end
  if len > 16 then redis.call('LTRIM', key, '0', '15') end
  if len <= n then redis.call('PEXPIRE', key, '5000') end
end

-- Orchestration fetchers wait on one list per capability filter: k_wake_filter(f) for the filter f
-- they registered in K_WAKE_FILTERS ('*' none, else its ranges 'lo hi lo hi ...' in pin keys). A
-- wake-up for work of pin key pin goes to every registered filter that accepts pin, so it reaches
-- a fetcher that can take the work (one shared list let an incompatible waiter take the token).
local function k_wake_filter(f)
  if f == '*' then return K_WAKE_ORCH end
  return P .. 'wake:orch:f:' .. redis.sha1hex(f)
end

local function filter_accepts(f, pin)
  if f == '*' or pin == '-' then return true end
  local lo = nil
  for w in string.gmatch(f, '%S+') do
    if lo == nil then
      lo = w
    else
      if pin >= lo and pin <= w then return true end
      lo = nil
    end
  end
  return false
end

-- Wake n fetchers of every filter that accepts work of pin key pin. Cost: O(registered filters);
-- registrations that lapsed are removed by orch_fetch.
local function wake_orch(pin, n)
  for _, f in ipairs(redis.call('ZRANGE', K_WAKE_FILTERS, '0', '-1')) do
    if filter_accepts(f, pin) then wake(k_wake_filter(f), n) end
  end
end

-- Executions: one layout. The instance hash i:<id> holds the record of the instance's current
-- execution (exec, its id; status; xs started ms, absent when it is created's; done completed ms,
-- absent until it finishes and when it is updated's (see exec_record); out where its output is;
-- hn/hb its history's events and bytes; hd '1' while its event ids are 1..hn, else '0'; pink its
-- pin key, absent when unpinned), next to the instance's own fields (name, ver, created, updated,
-- parent, open, tag, kv). An instance with any execution has that record: an ack or append
-- without a name and version writes it too (a record without name: the instance is known but not
-- created, and no index lists it). x:<e>:<id> holds the record of every other execution (older
-- ones of a continued-as-new instance, or appended ones): status, started, completed, out, hn,
-- hd, pink. Fields always written: exec, hn, hb, hd, out in i:; hn, hd, out in x:. Fields absent
-- for want of a value: status and started of an execution only appended to (no ack started it),
-- done/completed until it finishes, pink when unpinned; and, to save bytes, the instance hash's
-- xs and done when they repeat created and updated (the one rule: exec_record). The execution set
-- xs:<id> is absent while the instance has one execution (a ZADD per hello saved): execs_add
-- writes it with the second. admin_migrate converts the older layouts (lib_admin.lua,
-- record_convert).

-- Current execution of an instance, or nil.
local function current_exec(id)
  return tonumber(redis.call('HGET', k_inst(id), 'exec'))
end

-- Execution ids of an instance, ascending (strings). i: the instance hash's REC_FIELDS (see
-- exec_record) when the caller read them already.
local function executions(id, i)
  local r = redis.call('ZRANGE', k_execs(id), '0', '-1')
  if #r > 0 then return r end
  local e
  if i then e = i[1] else e = redis.call('HGET', k_inst(id), 'exec') end
  if e then return { e } end
  return {}
end

-- Add execution e to the execution set (with the hash's current execution when the set is new).
-- Returns 1 when e is new. Cost: O(1), three commands when the set is created.
local function execs_add(id, e)
  e = tostring(e)
  if redis.call('EXISTS', k_execs(id)) == 0 then
    local cur = redis.call('HGET', k_inst(id), 'exec')
    if cur and cur ~= e then redis.call('ZADD', k_execs(id), cur, cur) end
  end
  return redis.call('ZADD', k_execs(id), e, e)
end

-- Whether execution e of an instance exists.
local function has_exec(id, e)
  e = tostring(e)
  if redis.call('HGET', k_inst(id), 'exec') == e then return true end
  return redis.call('ZSCORE', k_execs(id), e) ~= false
end

-- Whether an execution status is terminal (provider.IsTerminalStatus).
local function is_terminal(st)
  return st == 'Completed' or st == 'Failed' or st == 'ContinuedAsNew'
end

-- An execution's record {status, started, completed, out, hn, hd} (false where absent): the
-- instance hash's when e is its current execution, else its execution hash's. The instance hash
-- leaves out the two times that most often repeat its own (about 30 bytes per finished instance):
-- started is xs, or created when xs is absent; completed is done, or updated when done is absent
-- and the status is terminal (orch_ack writes each exactly when it differs). i: the instance hash's
-- REC_FIELDS when the caller read them already (further fields may follow).
local REC_FIELDS = { 'exec', 'xs', 'status', 'done', 'out', 'hn', 'hd', 'created', 'updated' }
-- orch_ack's read of an instance that does not exist: its 17 fields absent (read only).
local NO_INSTANCE = { false, false, false, false, false, false, false, false, false, false, false, false, false,
  false, false, false, false }

-- A record's write-back (orch_ack): field n of value v, where the hash holds s (nil: absent),
-- goes into the HSET arguments f when it differs, into dels (made when needed) when v is nil.
-- Returns dels.
local function rec_put(f, dels, n, v, s)
  if v == s then return dels end
  if v == nil then
    dels = dels or {}
    dels[#dels + 1] = n
  else
    f[#f + 1], f[#f + 2] = n, v
  end
  return dels
end

local function rec_fields(id) return redis.call('HMGET', k_inst(id), unpack(REC_FIELDS)) end
local function exec_record(id, e, i)
  e = tostring(e)
  i = i or rec_fields(id)
  if i[1] == e then
    local done = i[4]
    if not done and is_terminal(i[3]) then done = i[9] end
    return { i[3], i[2] or i[8], done, i[5], i[6], i[7] }
  end
  return redis.call('HMGET', k_exec(id, e), 'status', 'started', 'completed', 'out', 'hn', 'hd')
end

-- An instance's current execution and its record (nil, nil when it has none), and the instance
-- hash's REC_FIELDS: one read of the hash.
local function current_record(id)
  local i = rec_fields(id)
  local e = tonumber(i[1])
  if e == nil then return nil, nil, i end
  return e, exec_record(id, e, i), i
end

-- An execution's event count (rec: its exec_record).
local function exec_events(rec)
  return tonumber(rec[5]) or 0
end

-- An execution's output, given its record's out field: '<offset> <length>' the bytes of the
-- output as a JSON string in the execution's history (most outputs: the terminal event carries
-- them, so they are not stored twice), 'k' the output key xo:<e>:<id>, '-' none.
-- Returns the output (false when none) and 'q' when it is JSON-quoted (redisprovider unquotes).
local function exec_output(id, e, out)
  if out == 'k' then return redis.call('GET', k_xout(id, e)), '' end
  local off, len = string.match(out or '', '^(%d+) (%d+)$')
  if off then
    return redis.call('GETRANGE', k_hist(id, e), off, tonumber(off) + tonumber(len) - 1), 'q'
  end
  return false, ''
end

-- The pin key of an instance's current execution ('-' when none).
local function pin_of(id)
  return redis.call('HGET', k_inst(id), 'pink') or '-'
end

-- Whether an instance exists: it has an instance hash (created by an ack with name and version,
-- or the record of an execution acked or appended without them). Cost: O(1).
local function inst_known(id) return redis.call('EXISTS', k_inst(id)) == 1 end

-- Orchestrator messages of an instance, q:<id> HASH: m<s> the item JSON, t<s> its type code and
-- the ms it becomes visible ('<code><ms>': S start, C continue-as-new, Q queue message, O other;
-- e.g. 'S1795742212536'), a<s> fetch attempts (absent 0), and h the hold note (orch_abandon). One
-- field says both what a message is and when it may be fetched, so an enqueue writes one HSET and
-- a fetch reads one HGETALL (format 1 kept the times in a sorted set of their own).
--
-- oq_messages reads them: the seqs visible at now (ascending, as strings), the earliest time a
-- message not visible yet becomes visible (nil: none), and the fields by name. Cost: O(messages).
local function seq_less(a, b) return a + 0 < b + 0 end -- (not a closure per call)
local function oq_messages(id, now)
  local all = redis.call('HGETALL', k_msgs(id))
  local f, seqs, later = {}, {}, nil
  for i = 1, #all, 2 do
    f[all[i]] = all[i + 1]
  end
  for i = 1, #all, 2 do
    if string.byte(all[i], 1) == 116 then -- 't'
      local at = string.sub(all[i + 1], 2) + 0
      if at <= now then
        seqs[#seqs + 1] = string.sub(all[i], 2)
      elseif later == nil or at < later then
        later = at
      end
    end
  end
  if #seqs > 1 then table.sort(seqs, seq_less) end
  return seqs, later, f
end

-- The number of messages queued for an instance. Cost: O(messages).
local function oq_count(id)
  local n = 0
  for _, f in ipairs(redis.call('HKEYS', k_msgs(id))) do
    if string.byte(f, 1) == 116 then n = n + 1 end -- 't'
  end
  return n
end

-- Whether a start (type code 'S', see oq_messages) is queued for an instance, fetched or not.
-- Cost: O(messages queued for it).
local function start_queued(id)
  for _, v in ipairs(redis.call('HVALS', k_msgs(id))) do
    if string.byte(v, 1) == 83 and #v < 24 then return true end -- 'S<ms>'; an item's JSON starts with '{'
  end
  return false
end

-- Is the instance lock held (present, whatever its expiry)? Expired locks are reclaimed by fetch.
local function is_locked(id)
  return redis.call('EXISTS', k_lock(id)) == 1
end

-- The housekeeping gate oq:next holds a time at or before every score in oq:locked and oq:due
-- and the chores time (K_CHORES; OQ_NEVER when there is none of these), so that an orchestration
-- fetch before that time skips the two scans and the chores check (one GET instead of three reads). Every write of a score that can be lower than the
-- ones there calls oq_note. A missing key means unknown: the next fetch scans and sets it.
local OQ_NEVER = 99999999999999

-- Record that a score `at` was written to oq:locked or oq:due.
local function oq_note(at)
  local cur = OQ_NEXT
  if cur == nil then
    cur = redis.call('GET', K_OQ_NEXT)
    if not cur then return end -- unknown: the next fetch scans anyway
    cur = cur + 0
  end
  if at < cur then
    redis.call('SET', K_OQ_NEXT, d(at))
    cur = at
  end
  OQ_NEXT = cur
end

-- Record that instance id next has delayed work at ms. When that is now the earliest due time,
-- wake one waiting fetcher that may take it: it blocked with a timeout computed before this work
-- existed and must learn the new, earlier due time.
local function oq_due_set(id, at)
  local head = redis.call('ZRANGE', K_DUE, '0', '0', 'WITHSCORES')
  redis.call('ZADD', K_DUE, d(at), id)
  oq_note(at)
  if head[2] == nil or at < head[2] + 0 then wake_orch(pin_of(id), 1) end
end

-- Recompute where an unlocked instance stands in the ready and due indexes. Returns its pin key
-- when it is ready (a fetcher should be woken), else nil. Cost: O(messages of the instance that
-- are visible) + O(log N).
local function oq_reindex(id, now)
  local seqs, later = oq_messages(id, now)
  local pin = nil
  if seqs[1] then
    pin = pin_of(id)
    redis.call('ZADD', k_ready(pin), seqs[1], id)
    if pin ~= '-' then redis.call('SADD', K_PINS, pin) end
  end
  if later then
    oq_due_set(id, later)
  else
    redis.call('ZREM', K_DUE, id)
  end
  return pin
end

-- The pin keys that may have a ready set: K_PINS holds the pinned ones ('-', unpinned work, is
-- always a candidate and need not be added by every enqueue; older data may hold it).
local function ready_pins()
  local pins = redis.call('SMEMBERS', K_PINS)
  for _, pin in ipairs(pins) do
    if pin == '-' then return pins end
  end
  pins[#pins + 1] = '-'
  return pins
end

-- orch_fetch's candidate: the instance with the oldest ready message among the pins its filter
-- accepts (filtered false: every pin; else the ranges, a section of {lo, hi} entries of A at at
-- with n entries (args.go, Section), pin '-' always), with its pin,
-- ready key and score (the message's sequence number); nil when none. Ready sets found empty
-- leave K_PINS.
local function oq_next_candidate(filtered, A, at, n)
  local best, best_score, best_pin, best_key = nil, nil, nil, nil
  for _, pin in ipairs(ready_pins()) do
    local ok = pin == '-' or not filtered
    if not ok then
      for j = at + 1, at + 2 * n, 2 do
        if pin >= A[j] and pin <= A[j + 1] then ok = true; break end
      end
    end
    if ok then
      local key = k_ready(pin)
      local r = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
      if r[1] == nil then
        if pin ~= '-' then redis.call('SREM', K_PINS, pin) end
      else
        local score = r[2] + 0 -- (a score: + 0 converts once, tonumber twice)
        if best == nil or score < best_score then best, best_score, best_pin, best_key = r[1], score, pin, key end
      end
    end
  end
  return best, best_pin, best_key, best_score
end

-- Register an orchestration fetcher's filter for wake-ups for wait_ms (orch_fetch, after finding
-- nothing): every wake-up for work it accepts reaches its list from then on (see wake_orch).
-- (GT: never shortens another waiter's registration of the same filter. Expired filters are
-- dropped when a new one joins, and the set expires once nobody registers: as WQ.register_waiter.)
local function oq_register_waiter(filtered, A, at, n, wait_ms, now)
  local f = '*'
  if filtered then f = table.concat(A, ' ', at + 1, at + 2 * n) end -- the ranges as oq_next_candidate takes them
  if redis.call('ZADD', K_WAKE_FILTERS, 'GT', d(now + wait_ms), f) > 0 then
    redis.call('ZREMRANGEBYSCORE', K_WAKE_FILTERS, '-inf', '(' .. now_s())
  end
  if redis.call('PTTL', K_WAKE_FILTERS) < wait_ms then redis.call('PEXPIRE', K_WAKE_FILTERS, d(2 * wait_ms)) end
end

-- Remove an instance from every orchestrator index (before locking or deleting it).
local function oq_unindex(id)
  redis.call('ZREM', k_ready(pin_of(id)), id)
  redis.call('ZREM', K_DUE, id)
end

-- Orphan messages: messages for an instance that does not exist, in a batch without a start (and
-- not only QueueMessages, which are dropped). As in duroxide, they wait for a start of that
-- instance and are delivered in its first batch (an event raised just before the start is not
-- lost), but only for ORPHAN_TTL_MS: the enqueue parks them (orphan_fate; a fetch parks those
-- that reach it otherwise, e.g. delayed ones or older data: orphan_park), out of the ready indexes,
-- their message keys expire, and oq:orphans (score = expiry) keeps them countable (admin_queues)
-- and deletable (admin_orphans). A start enqueued for the instance adopts them (oq_enqueue).
local ORPHAN_TTL_MS = 3600000

-- Chores: sweeps of index entries whose keys expired (retained roots, orphans) and reaping.
-- K_CHORES holds the earliest ms one of them may be due, so that a fetch checks one key instead
-- of three sets; whatever adds a chore lowers it (chore_at), a sweep recomputes it. The fetch's
-- housekeeping gate oq:next is at or before it too (oq_note), so a fetch reads K_CHORES only when
-- the gate is due.
local function chore_at(at)
  local cur = redis.call('GET', K_CHORES)
  if not cur or at < tonumber(cur) then redis.call('SET', K_CHORES, at) end
  oq_note(at)
end

-- Park instance id's messages as orphans; the first park sets their expiry. Cost: O(1).
local function orphan_park(id, now)
  if redis.call('ZADD', K_ORPHANS, 'NX', now + ORPHAN_TTL_MS, id) == 1 then
    redis.call('PEXPIRE', k_msgs(id), ORPHAN_TTL_MS)
    chore_at(now + ORPHAN_TTL_MS)
  end
end

-- Forget orphans whose messages expired (at most 100 per call; their keys are gone already).
local function orphan_sweep(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_ORPHANS, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', K_ORPHANS, id)
    redis.call('DEL', k_msgs(id)) -- in case the server's expiry is late
  end
end

-- What becomes of a message (type code tcode, not a start) for an unlocked instance that does not
-- exist (no record, no execution): 'park' it with the instance's parked orphans, 'drop' it, or nil
-- to queue it as usual. Parked at once, orphans never enter the ready index, so no fetch meets
-- them, however many there are. An instance with messages queued and not parked (a start, or
-- delayed messages) keeps the usual path: its fetch decides, as for any batch. A QueueMessage
-- visible now for an instance with nothing queued is dropped, as its fetch would drop it
-- (duroxide's rule); a delayed one waits in the due index like any delayed message. Cost: O(1).
local DROPPED = false -- oq_enqueue's reply for a dropped message (nil when not ready, else a pin key)
local function orphan_fate(id, tcode, visible_at, now)
  local parked = redis.call('ZSCORE', K_ORPHANS, id)
  if parked and parked + 0 <= now then -- expired, not swept yet: a new message starts afresh
    redis.call('ZREM', K_ORPHANS, id)
    redis.call('DEL', k_msgs(id))
    parked = false
  end
  if parked then return 'park' end
  if redis.call('EXISTS', k_msgs(id)) == 1 then return nil end
  if tcode ~= 'Q' then return 'park' end
  if visible_at <= now then return 'drop' end
  return nil
end

-- Add one orchestrator message. visible_at <= now means visible at once. Returns the instance's
-- pin key when the message is visible now for an unlocked instance (a fetcher should be woken).
-- A message for a locked instance marks the lock ('more'): its ack then reindexes the instance.
-- A message for an instance that does not exist is parked or dropped (orphan_fate; returns
-- DROPPED then).
-- Message hash fields: see oq_messages.
local function oq_enqueue(id, json, tcode, visible_at, now)
  local start = tcode == 'S' or tcode == 'C'
  if start and redis.call('ZREM', K_ORPHANS, id) == 1 then -- the start adopts parked orphans
    redis.call('PERSIST', k_msgs(id))
  end
  if visible_at < now then visible_at = now end
  local locked = is_locked(id)
  local pin, fate = '-', nil
  if not locked then
    local iv = redis.call('HMGET', k_inst(id), 'pink', 'name', 'exec')
    pin = iv[1] or '-'
    if not start and not iv[2] and not iv[3] then -- no record, no execution (lib.lua, Executions)
      fate = orphan_fate(id, tcode, visible_at, now)
      if fate == 'drop' then return DROPPED end
    end
  end
  local s = d(next_seq(1))
  redis.call('HSET', k_msgs(id), 'm' .. s, json, 't' .. s, tcode .. (visible_at == now_ms() and now_s() or d(visible_at)))
  if locked then
    redis.call('HSET', k_lock(id), 'more', '1')
    return nil
  end
  if fate == 'park' then
    orphan_park(id, now)
    return nil
  end
  if visible_at <= now then
    redis.call('ZADD', k_ready(pin), 'NX', s, id)
    if pin ~= '-' then redis.call('SADD', K_PINS, pin) end
    return pin
  end
  local due = redis.call('ZSCORE', K_DUE, id)
  if due == false or due + 0 > visible_at then oq_due_set(id, visible_at) end
  return nil
end

-- Enqueue completions jsons (type 'O', visible now) to instance id, in order, as oq_enqueue would
-- one by one, but with one lock check, one record read, one sequence increment and one write of
-- the messages (work_ack_many: a batch's completions for one instance). Returns the pin key to
-- wake a fetcher for, or nil.
local function oq_enqueue_now(id, jsons, now)
  local locked = is_locked(id)
  local pin = '-'
  if not locked then
    local iv = redis.call('HMGET', k_inst(id), 'pink', 'name', 'exec')
    if not iv[2] and not iv[3] then -- no record, no execution: the orphan rules, message by message
      local woken = nil
      for _, j in ipairs(jsons) do woken = oq_enqueue(id, j, 'O', now, now) or woken end
      return woken
    end
    pin = iv[1] or '-'
  end
  local n = #jsons
  local last, t = next_seq(n), 'O' .. now_s()
  local fields = {}
  for i = 1, n do
    local s = d(last - n + i)
    fields[4 * i - 3], fields[4 * i - 2], fields[4 * i - 1], fields[4 * i] = 'm' .. s, jsons[i], 't' .. s, t
  end
  call_chunked('HSET', k_msgs(id), fields)
  if locked then
    redis.call('HSET', k_lock(id), 'more', '1')
    return nil
  end
  redis.call('ZADD', k_ready(pin), 'NX', d(last - n + 1), id)
  if pin ~= '-' then redis.call('SADD', K_PINS, pin) end
  return pin
end

-- Delete orchestrator messages seqs of an instance, one command per 300 messages. An ack calls it
-- (or deletes the whole hash): the hold note h (orch_abandon) goes with the first chunk.
local function oq_delete_many(id, seqs)
  for i = 1, #seqs, 300 do
    local fields = {}
    if i == 1 then fields[1] = 'h' end
    for j = i, math.min(i + 299, #seqs) do
      local s = seqs[j]
      fields[#fields + 1], fields[#fields + 2], fields[#fields + 3] = 'm' .. s, 'a' .. s, 't' .. s
    end
    redis.call('HDEL', k_msgs(id), unpack(fields))
  end
end

-- An execution's tag (orch_fetch, orch_ack): 12 random hex digits of the lock nonce (a UUID) of
-- the fetch that began it.
local function exec_tag(nonce)
  return string.sub(nonce, 1, 8) .. string.sub(nonce, 10, 13)
end

-- Orchestration lock tokens name their instance: '<36-character nonce>.<instance id>' (orch_fetch
-- builds them), so no token -> instance map is kept.
local function oq_token_instance(token)
  if #token < 38 or string.sub(token, 37, 37) ~= '.' then return nil end
  return string.sub(token, 38)
end

-- The instance an orchestration lock token holds, its lock {tok, until, seqs, inst, more, tag} and
-- the lock's key, or nil and an error reply. With unexpired, a lock past its time is refused too
-- (abandon accepts one that a fetch has not reclaimed yet). Lock hash fields: tok (token), until (ms), seqs (the
-- locked message seqs), inst ('1': the instance existed at fetch), more ('1': the instance has
-- other messages, delayed or arrived during the lock), tag (the execution tag the fetch announced).
local function oq_held(token, now, unexpired)
  local id = oq_token_instance(token)
  if not id then return nil, fail('INVALID_TOKEN', 'Invalid lock token: unknown or already released') end
  local key = k_lock(id)
  local lk = redis.call('HMGET', key, 'tok', 'until', 'seqs', 'inst', 'more', 'tag')
  if lk[1] ~= token then return nil, fail('INVALID_TOKEN', 'Invalid lock token: lock no longer held') end
  local until_ms = lk[2] + 0
  if unexpired and until_ms <= now then return nil, fail('INVALID_TOKEN', 'Invalid lock token: lock expired') end
  LOCK_UNTIL = until_ms
  return id, lk, key
end

-- Split a space-separated list.
local function words(s)
  local out = {}
  if s then for w in string.gmatch(s, '%S+') do out[#out + 1] = w end end
  return out
end

-- Count one more delivery attempt of the locked messages seqs that still exist (a lock that ends
-- without an ack: orch_fetch writes no count, see there).
local function oq_count_attempt(id, seqs)
  local km = k_msgs(id)
  for _, s in ipairs(seqs) do
    if redis.call('HEXISTS', km, 'm' .. s) == 1 then redis.call('HINCRBY', km, 'a' .. s, '1') end
  end
end

-- Release an instance lock (token and lock record) and reindex the instance (returns its pin key
-- when it is ready). attempted: the lock ends without an ack or abandon (it expired), so its
-- delivery counts as an attempt of its messages.
local function oq_unlock(id, now, attempted)
  if attempted then oq_count_attempt(id, words(redis.call('HGET', k_lock(id), 'seqs'))) end
  redis.call('DEL', k_lock(id))
  redis.call('ZREM', K_LOCKED, id)
  return oq_reindex(id, now)
end

-- Event ids of an execution are dense while they are exactly 1..n in order (the record's hd '1',
-- hn n): duplicates are then ids <= n, and no id set is kept. The first other id writes the set
-- he:<e>:<id> (1..n and what follows) and the execution stays with the set.

-- A history delta is a section of {event_id, json} entries read in place (args.go, Section): A's
-- entry i is A[at + 2i - 1] (its id) and A[at + 2i] (its event), for i = 1..cnt.

-- Whether the delta continues a dense execution of n events: ids n+1, n+2, ... in order.
local function dense_next(n, A, at, cnt)
  for i = 1, cnt do
    if A[at + 2 * i - 1] ~= d(n + i) then return false end -- d: as tostring for these integers, without '%.14g'
  end
  return true
end

-- Append a delta to an execution's history: stored bytes are never decoded, reordered or changed.
-- The delta was checked by history_check; dense is the event count when the execution's ids are
-- dense, else nil, and still whether the delta keeps them so (dense_next). compact_from (nil:
-- never) is the stored history's byte length when the caller knows it and the execution is
-- finishing: APPEND leaves up to 100% slack behind (Redis grows strings greedily), so a finished
-- history of at most 4 KiB is rewritten exactly (a raw byte copy, bounded whatever the history's
-- length). Returns the bytes appended and the history's stored length after it (nil when nothing
-- was appended; the record's hb plus the bytes appended, unless the stored history was lost or
-- cut: the length stored is what offsets into it must use). Cost: O(events), one APPEND (GET + SET
-- when compacting); O(n) once when a dense execution gets its id set.
local function history_append(id, exec, A, at, cnt, compact_from, dense, still)
  if cnt == 0 then return 0, nil end
  if not still then -- (the table and closure only here: a dense append, the usual one, needs neither)
    local ids = {}
    local function flush(force)
      if #ids == 500 or (force and #ids > 0) then -- chunked: Lua's unpack has a small stack
        redis.call('SADD', k_hids(id, exec), unpack(ids))
        ids = {}
      end
    end
    if dense then
      for n = 1, dense do ids[#ids + 1] = n; flush(false) end
    end
    for i = 1, cnt do ids[#ids + 1] = A[at + 2 * i - 1]; flush(false) end
    flush(true)
  end
  local add -- every line ends with '\n'
  if cnt == 1 then
    add = A[at + 2] .. '\n'
  else
    local lines = {}
    for i = 1, cnt do lines[i] = A[at + 2 * i] end
    lines[cnt + 1] = ''
    add = table.concat(lines, '\n')
  end
  local key, total = k_hist(id, exec), nil
  if compact_from and compact_from > 0 and compact_from + #add <= 4096 then
    local v = (redis.call('GET', key) or '') .. add
    redis.call('SET', key, v, 'KEEPTTL')
    total = #v
  else
    total = redis.call('APPEND', key, add)
  end
  return #add, total
end

-- Fail unless every event id of the delta is new to the execution and unique within the delta
-- (dense and still: see history_append).
local function history_dup(id, exec, eid)
  return fail('DUPLICATE', 'duplicate event_id ' .. eid .. ' in execution ' .. exec .. ' of instance ' .. id)
end
local function history_check(id, exec, A, at, cnt, dense, still)
  -- The usual delta continues a dense execution (dense_next): its ids are new and distinct.
  if still then return nil end
  local seen = {}
  if dense then
    for i = 1, cnt do
      local eid = A[at + 2 * i - 1]
      local n = #eid <= 15 and tonumber(eid)
      if seen[eid] or (n and n <= dense) then return history_dup(id, exec, eid) end
      seen[eid] = true
    end
    return nil
  end
  for i = 1, cnt, 500 do -- one SMISMEMBER per 500 events (Lua's unpack has a small stack)
    local ids = {}
    for j = i, math.min(i + 499, cnt) do ids[#ids + 1] = A[at + 2 * j - 1] end
    local found = redis.call('SMISMEMBER', k_hids(id, exec), unpack(ids))
    for j, eid in ipairs(ids) do
      if seen[eid] or found[j] == 1 then return history_dup(id, exec, eid) end
      seen[eid] = true
    end
  end
  return nil
end

-- a > b in the byte order Redis uses for equal scores (Lua's < follows the server's locale).
local function member_after(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- Rank in the sorted set key of the first entry after (score, member), a paging cursor. The
-- cursor entry may have been removed since. Cost: O(log N), plus the entries sharing its score
-- when it was removed.
local function zrank_after(key, score_text, member)
  local score = tonumber(score_text)
  local rank = redis.call('ZRANK', key, member)
  if rank and tonumber(redis.call('ZSCORE', key, member)) == score then return rank + 1 end
  local start = redis.call('ZCOUNT', key, '-inf', '(' .. score_text)
  while true do
    local r = redis.call('ZRANGE', key, start, start + 99, 'WITHSCORES')
    if #r == 0 then return start end
    for i = 1, #r, 2 do
      if tonumber(r[i + 1]) ~= score or member_after(r[i], member) then return start end
      start = start + 1
    end
  end
end

-- Retention (DESIGN.md S7), O(depth) per ack. An instance is settled when it is Completed or
-- Failed and so is its whole subtree: each instance hash counts in 'open' its direct children
-- that are not settled. When an instance's settled state changes, its parent's count moves by
-- one, which may change the parent's state, and so on up (tree_settle_changed): O(depth), never
-- O(tree). When a root settles, its own keys get the retention TTL and it is queued in
-- idx:expiry; once they expired, fetches reap its descendants (sweep_expired, bounded per call):
-- a running tree never expires and a finished one goes as a whole, no ack walking the tree. The
-- counts are kept with or without retention, so turning retention on later is safe.

-- An instance's keys; with_children false leaves out its children set (reaping needs it).
local function instance_keys(id, with_children)
  local keys = { k_inst(id), k_execs(id), k_cs(id), k_kv(id), k_kd(id), k_msgs(id) }
  if with_children then
    keys[#keys + 1] = k_children(id)
    if MULTI then keys[#keys + 1] = P .. 'chx:' .. id end
  end
  local cur = redis.call('HGET', k_inst(id), 'exec') -- its record is in the instance hash
  for _, e in ipairs(executions(id, { cur })) do
    if e ~= cur then keys[#keys + 1] = k_exec(id, e) end
    keys[#keys + 1] = k_xout(id, e)
    keys[#keys + 1] = k_hist(id, e)
    keys[#keys + 1] = k_hids(id, e)
  end
  return keys
end

-- Whether an instance of status st and open count open (its hash's fields) is settled.
local function settled_of(st, open)
  return (st == 'Completed' or st == 'Failed') and (open or 0) + 0 <= 0
end
local function settled(id)
  local r = redis.call('HMGET', k_inst(id), 'status', 'open')
  return settled_of(r[1], r[2])
end

-- A root settled: its keys expire after ttl (its children set stays for the reaping).
local function retain_root(id, now, ttl)
  for _, k in ipairs(instance_keys(id, false)) do redis.call('PEXPIRE', k, ttl) end
  redis.call('ZADD', K_IDX_EXPIRY, now + ttl, id)
  chore_at(now + ttl)
end

-- A root runs again (a new child, a new execution): it keeps its keys.
local function unretain_root(id)
  if redis.call('PTTL', k_inst(id)) < 0 then return end
  for _, k in ipairs(instance_keys(id, true)) do redis.call('PERSIST', k) end
  redis.call('ZREM', K_IDX_EXPIRY, id)
end

-- Instance id became settled (is_settled) or unsettled: update the open counts of its ancestors
-- as far as their own state changes; a root whose state changes is retained (ttl > 0) or
-- unretained. An instance whose parent no longer exists counts as a root. Cost: O(depth).
local function tree_settle_changed(id, is_settled, now, ttl)
  local x = id
  for _ = 1, 1000 do
    local parent, pp
    if MULTI then
      local r = redis.call('HMGET', k_inst(x), 'parent', 'pp')
      parent, pp = r[1], r[2]
    else
      parent = redis.call('HGET', k_inst(x), 'parent')
    end
    if pp then -- the parent lives in partition pp: the walk goes on there (ob_apply, 's')
      ob_put(pp, 's', parent, is_settled and '1' or '0')
      return
    end
    if not parent or redis.call('EXISTS', k_inst(parent)) == 0 then
      if not is_settled then
        unretain_root(x)
      elseif ttl > 0 then
        retain_root(x, now, ttl)
      end
      return
    end
    local was = settled(parent)
    redis.call('HINCRBY', k_inst(parent), 'open', is_settled and -1 or 1)
    if settled(parent) == was then return end
    x = parent
  end
end

-- Queue the children of id for reaping: those of this partition in idx:reap, those of another
-- (chx:<id>) through the outbox. Cost: O(children).
local function reap_children(id)
  local kids = redis.call('SMEMBERS', k_children(id))
  if MULTI and #kids > 0 then
    local away = redis.call('HGETALL', P .. 'chx:' .. id)
    if #away > 0 then
      local remote = {}
      for i = 1, #away, 2 do
        remote[away[i]] = true
        ob_put(away[i + 1], 'r', away[i])
      end
      local here = {}
      for _, c in ipairs(kids) do
        if not remote[c] then here[#here + 1] = c end
      end
      kids = here
      redis.call('DEL', P .. 'chx:' .. id)
    end
  end
  call_chunked('SADD', K_IDX_REAP, kids)
end

-- Delete a reaped descendant of an expired root and queue its children. Cost: O(its keys).
local function reap(id)
  reap_children(id)
  local st = redis.call('HGET', k_inst(id), 'status')
  if st then redis.call('ZREM', k_idx_status(st), id) end
  redis.call('ZREM', K_IDX_INSTANCES, id)
  redis.call('ZREM', k_ready(pin_of(id)), id)
  redis.call('ZREM', K_DUE, id)
  redis.call('ZREM', K_LOCKED, id)
  redis.call('DEL', k_lock(id), unpack(instance_keys(id, true)))
end

-- Drop roots whose retention expired from the listing indexes and reap their descendants; at most
-- 100 of each per call.
local function sweep_expired(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_IDX_EXPIRY, '-inf', now, 'LIMIT', 0, 100)) do
    local ttl = redis.call('PTTL', k_inst(id))
    if ttl == -2 then
      redis.call('ZREM', K_IDX_INSTANCES, id)
      redis.call('ZREM', k_idx_status('Completed'), id)
      redis.call('ZREM', k_idx_status('Failed'), id)
      reap_children(id)
      redis.call('DEL', k_children(id))
      redis.call('ZREM', K_IDX_EXPIRY, id)
    elseif ttl >= 0 then
      -- Not expired yet (the server expires a key only after its last millisecond): look again
      -- when it is. Dropping it here would leave its tree unreaped for good.
      redis.call('ZADD', K_IDX_EXPIRY, d(now + ttl + 1), id)
    else
      redis.call('ZREM', K_IDX_EXPIRY, id)
    end
  end
  for _, id in ipairs(redis.call('SPOP', K_IDX_REAP, 100)) do reap(id) end
end

-- Run the chores that are due (fetches call it): sweeps and reaping, then the next due time. Work
-- left over (a tree larger than a batch) is due now: the fetch reports it so (orch_fetch), and its
-- caller calls again at once instead of after its next poll, so a tree of any size is reaped
-- within moments of expiring, in calls of bounded work.
local function chores(now)
  local at = redis.call('GET', K_CHORES)
  if not at or at + 0 > now then return end
  sweep_expired(now)
  orphan_sweep(now)
  local nxt = nil
  if redis.call('SCARD', K_IDX_REAP) > 0 then nxt = now end
  for _, key in ipairs({ K_IDX_EXPIRY, K_ORPHANS }) do
    local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if h[2] and (nxt == nil or tonumber(h[2]) < nxt) then nxt = tonumber(h[2]) end
  end
  if nxt then redis.call('SET', K_CHORES, nxt) else redis.call('DEL', K_CHORES) end
end
