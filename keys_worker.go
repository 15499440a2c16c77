package dxredis

import "strconv"

// Worker-queue keys (P = partition prefix, id = item id (WorkItemID of its sequence number n from
// P meta's seq), tk = tag key, sid = session id, owner = session owner id, inst = instance id).
// Built in Lua by scripts/lib_worker.lua; TestWorkerLuaKeysMatchGo checks that both sides agree.
//
// A tag key names an item's tag without ambiguity when it is followed by more text: "-" for
// untagged items, "<byte length>:<tag>" otherwise ("gpu" -> "3:gpu"), see WorkTagKey.
//
//	P wq:m:<id>             HASH    item: j (ActivityExecute JSON) i (instance) e (execution) a (activity id)
//	                                s (session id, "" none) t (tag key) n (attempts) c (enqueued ms)
//	                                k (lock token "<nonce>.<id>") u (locked_until ms) — k, u only while locked
//	                                x ("1": the item's wq:inst entry lists it alone) r ("1": counted in
//	                                cap:run:<t>, see Caps)
//	P wq:q:<tk>             ZSET    the schedule of session-less items with tag key tk, whatever their
//	                                state: score = when a fetch may take the item: its visible time
//	                                while unlocked (enqueue ms, or the end of an abandon's delay), its
//	                                lock's expiry (u) while locked; ties broken by id (FIFO)
//	P wq:tks                SET     tag keys other than "-" that items were enqueued with (TagFilter Any
//	                                reads "-" and these; it drops those without items while no session
//	                                items exist)
//	P wq:inst:<inst>        HASH    the instance's items: "<execution>:<activity id>" -> "id [id...]"
//	P wq:sess:<sid>         HASH    session: o (owner) u (locked_until ms) l (last_activity ms)
//	P wq:sitems:<tk>:<sid>  ZSET    visible unlocked items of session sid with tag key tk, score = n
//	P wq:shold              ZSET    session items that are locked (score u) or delayed (score visible
//	                                ms); session-aware fetches move the due ones back to their group
//	P wq:stags:<sid>        SET     tag keys whose wq:sitems set of sid may be non-empty
//	P wq:scount             HASH    session id -> number of queued items of the session
//	P wq:sfree:<tk>         ZSET    claimable sessions (no owner, or released after expiry) with visible
//	                                items of tk, score = n of their oldest such item
//	P wq:sown:<tk>:<owner>  ZSET    sessions held by owner with visible items of tk, score = oldest n
//	P wq:sowned             ZSET    sessions whose items are indexed under their owner, score = locked_until
//	                                ms (fetch releases them to wq:sfree:* once expired)
//	P wq:sidle              ZSET    sessions with a record and no queued items, score = locked_until ms
//	                                (what CleanupOrphanedSessions deletes once expired)
//	P wq:owner:<owner>      SET     session ids owner holds (members may be stale; checked against wq:sess)
//	P wq:wake:p:<tk>        LIST    wake tokens for fetchers of session-less items with tag key tk
//	P wq:wake:s:<tk>        LIST    wake tokens for session-aware fetchers: items of claimable sessions
//	P wq:wake:o:<tk>:<o>    LIST    wake tokens for owner o's fetchers: items of sessions o holds
//	                                (tk "*" for TagFilter Any fetchers; every wake-up also goes there)
//	P wq:waiting            ZSET    the wq:wake lists fetchers may be blocked on, by their suffix after
//	                                "wq:wake:" ("p:-", "o:-:<o>", ...), score = until when ms: an empty
//	                                fetch registers its lists; a wake-up pushes a token only to lists
//	                                registered until now or later (stale members: removed when a new
//	                                one is added; the set expires once nobody registered for a while)
//	P wq:dead               ZSET    dead letters: items parked by a runtime that holds poison
//	                                (dx.Options.OnPoison), score = when parked (ms); the item keeps
//	                                its hash, with field d "<ms> <ErrorDetails JSON>", and is in no
//	                                schedule or group (work_dead; redisprovider, dead.go)
//	P caps                  HASH    caps per tag (partition 0 only): tk -> "<concurrency> <rate/s> <burst>"
//	                                (0: none); redisprovider.SetTagLimits
//	P cap:run:<tk>          ZSET    items of tk counted against its concurrency cap, score = their lock's
//	                                expiry (u): the running set (an expired member frees its slot)
//	P cap:rate:<tk>         HASH    tk's token bucket: t (tokens) at (ms of the last start); expires once
//	                                it would be full again
//
// # Caps
//
// A tag's caps are enforced by work_fetch in the partition that holds them, partition 0: with
// several partitions redisprovider places the session-less items of a capped tag there
// (workPartition), so one script sees the caps, the running set and the items, and a fetch
// starts an item only while the running set (its unexpired members) is below the concurrency cap
// and the bucket holds a token. A capped head is skipped like one not due yet (the reply's next
// time is when a slot or a token comes free); ack, abandon and delete remove a counted item (field
// r "1") from the running set and wake a fetcher of its tag; renew moves its score. A fetch loads
// the caps hash only when redisprovider says caps exist (work_fetch's caps), so a namespace
// without caps runs no command more. Session items are not capped.
//
// Worker fetchers long-poll on the wq:wake lists their tag filter and owner select, so the wake-up for an item reaches a fetcher that can take it.
//
// A session-bound item is never in a wq:q schedule, so a fetch without a session config never sees it,
// and a fetch reads only the heads of the sets its tag filter and owner select: its cost does not
// grow with the items those filters exclude. Nothing gates or sweeps the schedules: an expired
// lock or an ended delay is a due head like a visible item, taken in the order items became
// takeable (a session-less item abandoned without a delay is scored at its enqueue time again and
// keeps its place). Session items keep their order by sequence number, and a session group
// competes with the schedules' due heads by sequence number.
//
// Invariants (admin_fsck.lua checks them; codes in brackets, keys.go lists the others):
//   - A worker item is in exactly one place: wq:dead when it is a dead letter (field d); else
//     wq:q:<its tk> when session-less; else its session
//     group wq:sitems:<tk>:<sid> when ready, wq:shold when locked or delayed (so a locked
//     session item is in wq:shold) [item_placement]; a held lock is scored at its u
//     [item_lock_expiry_mismatch]; wq:inst:<inst> lists it under its execution and activity
//     [item_unlisted]; a tagged item's tag key is in wq:tks [item_tag_unlisted].
//   - The schedules, wq:shold and the session groups list only existing items
//     [item_index_without_item].

