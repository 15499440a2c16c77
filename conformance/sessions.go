package conformance

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("sessions",
		test{"test_non_session_items_fetchable_by_any_worker", NonSessionItemsFetchableByAnyWorker},
		test{"test_session_item_claimable_when_no_session", SessionItemClaimableWhenNoSession},
		test{"test_session_affinity_same_worker", SessionAffinitySameWorker},
		test{"test_session_affinity_blocks_other_worker", SessionAffinityBlocksOtherWorker},
		test{"test_different_sessions_different_workers", DifferentSessionsDifferentWorkers},
		test{"test_mixed_session_and_non_session_items", MixedSessionAndNonSessionItems},
		test{"test_session_claimable_after_lock_expiry", SessionClaimableAfterLockExpiry},
		test{"test_none_session_skips_session_items", NoneSessionSkipsSessionItems},
		test{"test_some_session_returns_all_items", SomeSessionReturnsAllItems},
		test{"test_renew_session_lock_active", RenewSessionLockActive},
		test{"test_renew_session_lock_skips_idle", RenewSessionLockSkipsIdle},
		test{"test_renew_session_lock_no_sessions", RenewSessionLockNoSessions},
		test{"test_cleanup_removes_expired_no_items", CleanupRemovesExpiredNoItems},
		test{"test_cleanup_keeps_sessions_with_pending_items", CleanupKeepsSessionsWithPendingItems},
		test{"test_cleanup_keeps_active_sessions", CleanupKeepsActiveSessions},
		test{"test_ack_updates_session_last_activity", AckUpdatesSessionLastActivity},
		test{"test_renew_work_item_updates_session_last_activity", RenewWorkItemUpdatesSessionLastActivity},
		test{"test_session_items_processed_in_order", SessionItemsProcessedInOrder},
		test{"test_non_session_items_returned_with_session_config", NonSessionItemsReturnedWithSessionConfig},
		test{"test_shared_worker_id_any_caller_can_fetch_owned_session", SharedWorkerIDAnyCallerCanFetchOwnedSession},
		test{"test_concurrent_session_claim_only_one_wins", ConcurrentSessionClaimOnlyOneWins},
		test{"test_session_takeover_after_lock_expiry", SessionTakeoverAfterLockExpiry},
		test{"test_cleanup_then_new_item_recreates_session", CleanupThenNewItemRecreatesSession},
		test{"test_abandoned_session_item_retryable", AbandonedSessionItemRetryable},
		test{"test_abandoned_session_item_ignore_attempt", AbandonedSessionItemIgnoreAttempt},
		test{"test_renew_session_lock_after_expiry_returns_zero", RenewSessionLockAfterExpiryReturnsZero},
		test{"test_original_worker_reclaims_expired_session", OriginalWorkerReclaimsExpiredSession},
		test{"test_activity_lock_expires_session_lock_valid_same_worker_refetches", ActivityLockExpiresSessionLockValidSameWorkerRefetches},
		test{"test_session_lock_expires_new_owner_gets_redelivery", SessionLockExpiresNewOwnerGetsRedelivery},
		test{"test_session_lock_expires_same_worker_reacquires", SessionLockExpiresSameWorkerReacquires},
		test{"test_both_locks_expire_different_worker_claims", BothLocksExpireDifferentWorkerClaims},
		test{"test_session_lock_expires_activity_lock_valid_ack_succeeds", SessionLockExpiresActivityLockValidAckSucceeds},
		test{"test_session_lock_renewal_extends_past_original_timeout", SessionLockRenewalExtendsPastOriginalTimeout},
	)
}

// sessionItemLock is the work item lock most session tests fetch with (duroxide uses 5 s).
const sessionItemLock = 5 * time.Second

// sessionActivity is a session-bound ActivityExecute of instance/execution 1.
func sessionActivity(instance string, id uint64, session string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id,
		Name: "SessionActivity", Input: "{}", SessionID: ptr(session)}}
}

// sessionPlainActivity is an ActivityExecute of instance/execution 1 without a session.
func sessionPlainActivity(instance string, id uint64) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id,
		Name: "PlainActivity", Input: "{}"}}
}

