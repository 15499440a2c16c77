package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// countingProvider wraps the provider the dispatchers use (the dx runtime's, or the fake
// runtime's): it counts every provider call they make (round trips at the interface: a fetch
// that blocks is one call) and lets a workload observe turns without asking Redis anything.
// The load generator's own starts go to the unwrapped provider and are not counted.
//
// Embedding hides the wrapped provider's optional extensions from type assertions: exposed returns
// the wrapper with the runtime extensions forwarded, counted, when the wrapped provider has them.
type countingProvider struct {
	provider.Provider
	calls atomic.Int64

	// Observers, all optional; they run on the dispatcher's goroutine.
	fetched    func(item *provider.LockedOrchestrationItem, fetchStart, at time.Time)
	acked      func(ack *provider.OrchestrationAck, f fetchInfo, ackStart, done time.Time)
	workAcked  func()
	failed     func(op string, err error)
	fetchTimes sync.Map // lock token -> fetchInfo, while acked is set

	noBatchFetch bool // hide provider.WorkBatchFetcher (dxbench -no-batch-fetch)
}

// fetchInfo is what an orchestration fetch returned, kept until its ack.
type fetchInfo struct {
	start, at     time.Time
	historyEvents int
	instance      string
}

func (c *countingProvider) note(op string, err error) error {
	c.calls.Add(1)
	if err != nil && c.failed != nil && !errors.Is(err, context.Canceled) {
		c.failed(op, err)
	}
	return err
}

func (c *countingProvider) FetchOrchestrationItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	start := time.Now()
	item, err := c.Provider.FetchOrchestrationItem(ctx, lockTimeout, pollTimeout, filter)
	at := time.Now()
	if err := c.note("fetch_orchestration_item", err); err != nil {
		return item, err
	}
	c.fetchedItem(item, start, at)
	return item, nil
}

func (c *countingProvider) AckOrchestrationItem(ctx context.Context, lockToken string, ack provider.OrchestrationAck) error {
	start := time.Now()
	err := c.note("ack_orchestration_item", c.Provider.AckOrchestrationItem(ctx, lockToken, ack))
	c.ackedTurn(lockToken, &ack, err, start, time.Now())
	return err
}

func (c *countingProvider) AbandonOrchestrationItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error {
	c.fetchTimes.Delete(lockToken)
	return c.note("abandon_orchestration_item", c.Provider.AbandonOrchestrationItem(ctx, lockToken, delay, ignoreAttempt))
}

func (c *countingProvider) RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	return c.note("renew_orchestration_item_lock", c.Provider.RenewOrchestrationItemLock(ctx, lockToken, extendFor))
}

func (c *countingProvider) Read(ctx context.Context, instance string) ([]provider.Event, error) {
	h, err := c.Provider.Read(ctx, instance)
	return h, c.note("read", err)
}

func (c *countingProvider) ReadWithExecution(ctx context.Context, instance string, executionID uint64) ([]provider.Event, error) {
	h, err := c.Provider.ReadWithExecution(ctx, instance, executionID)
	return h, c.note("read_with_execution", err)
}

func (c *countingProvider) AppendWithExecution(ctx context.Context, instance string, executionID uint64, events []provider.Event) error {
	return c.note("append_with_execution", c.Provider.AppendWithExecution(ctx, instance, executionID, events))
}

func (c *countingProvider) EnqueueForWorker(ctx context.Context, item provider.WorkItem) error {
	return c.note("enqueue_for_worker", c.Provider.EnqueueForWorker(ctx, item))
}

func (c *countingProvider) FetchWorkItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter) (*provider.LockedWorkItem, error) {
	item, err := c.Provider.FetchWorkItem(ctx, lockTimeout, pollTimeout, session, tags)
	return item, c.note("fetch_work_item", err)
}

func (c *countingProvider) AckWorkItem(ctx context.Context, lockToken string, completion *provider.WorkItem) error {
	err := c.note("ack_work_item", c.Provider.AckWorkItem(ctx, lockToken, completion))
	if err == nil && completion != nil && c.workAcked != nil {
		c.workAcked()
	}
	return err
}