// Wake classes and the tag key of TagFilter Any, for WorkWake.
const (
	WorkWakePlain   = "p" // session-less items
	WorkWakeSession = "s" // items of claimable sessions
	WorkWakeOwned   = "o" // items of sessions an owner holds
	WorkTagKeyAny   = "*" // fetchers with TagFilter Any
)

// WorkTagKey is the tag key of a tag ("" = untagged).
func WorkTagKey(tag string) string {
	if tag == "" {
		return "-"
	}
	return strconv.Itoa(len(tag)) + ":" + tag
}

// WorkItemID is the id of the worker item with sequence number n: n with its digit count in
// front as a letter ("a7", "b12", "c123"), so that ids sort as strings in sequence order.
func WorkItemID(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return string(rune('a'+len(s)-1)) + s
}

// WorkItem is the hash of the worker item with sequence number n.
func (k Keyspace) WorkItem(partition int, n uint64) string {
	return k.Prefix(partition) + "wq:m:" + WorkItemID(n)
}

// WorkSchedule is the schedule of session-less items tagged tag ("" = untagged).
func (k Keyspace) WorkSchedule(partition int, tag string) string {
	return k.Prefix(partition) + "wq:q:" + WorkTagKey(tag)
}

// WorkTagKeys is the set of tag keys (besides "-") items were enqueued with.
func (k Keyspace) WorkTagKeys(partition int) string { return k.Prefix(partition) + "wq:tks" }

// SessionsHeld is the set of locked or delayed session items, by lock expiry or visible time.
func (k Keyspace) SessionsHeld(partition int) string { return k.Prefix(partition) + "wq:shold" }

// WorkInstance is an instance's index of worker items ("<execution>:<activity id>" -> sequence numbers).
func (k Keyspace) WorkInstance(id string) string { return k.inst("wq:inst:", id) }

// Session is a session's record hash.
func (k Keyspace) Session(partition int, sid string) string {
	return k.Prefix(partition) + "wq:sess:" + sid
}

// SessionItems is the ready set of session sid's items tagged tag ("" = untagged).
func (k Keyspace) SessionItems(partition int, tag, sid string) string {
	return k.Prefix(partition) + "wq:sitems:" + WorkTagKey(tag) + ":" + sid
}

// SessionTags is the set of tag keys session sid may have ready items under.
func (k Keyspace) SessionTags(partition int, sid string) string {
	return k.Prefix(partition) + "wq:stags:" + sid
}

// SessionCounts counts queued items per session.
func (k Keyspace) SessionCounts(partition int) string { return k.Prefix(partition) + "wq:scount" }

// SessionsFree indexes claimable sessions with ready items tagged tag.
func (k Keyspace) SessionsFree(partition int, tag string) string {
	return k.Prefix(partition) + "wq:sfree:" + WorkTagKey(tag)
}

// SessionsOwnedBy indexes owner's sessions with ready items tagged tag.
func (k Keyspace) SessionsOwnedBy(partition int, tag, owner string) string {
	return k.Prefix(partition) + "wq:sown:" + WorkTagKey(tag) + ":" + owner
}

// SessionsOwned is the set of sessions indexed under their owner, by lock expiry.
func (k Keyspace) SessionsOwned(partition int) string { return k.Prefix(partition) + "wq:sowned" }

// SessionsIdle is the set of sessions without queued items, by lock expiry.
func (k Keyspace) SessionsIdle(partition int) string { return k.Prefix(partition) + "wq:sidle" }

// OwnerSessions is the set of sessions owner holds.
func (k Keyspace) OwnerSessions(partition int, owner string) string {
	return k.Prefix(partition) + "wq:owner:" + owner
}

// WorkWaiting is the registry of wake lists worker fetchers may be blocked on.
func (k Keyspace) WorkWaiting(partition int) string { return k.Prefix(partition) + "wq:waiting" }

// WorkWake is a wake list worker fetchers block on: class WorkWakePlain, WorkWakeSession or
// WorkWakeOwned (owner is used only for that one), tag key tk (WorkTagKey or WorkTagKeyAny).
func (k Keyspace) WorkWake(partition int, class, tk, owner string) string {
	key := k.Prefix(partition) + "wq:wake:" + class + ":" + tk
	if class == WorkWakeOwned {
		key += ":" + owner
	}
	return key
}