// sessionCfg is a session fetch config for owner with a 30 s session lock.
func sessionCfg(owner string) *provider.SessionFetchConfig {
	return sessionCfgLock(owner, 30*time.Second)
}

// sessionCfgLock is a session fetch config for owner with the given session lock.
func sessionCfgLock(owner string, lock time.Duration) *provider.SessionFetchConfig {
	return &provider.SessionFetchConfig{OwnerID: owner, LockTimeout: lock}
}

// sessionFetch fetches a worker item (poll 0, DefaultOnly tags) with the given item lock and
// session config (nil: no session), failing the test on error.
func sessionFetch(t *testing.T, p provider.Provider, lock time.Duration, cfg *provider.SessionFetchConfig) *provider.LockedWorkItem {
	t.Helper()
	it, err := p.FetchWorkItem(ctx(t), lock, 0, cfg, provider.TagFilterDefaultOnly())
	if err != nil {
		t.Fatalf("fetch_work_item: %v", err)
	}
	return it
}

// sessionMustFetch is sessionFetch that fails the test when nothing is returned.
func sessionMustFetch(t *testing.T, p provider.Provider, lock time.Duration, cfg *provider.SessionFetchConfig) *provider.LockedWorkItem {
	t.Helper()
	it := sessionFetch(t, p, lock, cfg)
	if it == nil {
		t.Fatal("fetch_work_item: got nothing, want an item")
	}
	return it
}

// sessionAckNone acks a work item without a completion.
func sessionAckNone(t *testing.T, p provider.Provider, token string) {
	t.Helper()
	wantNoErr(t, p.AckWorkItem(ctx(t), token, nil), "ack_work_item")
}

// sessionClaim enqueues item, fetches it with cfg and acks it: cfg's owner then holds the session.
func sessionClaim(t *testing.T, p provider.Provider, item provider.WorkItem, cfg *provider.SessionFetchConfig) {
	t.Helper()
	mustEnqueueWorker(t, p, item)
	sessionAckNone(t, p, sessionMustFetch(t, p, sessionItemLock, cfg).LockToken)
}

// sessionOf returns the ActivityExecute of a fetched worker item.
func sessionOf(t *testing.T, it *provider.LockedWorkItem) provider.ActivityExecute {
	t.Helper()
	a, ok := it.Item.Kind.(provider.ActivityExecute)
	if !ok {
		t.Fatalf("fetch_work_item: got %s, want ActivityExecute", it.Item.Variant())
	}
	return a
}

// sessionWantSession fails the test unless the fetched item belongs to session ("" = no session).
func sessionWantSession(t *testing.T, it *provider.LockedWorkItem, session string) {
	t.Helper()
	got := sessionOf(t, it).SessionID
	switch {
	case session == "" && got != nil:
		t.Fatalf("fetched item has session %q, want a non-session item", *got)
	case session != "" && (got == nil || *got != session):
		t.Fatalf("fetched item session = %v, want %q", sessionStr(got), session)
	}
}

func sessionStr(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// sessionWantID fails the test unless the fetched item has activity id.
func sessionWantID(t *testing.T, it *provider.LockedWorkItem, id uint64) {
	t.Helper()
	if got := sessionOf(t, it).ID; got != id {
		t.Fatalf("fetched activity id = %d, want %d", got, id)
	}
}

// sessionWantNone fails the test when a fetch returned an item.
func sessionWantNone(t *testing.T, it *provider.LockedWorkItem, why string) {
	t.Helper()
	if it != nil {
		a := sessionOf(t, it)
		t.Fatalf("fetch_work_item: got activity %d (session %s), want nothing: %s", a.ID, sessionStr(a.SessionID), why)
	}
}

// sessionRenew calls renew_session_lock for owner and returns the count.
func sessionRenew(t *testing.T, p provider.Provider, owner string, extend, idle time.Duration) int {
	t.Helper()
	n, err := p.RenewSessionLock(ctx(t), []string{owner}, extend, idle)
	wantNoErr(t, err, "renew_session_lock")
	return n
}

// sessionCleanup calls cleanup_orphaned_sessions with a 300 s idle timeout and returns the count.
func sessionCleanup(t *testing.T, p provider.Provider) int {
	t.Helper()
	n, err := p.CleanupOrphanedSessions(ctx(t), 300*time.Second)
	wantNoErr(t, err, "cleanup_orphaned_sessions")
	return n
}

// NonSessionItemsFetchableByAnyWorker proves a plain item is returned to a session-aware fetch.
func NonSessionItemsFetchableByAnyWorker(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionPlainActivity("inst-1", 1))
	sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
}