func (c *countingProvider) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	return c.note("renew_work_item_lock", c.Provider.RenewWorkItemLock(ctx, lockToken, extendFor))
}

func (c *countingProvider) AbandonWorkItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error {
	return c.note("abandon_work_item", c.Provider.AbandonWorkItem(ctx, lockToken, delay, ignoreAttempt))
}

func (c *countingProvider) RenewSessionLock(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	n, err := c.Provider.RenewSessionLock(ctx, ownerIDs, extendFor, idleTimeout)
	return n, c.note("renew_session_lock", err)
}

func (c *countingProvider) CleanupOrphanedSessions(ctx context.Context, idleTimeout time.Duration) (int, error) {
	n, err := c.Provider.CleanupOrphanedSessions(ctx, idleTimeout)
	return n, c.note("cleanup_orphaned_sessions", err)
}

func (c *countingProvider) EnqueueForOrchestrator(ctx context.Context, item provider.WorkItem, delay time.Duration) error {
	return c.note("enqueue_for_orchestrator", c.Provider.EnqueueForOrchestrator(ctx, item, delay))
}

func (c *countingProvider) GetCustomStatus(ctx context.Context, instance string, lastSeenVersion uint64) (*provider.CustomStatus, error) {
	s, err := c.Provider.GetCustomStatus(ctx, instance, lastSeenVersion)
	return s, c.note("get_custom_status", err)
}

func (c *countingProvider) GetKVValue(ctx context.Context, instance, key string) (string, bool, error) {
	v, ok, err := c.Provider.GetKVValue(ctx, instance, key)
	return v, ok, c.note("get_kv_value", err)
}

func (c *countingProvider) GetKVAllValues(ctx context.Context, instance string) (map[string]string, error) {
	m, err := c.Provider.GetKVAllValues(ctx, instance)
	return m, c.note("get_kv_all_values", err)
}

func (c *countingProvider) GetInstanceStats(ctx context.Context, instance string) (*provider.SystemStats, error) {
	s, err := c.Provider.GetInstanceStats(ctx, instance)
	return s, c.note("get_instance_stats", err)
}

// Admin is not counted: the runtime's dispatchers make no management calls.
func (c *countingProvider) Admin() (provider.Admin, bool) { return c.Provider.Admin() }

// exposed returns the provider the dispatchers get: c itself, or, when the wrapped provider
// implements the runtime extensions (provider.OrchestrationAckFetcher, provider.WorkAckFetcher and
// provider.LiteFetcher, all three), c with those forwarded and counted, each call one round trip.
func (c *countingProvider) exposed() provider.Provider {
	_, ok1 := c.Provider.(provider.OrchestrationAckFetcher)
	_, ok2 := c.Provider.(provider.WorkAckFetcher)
	_, ok3 := c.Provider.(provider.LiteFetcher)
	if ok1 && ok2 && ok3 {
		if _, ok := c.Provider.(provider.WorkBatchAcker); ok {
			if _, ok := c.Provider.(provider.WorkBatchFetcher); ok && !c.noBatchFetch {
				return countingBatchFetch{countingBatch{countingExt{c}}}
			}
			return countingBatch{countingExt{c}}
		}
		return countingExt{c}
	}
	return c
}

// countingBatch is countingExt with batched activity acks (provider.WorkBatchAcker) forwarded:
// each batch one round trip.
type countingBatch struct{ countingExt }

var _ provider.WorkBatchAcker = countingBatch{}

func (c countingBatch) AckWorkItems(ctx context.Context, acks []provider.WorkAck, fetch *provider.WorkFetch) ([]error, []*provider.LockedWorkItem) {
	errs, next := c.Provider.(provider.WorkBatchAcker).AckWorkItems(ctx, acks, fetch)
	c.calls.Add(1)
	for i, err := range errs {
		if err != nil && c.failed != nil && !errors.Is(err, context.Canceled) {
			c.failed("ack_work_items", err)
		}
		if err == nil && acks[i].Completion != nil && c.workAcked != nil {
			c.workAcked()
		}
	}
	return errs, next
}

