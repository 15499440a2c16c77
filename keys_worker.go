package dxredis

import "strconv"

// Worker-queue keys (P = partition prefix, s = item sequence number from P seq, tk = tag key,
// sid = session id, owner = session owner id, id = instance id). Built in Lua by
// scripts/lib_worker.lua; TestWorkerLuaKeysMatchGo checks that both sides agree.
//
// A tag key names an item's tag without ambiguity when it is followed by more text: "-" for
// untagged items, "<byte length>:<tag>" otherwise ("gpu" -> "3:gpu"), see WorkTagKey.
//
//	P wq:m:<s>              HASH    item: j (ActivityExecute JSON) i (instance) e (execution) a (activity id)
//	                                s (session id, "" none) t (tag key) n (attempts) c (enqueued ms)
//	                                k (lock token "<nonce>.<s>") u (locked_until ms) — k, u only while locked
//	                                x ("1": the item's wq:inst entry lists it alone)
//	P wq:ready:<tk>         ZSET    visible unlocked session-less items with tag key tk, score = s
//	P wq:due                ZSET    items abandoned with a delay, score = visible_at ms
//	P wq:locked             ZSET    locked items, score = locked_until ms
//	P wq:tags               HASH    tag key -> number of queued items with it (the keys TagFilter Any scans)
//	P wq:inst:<id>          HASH    the instance's items: "<execution>:<activity id>" -> "s [s...]"
//	P wq:sess:<sid>         HASH    session: o (owner) u (locked_until ms) l (last_activity ms)
//	P wq:sitems:<tk>:<sid>  ZSET    visible unlocked items of session sid with tag key tk, score = s
//	P wq:stags:<sid>        SET     tag keys whose wq:sitems set of sid may be non-empty
//	P wq:scount             HASH    session id -> number of queued items of the session
//	P wq:sfree:<tk>         ZSET    claimable sessions (no owner, or released after expiry) with visible
//	                                items of tk, score = s of their oldest such item
//	P wq:sown:<tk>:<owner>  ZSET    sessions held by owner with visible items of tk, score = oldest s
//	P wq:sowned             ZSET    sessions whose items are indexed under their owner, score = locked_until
//	                                ms (fetch releases them to wq:sfree:* once expired)
//	P wq:next               STRING  housekeeping gate: a time at or before every score of wq:sowned,
//	                                wq:locked and wq:due (99999999999999 when empty); worker fetches
//	                                scan those sets only once it is due
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
//
// Worker fetchers long-poll on the wq:wake lists their tag filter and owner select, so the wake-up for an item reaches a fetcher that can take it.
//
// A session-bound item is never in a wq:ready set, so a fetch without a session config never sees it,
// and a fetch reads only the heads of the sets its tag filter and owner select: its cost does not
// grow with the items those filters exclude.

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

// WorkItem is worker item s's hash.
func (k Keyspace) WorkItem(partition int, s uint64) string {
	return k.Prefix(partition) + "wq:m:" + strconv.FormatUint(s, 10)
}

// WorkReady is the ready set of session-less items tagged tag ("" = untagged).
func (k Keyspace) WorkReady(partition int, tag string) string {
	return k.Prefix(partition) + "wq:ready:" + WorkTagKey(tag)
}

// WorkDue is the set of delayed (abandoned with a delay) worker items.
func (k Keyspace) WorkDue(partition int) string { return k.Prefix(partition) + "wq:due" }

// WorkLocked is the set of locked worker items by lock expiry.
func (k Keyspace) WorkLocked(partition int) string { return k.Prefix(partition) + "wq:locked" }

// WorkTags counts queued worker items per tag key.
func (k Keyspace) WorkTags(partition int) string { return k.Prefix(partition) + "wq:tags" }

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