// SessionItemClaimableWhenNoSession proves an item of an unclaimed session is returned with its session id.
func SessionItemClaimableWhenNoSession(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "session-1"))
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A")), "session-1")
}

// SessionAffinitySameWorker proves the owner of a session gets its later items.
func SessionAffinitySameWorker(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
}

// SessionAffinityBlocksOtherWorker proves another owner cannot fetch items of an owned session.
func SessionAffinityBlocksOtherWorker(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("worker-B")),
		"session-1 is owned by worker-A")
}

// DifferentSessionsDifferentWorkers proves two sessions can be owned by two owners at once.
func DifferentSessionsDifferentWorkers(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	sessionClaim(t, p, sessionActivity("inst-2", 1, "session-2"), sessionCfg("worker-B"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	mustEnqueueWorker(t, p, sessionActivity("inst-2", 2, "session-2"))
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A")), "session-1")
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B")), "session-2")
}

// MixedSessionAndNonSessionItems proves a non-owner skips an owned session's item and gets the plain item behind it.
func MixedSessionAndNonSessionItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	mustEnqueueWorker(t, p, sessionPlainActivity("inst-2", 1))
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B")), "")
}

// SessionClaimableAfterLockExpiry proves another owner can claim a session whose lock expired.
func SessionClaimableAfterLockExpiry(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfgLock("worker-A", 50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B"))
}

// NoneSessionSkipsSessionItems proves a fetch without session config never returns session items.
func NoneSessionSkipsSessionItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "session-1"))
	mustEnqueueWorker(t, p, sessionPlainActivity("inst-2", 2))

	it := sessionMustFetch(t, p, sessionItemLock, nil)
	sessionWantSession(t, it, "")
	sessionWantID(t, it, 2)
	sessionAckNone(t, p, it.LockToken)

	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, nil), "session items are invisible without a session config")
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A")), "session-1")
}

// SomeSessionReturnsAllItems proves one owner can take items of many sessions and plain items, in FIFO order.
func SomeSessionReturnsAllItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "sess-A"))
	mustEnqueueWorker(t, p, sessionActivity("inst-2", 2, "sess-B"))
	mustEnqueueWorker(t, p, sessionActivity("inst-3", 3, "sess-C"))
	mustEnqueueWorker(t, p, sessionPlainActivity("inst-4", 4))
	for want := uint64(1); want <= 4; want++ {
		it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("shared-proc"))
		sessionWantID(t, it, want)
		sessionAckNone(t, p, it.LockToken)
	}
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("shared-proc")), "queue should be empty")
}

// RenewSessionLockActive proves renew_session_lock extends every active session of the owner.
func RenewSessionLockActive(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfgLock("worker-A", 5*time.Second))
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, 300*time.Second); n != 1 {
		t.Fatalf("renew_session_lock = %d, want 1", n)
	}
	sessionClaim(t, p, sessionActivity("inst-2", 1, "session-2"), sessionCfg("worker-A"))
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, 300*time.Second); n != 2 {
		t.Fatalf("renew_session_lock = %d, want 2", n)
	}
}

// RenewSessionLockSkipsIdle proves renew_session_lock skips sessions idle longer than idle_timeout.
func RenewSessionLockSkipsIdle(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, 0); n != 0 {
		t.Fatalf("renew_session_lock with idle timeout 0 = %d, want 0", n)
	}
}

// RenewSessionLockNoSessions proves renew_session_lock for an owner without sessions returns 0.
func RenewSessionLockNoSessions(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, 300*time.Second); n != 0 {
		t.Fatalf("renew_session_lock = %d, want 0", n)
	}
}