// countingBatchFetch is countingBatch with batched fetches (provider.WorkBatchFetcher) forwarded:
// each fetch one round trip (as FetchWorkItem's, however long it waited).
type countingBatchFetch struct{ countingBatch }

var _ provider.WorkBatchFetcher = countingBatchFetch{}

func (c countingBatchFetch) FetchWorkItems(ctx context.Context, fetch provider.WorkFetch, pollTimeout time.Duration) ([]*provider.LockedWorkItem, error) {
	items, err := c.Provider.(provider.WorkBatchFetcher).FetchWorkItems(ctx, fetch, pollTimeout)
	return items, c.note("fetch_work_items", err)
}

// countingExt is countingProvider with the runtime extensions forwarded (see exposed).
type countingExt struct{ *countingProvider }

var (
	_ provider.OrchestrationAckFetcher = countingExt{}
	_ provider.WorkAckFetcher          = countingExt{}
	_ provider.LiteFetcher             = countingExt{}
)

// fetchedItem runs the observers of a fetch (also of the fetch half of an ack-and-fetch).
func (c *countingProvider) fetchedItem(item *provider.LockedOrchestrationItem, start, at time.Time) {
	if item == nil {
		return
	}
	if c.fetched != nil {
		c.fetched(item, start, at)
	}
	if c.acked != nil {
		c.fetchTimes.Store(item.LockToken, fetchInfo{start: start, at: at, historyEvents: max(len(item.Item.History), item.Item.HistoryLen), instance: item.Item.Instance})
	}
}

// ackedTurn runs the observers of a successful or failed orchestration ack.
func (c *countingProvider) ackedTurn(lockToken string, ack *provider.OrchestrationAck, err error, start, done time.Time) {
	if c.acked != nil {
		v, _ := c.fetchTimes.LoadAndDelete(lockToken)
		if f, ok := v.(fetchInfo); ok && err == nil {
			c.acked(ack, f, start, done)
		}
	}
}

func (c countingExt) AckOrchestrationItemAndFetch(ctx context.Context, lockToken string, ack provider.OrchestrationAck, lockTimeout time.Duration,
	filter *provider.DispatcherCapabilityFilter, opts provider.FetchOptions) (*provider.LockedOrchestrationItem, error) {
	start := time.Now()
	next, err := c.Provider.(provider.OrchestrationAckFetcher).AckOrchestrationItemAndFetch(ctx, lockToken, ack, lockTimeout, filter, opts)
	done := time.Now()
	err = c.note("ack_orchestration_item_and_fetch", err)
	c.ackedTurn(lockToken, &ack, err, start, done)
	if err == nil {
		c.fetchedItem(next, done, done)
	}
	return next, err
}

func (c countingExt) AckWorkItemAndFetch(ctx context.Context, lockToken string, completion *provider.WorkItem, lockTimeout time.Duration,
	session *provider.SessionFetchConfig, tags provider.TagFilter, opts provider.FetchOptions) (*provider.LockedWorkItem, error) {
	next, err := c.Provider.(provider.WorkAckFetcher).AckWorkItemAndFetch(ctx, lockToken, completion, lockTimeout, session, tags, opts)
	err = c.note("ack_work_item_and_fetch", err)
	if err == nil && completion != nil && c.workAcked != nil {
		c.workAcked()
	}
	return next, err
}

func (c countingExt) FetchOrchestrationItemLite(ctx context.Context, lockTimeout, pollTimeout time.Duration,
	filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	start := time.Now()
	item, err := c.Provider.(provider.LiteFetcher).FetchOrchestrationItemLite(ctx, lockTimeout, pollTimeout, filter)
	at := time.Now()
	if err := c.note("fetch_orchestration_item_lite", err); err != nil {
		return item, err
	}
	c.fetchedItem(item, start, at)
	return item, nil
}

func (c countingExt) ReadForReplay(ctx context.Context, instance string, executionID uint64) ([]provider.Event, map[string]provider.KVEntry, string, error) {
	h, kv, tag, err := c.Provider.(provider.LiteFetcher).ReadForReplay(ctx, instance, executionID)
	return h, kv, tag, c.note("read_for_replay", err)
}
