package redisprovider

// Worker side: owned by the worker-side engineer; these stubs are replaced.

import (
	"context"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func notYet(op string) error { return provider.NewPermanentError(op, "not implemented yet") }

// EnqueueForWorker implements provider.Provider.
func (p *Provider) EnqueueForWorker(ctx context.Context, item provider.WorkItem) error {
	return notYet("enqueue_for_worker")
}

// FetchWorkItem implements provider.Provider.
func (p *Provider) FetchWorkItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter) (*provider.LockedWorkItem, error) {
	return nil, notYet("fetch_work_item")
}

// AckWorkItem implements provider.Provider.
func (p *Provider) AckWorkItem(ctx context.Context, lockToken string, completion *provider.WorkItem) error {
	return notYet("ack_work_item")
}

// RenewWorkItemLock implements provider.Provider.
func (p *Provider) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	return notYet("renew_work_item_lock")
}

// AbandonWorkItem implements provider.Provider.
func (p *Provider) AbandonWorkItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error {
	return notYet("abandon_work_item")
}

// RenewSessionLock implements provider.Provider.
func (p *Provider) RenewSessionLock(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	return 0, notYet("renew_session_lock")
}

// CleanupOrphanedSessions implements provider.Provider.
func (p *Provider) CleanupOrphanedSessions(ctx context.Context, idleTimeout time.Duration) (int, error) {
	return 0, notYet("cleanup_orphaned_sessions")
}