// CleanupRemovesExpiredNoItems proves cleanup deletes an expired session without queued items.
func CleanupRemovesExpiredNoItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfgLock("worker-A", 50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	if n := sessionCleanup(t, p); n != 1 {
		t.Fatalf("cleanup_orphaned_sessions = %d, want 1", n)
	}
}

// CleanupKeepsSessionsWithPendingItems proves cleanup keeps an expired session that still has queued items.
func CleanupKeepsSessionsWithPendingItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfgLock("worker-A", 50*time.Millisecond))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "session-1"))
	time.Sleep(100 * time.Millisecond)
	if n := sessionCleanup(t, p); n != 0 {
		t.Fatalf("cleanup_orphaned_sessions = %d, want 0 (session has a pending item)", n)
	}
}

// CleanupKeepsActiveSessions proves cleanup keeps a session whose lock has not expired.
func CleanupKeepsActiveSessions(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfgLock("worker-A", 300*time.Second))
	if n := sessionCleanup(t, p); n != 0 {
		t.Fatalf("cleanup_orphaned_sessions = %d, want 0 (session is active)", n)
	}
}

// AckUpdatesSessionLastActivity proves acking a session item refreshes the session's last activity.
func AckUpdatesSessionLastActivity(t *testing.T, f Factory) {
	sessionLastActivityRefreshedBy(t, f, func(p provider.Provider, token string) {
		completion := activityCompleted("inst-1", 1, "ok")
		wantNoErr(t, p.AckWorkItem(ctx(t), token, &completion), "ack_work_item")
	})
}

// RenewWorkItemUpdatesSessionLastActivity proves renewing a session item's lock refreshes the session's last activity.
func RenewWorkItemUpdatesSessionLastActivity(t *testing.T, f Factory) {
	sessionLastActivityRefreshedBy(t, f, func(p provider.Provider, token string) {
		wantNoErr(t, p.RenewWorkItemLock(ctx(t), token, 30*time.Second), "renew_work_item_lock")
	})
}

// sessionLastActivityRefreshedBy claims a session by fetching its item, waits past a 200 ms idle
// window, calls touch with the item's token, and expects renew_session_lock with that idle window to count 1.
func sessionLastActivityRefreshedBy(t *testing.T, f Factory, touch func(p provider.Provider, token string)) {
	t.Helper()
	const idle = 200 * time.Millisecond
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "session-1"))
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	time.Sleep(idle + 50*time.Millisecond)
	touch(p, it.LockToken)
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, idle); n != 1 {
		t.Fatalf("renew_session_lock(idle %v) = %d, want 1: the session's last activity was not refreshed", idle, n)
	}
}

// SessionItemsProcessedInOrder proves a session's items are fetched in FIFO order.
func SessionItemsProcessedInOrder(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	for id := uint64(1); id <= 3; id++ {
		mustEnqueueWorker(t, p, sessionActivity("inst-1", id, "session-1"))
	}
	for want := uint64(1); want <= 3; want++ {
		it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
		sessionWantID(t, it, want)
		sessionAckNone(t, p, it.LockToken)
	}
}

// NonSessionItemsReturnedWithSessionConfig proves a session owner still gets plain items.
func NonSessionItemsReturnedWithSessionConfig(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "session-1"), sessionCfg("worker-A"))
	mustEnqueueWorker(t, p, sessionPlainActivity("inst-2", 1))
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A")), "")
}

// SharedWorkerIDAnyCallerCanFetchOwnedSession proves ownership is per owner id, shared by every caller using it, and excludes other owner ids.
func SharedWorkerIDAnyCallerCanFetchOwnedSession(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "shared-sess"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "shared-sess"))
	for want := uint64(1); want <= 2; want++ {
		it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("process-1"))
		sessionWantID(t, it, want)
		sessionAckNone(t, p, it.LockToken)
	}
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 3, "shared-sess"))
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("process-2")),
		"the session is owned by process-1")
}

// ConcurrentSessionClaimOnlyOneWins proves a second owner gets nothing while the first holds the session.
func ConcurrentSessionClaimOnlyOneWins(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "contested-sess"))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "contested-sess"))
	a := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("worker-B")),
		"worker-A holds the session")
	sessionAckNone(t, p, a.LockToken)
}

// SessionTakeoverAfterLockExpiry proves another owner takes over a session whose lock expired.
func SessionTakeoverAfterLockExpiry(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "takeover-sess"), sessionCfgLock("worker-A", 50*time.Millisecond))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "takeover-sess"))
	time.Sleep(100 * time.Millisecond)
	sessionWantSession(t, sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B")), "takeover-sess")
}

// CleanupThenNewItemRecreatesSession proves a session removed by cleanup is claimed afresh by a later item.
func CleanupThenNewItemRecreatesSession(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "ephemeral-sess"), sessionCfgLock("worker-A", 50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	if n := sessionCleanup(t, p); n != 1 {
		t.Fatalf("cleanup_orphaned_sessions = %d, want 1", n)
	}
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "ephemeral-sess"))
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B"))
	sessionWantSession(t, it, "ephemeral-sess")
	sessionWantID(t, it, 2)
}

// AbandonedSessionItemRetryable proves an abandoned session item is redelivered with attempt 2.
func AbandonedSessionItemRetryable(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "retry-sess"))
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	if it.AttemptCount != 1 {
		t.Fatalf("first fetch attempt_count = %d, want 1", it.AttemptCount)
	}
	sessionWantID(t, it, 1)
	wantNoErr(t, p.AbandonWorkItem(ctx(t), it.LockToken, 0, false), "abandon_work_item")

	it = sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	if it.AttemptCount != 2 {
		t.Fatalf("refetch attempt_count = %d, want 2", it.AttemptCount)
	}
	sessionWantID(t, it, 1)
	sessionAckNone(t, p, it.LockToken)
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("worker-A")), "the item was acked")
}

// AbandonedSessionItemIgnoreAttempt proves abandoning with ignore_attempt does not raise the attempt count.
func AbandonedSessionItemIgnoreAttempt(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "ignore-sess"))
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	if it.AttemptCount != 1 {
		t.Fatalf("first fetch attempt_count = %d, want 1", it.AttemptCount)
	}
	wantNoErr(t, p.AbandonWorkItem(ctx(t), it.LockToken, time.Millisecond, true), "abandon_work_item(ignore_attempt)")
	time.Sleep(10 * time.Millisecond)
	it = sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	if it.AttemptCount != 1 {
		t.Fatalf("refetch attempt_count = %d, want 1 (ignore_attempt)", it.AttemptCount)
	}
	sessionAckNone(t, p, it.LockToken)
}

// RenewSessionLockAfterExpiryReturnsZero proves an expired session lock is not renewed.
func RenewSessionLockAfterExpiryReturnsZero(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "expired-sess"), sessionCfgLock("worker-A", 50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	if n := sessionRenew(t, p, "worker-A", 30*time.Second, 300*time.Second); n != 0 {
		t.Fatalf("renew_session_lock = %d, want 0 (session lock expired)", n)
	}
}

// OriginalWorkerReclaimsExpiredSession proves the former owner can re-claim its expired session.
func OriginalWorkerReclaimsExpiredSession(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "reclaim-sess"), sessionCfgLock("worker-A", 50*time.Millisecond))
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "reclaim-sess"))
	time.Sleep(100 * time.Millisecond)
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	sessionWantID(t, it, 2)
	sessionWantSession(t, it, "reclaim-sess")
}

// ActivityLockExpiresSessionLockValidSameWorkerRefetches proves an expired item lock redelivers to the session owner only (attempt 2).
func ActivityLockExpiresSessionLockValidSameWorkerRefetches(t *testing.T, f Factory) {
	const itemLock = 500 * time.Millisecond
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "sticky-sess"))
	sessionMustFetch(t, p, itemLock, sessionCfg("worker-A"))
	time.Sleep(itemLock + 100*time.Millisecond)

	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("worker-B")),
		"the session is still owned by worker-A")
	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
	sessionWantID(t, it, 1)
	if it.AttemptCount != 2 {
		t.Fatalf("redelivery attempt_count = %d, want 2", it.AttemptCount)
	}
	sessionAckNone(t, p, it.LockToken)
}

// SessionLockExpiresNewOwnerGetsRedelivery proves the new owner of an expired session gets new and redelivered items.
func SessionLockExpiresNewOwnerGetsRedelivery(t *testing.T, f Factory) {
	const sessionLock = 200 * time.Millisecond
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "takeover2-sess"))
	a := sessionMustFetch(t, p, 5*time.Second, sessionCfgLock("worker-A", sessionLock))
	time.Sleep(sessionLock + 100*time.Millisecond)

	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "takeover2-sess"))
	cfgB := sessionCfg("worker-B")
	b := sessionMustFetch(t, p, sessionItemLock, cfgB)
	sessionWantID(t, b, 2)
	sessionWantSession(t, b, "takeover2-sess")
	sessionAckNone(t, p, b.LockToken)

	_ = p.AbandonWorkItem(ctx(t), a.LockToken, 0, false) // duroxide ignores this result too

	b = sessionMustFetch(t, p, sessionItemLock, cfgB)
	sessionWantID(t, b, 1)
	if b.AttemptCount != 2 {
		t.Fatalf("redelivery attempt_count = %d, want 2", b.AttemptCount)
	}
	sessionAckNone(t, p, b.LockToken)
}

// SessionLockExpiresSameWorkerReacquires proves an owner whose session lock expired re-acquires it on its next fetch.
func SessionLockExpiresSameWorkerReacquires(t *testing.T, f Factory) {
	const sessionLock = 200 * time.Millisecond
	p := f.CreateProvider(t)
	cfgA := sessionCfgLock("worker-A", sessionLock)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "reacq-sess"), cfgA)
	time.Sleep(sessionLock + 100*time.Millisecond)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "reacq-sess"))
	it := sessionMustFetch(t, p, sessionItemLock, cfgA)
	sessionWantID(t, it, 2)
	sessionWantSession(t, it, "reacq-sess")
	sessionAckNone(t, p, it.LockToken)
}

// BothLocksExpireDifferentWorkerClaims proves another owner claims the item and session once both locks expired.
func BothLocksExpireDifferentWorkerClaims(t *testing.T, f Factory) {
	const lock = 200 * time.Millisecond
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "both-expire-sess"))
	sessionMustFetch(t, p, lock, sessionCfgLock("worker-A", lock))
	time.Sleep(lock + 200*time.Millisecond)

	it := sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-B"))
	sessionWantID(t, it, 1)
	sessionWantSession(t, it, "both-expire-sess")
	if it.AttemptCount != 2 {
		t.Fatalf("redelivery attempt_count = %d, want 2", it.AttemptCount)
	}
	sessionAckNone(t, p, it.LockToken)
}

// SessionLockExpiresActivityLockValidAckSucceeds proves an item can be acked after its session lock expired while its own lock is still valid.
func SessionLockExpiresActivityLockValidAckSucceeds(t *testing.T, f Factory) {
	const sessionLock = 200 * time.Millisecond
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, sessionActivity("inst-1", 1, "sess-expires"))
	it := sessionMustFetch(t, p, 30*time.Second, sessionCfgLock("worker-A", sessionLock))
	time.Sleep(sessionLock + 100*time.Millisecond)
	completion := activityCompleted("inst-1", 1, "done")
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, &completion), "ack_work_item after the session lock expired")
}

// SessionLockRenewalExtendsPastOriginalTimeout proves a renewed session stays owned past its original expiry.
func SessionLockRenewalExtendsPastOriginalTimeout(t *testing.T, f Factory) {
	const sessionLock = time.Second
	p := f.CreateProvider(t)
	sessionClaim(t, p, sessionActivity("inst-1", 1, "renew-ext-sess"), sessionCfgLock("worker-A", sessionLock))

	time.Sleep(600 * time.Millisecond)
	if n := sessionRenew(t, p, "worker-A", sessionLock, 300*time.Second); n != 1 {
		t.Fatalf("renew_session_lock = %d, want 1", n)
	}
	time.Sleep(400 * time.Millisecond)

	mustEnqueueWorker(t, p, sessionActivity("inst-1", 2, "renew-ext-sess"))
	sessionWantNone(t, sessionFetch(t, p, sessionItemLock, sessionCfg("worker-B")),
		"worker-A renewed the session past its original timeout")
	sessionMustFetch(t, p, sessionItemLock, sessionCfg("worker-A"))
}
