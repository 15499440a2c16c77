package redisprovider_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// newProxiedProvider returns a provider whose own client reaches Redis (DXREDIS_TEST_ADDR, else
// an embedded miniredis) through a dropProxy, and a second provider on the same namespace that
// talks to Redis directly (to look at what was stored).
func newProxiedProvider(t *testing.T) (*redisprovider.Provider, *redisprovider.Provider, *dropProxy) {
	t.Helper()
	ctx := context.Background()
	addr := os.Getenv("DXREDIS_TEST_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	proxy := startDropProxy(t, addr)
	ns := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	viaProxy, err := redisprovider.New(ctx, redisprovider.Options{Addr: proxy.addr(), Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkFsck(t, direct); dropNamespace(t, direct); _ = viaProxy.Close(); _ = direct.Close() })
	return viaProxy, direct, proxy
}

// TestLostReplyIsNotAppliedTwice: when Redis runs a write and its reply is lost (the connection
// drops after the command was sent), the provider neither stores an enqueue twice nor reports a
// committed ack as ErrInvalidLockToken: go-redis must not re-send the script by itself, and the
// provider's own retry carries the call's attempt id.
func TestLostReplyIsNotAppliedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, direct, proxy := newProxiedProvider(t)
	const inst = "lost-reply"

	// EnqueueForOrchestrator: one start, even though its first reply was lost.
	proxy.dropReplies(1, inst)
	if err := p.EnqueueForOrchestrator(ctx, obStart(inst), 0); err != nil {
		t.Fatalf("enqueue with a lost reply: %v", err)
	}
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", proxy.dropped.Load())
	}
	it, err := direct.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v %v", it, err)
	}
	if n := len(it.Item.Messages); n != 1 {
		t.Fatalf("enqueue with a lost reply stored %d copies, want 1", n)
	}

	// AckOrchestrationItem: the turn committed; the lost reply must not turn into an error.
	proxy.dropReplies(1, it.LockToken)
	if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn1(inst, "0.1.30", true)); err != nil {
		t.Fatalf("ack with a lost reply: %v", err)
	}
	if h, _ := direct.Read(ctx, inst); len(h) != 2 {
		t.Fatalf("history after the ack: %d events, want 2", len(h))
	}
	// An independent second ack with the same token still fails, permanently.
	err = p.AckOrchestrationItem(ctx, it.LockToken, obTurn1(inst, "0.1.30", true))
	if !errors.Is(err, provider.ErrInvalidLockToken) || provider.IsRetryable(err) {
		t.Fatalf("second ack with the same token: %v, want permanent ErrInvalidLockToken", err)
	}

	// AckWorkItem: completion enqueued once, item gone, success reported.
	w, err := direct.FetchWorkItem(ctx, 30*time.Second, 0, nil, provider.TagFilterDefaultOnly())
	if err != nil || w == nil {
		t.Fatalf("fetch work: %v %v", w, err)
	}
	proxy.dropReplies(1, w.LockToken)
	if err := p.AckWorkItem(ctx, w.LockToken, ptr(obCompletion(inst))); err != nil {
		t.Fatalf("work ack with a lost reply: %v", err)
	}
	it, err = direct.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil || len(it.Item.Messages) != 1 {
		t.Fatalf("after the work ack: %+v %v, want one completion", it, err)
	}

	// EnqueueForWorker: one item.
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: inst + "-w", ExecutionID: 1, ID: 9, Name: "A", Input: "{}"}}
	proxy.dropReplies(1, inst+"-w")
	if err := p.EnqueueForWorker(ctx, act); err != nil {
		t.Fatalf("enqueue for worker with a lost reply: %v", err)
	}
	for i := 0; i < 2; i++ {
		w, err := direct.FetchWorkItem(ctx, 30*time.Second, 0, nil, provider.TagFilterDefaultOnly())
		if err != nil {
			t.Fatal(err)
		}
		if (w != nil) != (i == 0) {
			t.Fatalf("worker fetch %d after one enqueue: %+v", i+1, w)
		}
	}
	if got := proxy.dropped.Load(); got != 4 {
		t.Fatalf("the proxy dropped %d replies, want 4", got)
	}
}

// TestOutcomeUnknownAndNeverSent: a write whose replies are lost on every retry ends with a
// retryable ErrOutcomeUnknown (and was applied once); a write that cannot reach Redis at all is
// retryable without that kind.
func TestOutcomeUnknownAndNeverSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, direct, proxy := newProxiedProvider(t)
	proxy.dropReplies(100, "always-lost")
	err := p.EnqueueForOrchestrator(ctx, obStart("always-lost"), 0)
	if !errors.Is(err, provider.ErrOutcomeUnknown) || !provider.IsRetryable(err) {
		t.Fatalf("enqueue whose replies are all lost: %v, want retryable ErrOutcomeUnknown", err)
	}
	it, err := direct.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil || len(it.Item.Messages) != 1 {
		t.Fatalf("after the unknown outcome: %+v %v, want the start stored once", it, err)
	}

	// Cut off: every connection the client made is closed and every dial fails, so no try of the
	// next call can be sent. (Closing the proxy instead raced: a connection the client's pool had
	// dialed before the close could still carry the first try, and then the outcome is unknown.)
	d := &cuttableDialer{}
	cut, err := redisprovider.New(ctx, redisprovider.Options{Namespace: p.Keyspace().Namespace(), Logger: quietLogger,
		Client: redis.NewClient(&redis.Options{Addr: proxy.upstream, Dialer: d.dial, MaxRetries: -1})})
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	d.cutOff()
	err = cut.EnqueueForOrchestrator(ctx, obStart("never-sent"), 0)
	if err == nil || !provider.IsRetryable(err) || errors.Is(err, provider.ErrOutcomeUnknown) {
		t.Fatalf("enqueue that never reached Redis: %v, want retryable without ErrOutcomeUnknown", err)
	}
}

// cuttableDialer dials Redis until cutOff, which closes every connection it made; after that
// every dial fails as a dial error (nothing sent).
type cuttableDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cuttableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("cut off by the test")}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cuttableDialer) cutOff() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// TestCallerAttemptID: a caller that names a write's attempt (provider.WithAttemptID) and sends it
// again after the provider gave up on it (ErrOutcomeUnknown: every reply lost) gets the first
// run's reply: an ack that committed reports success, not ErrInvalidLockToken. A fresh id is a
// new call. An id over 128 bytes is refused.
func TestCallerAttemptID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, direct, proxy := newProxiedProvider(t)
	const inst = "caller-attempt"
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: inst, ExecutionID: 1, ID: 9, Name: "A", Input: "{}"}}
	if err := direct.EnqueueForWorker(ctx, act); err != nil {
		t.Fatal(err)
	}
	w, err := direct.FetchWorkItem(ctx, 30*time.Second, 0, nil, provider.TagFilterDefaultOnly())
	if err != nil || w == nil {
		t.Fatalf("fetch work: %v %v", w, err)
	}
	actx := provider.WithAttemptID(ctx, uuid.NewString())
	proxy.dropReplies(100, w.LockToken)
	err = p.AckWorkItem(actx, w.LockToken, ptr(obCompletion(inst)))
	if !errors.Is(err, provider.ErrOutcomeUnknown) {
		t.Fatalf("ack whose replies are all lost: %v, want ErrOutcomeUnknown", err)
	}
	proxy.dropReplies(0, "")
	if err := p.AckWorkItem(actx, w.LockToken, ptr(obCompletion(inst))); err != nil {
		t.Fatalf("the same ack sent again with its attempt id: %v, want success (it committed)", err)
	}
	err = p.AckWorkItem(ctx, w.LockToken, ptr(obCompletion(inst)))
	if !errors.Is(err, provider.ErrInvalidLockToken) {
		t.Fatalf("a new ack with the same token: %v, want ErrInvalidLockToken", err)
	}
	err = p.AckWorkItem(provider.WithAttemptID(ctx, strings.Repeat("x", 129)), w.LockToken, nil)
	if !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("ack with a 129-byte attempt id: %v, want ErrInvalidInput", err)
	}
}

// TestFirstAttemptIDSkipsLookup: an ack marked as its attempt id's first send
// (provider.WithFirstAttemptID) runs without looking for an earlier run: even an id whose reply is
// stored runs again (a caller must mark only ids it never sent). Without the mark, the stored reply
// is returned and the second ack does not run.
func TestFirstAttemptIDSkipsLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	id := uuid.NewString()
	fetchOne := func(n int) *provider.LockedWorkItem {
		t.Helper()
		act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "first-attempt", ExecutionID: 1, ID: uint64(n), Name: "A", Input: "{}"}}
		if err := p.EnqueueForWorker(ctx, act); err != nil {
			t.Fatal(err)
		}
		w, err := p.FetchWorkItem(ctx, 30*time.Second, 0, nil, provider.TagFilterDefaultOnly())
		if err != nil || w == nil {
			t.Fatalf("fetch work: %v %v", w, err)
		}
		return w
	}
	w1 := fetchOne(1)
	if err := p.AckWorkItem(provider.WithFirstAttemptID(ctx, id), w1.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	// The same id again, not marked first: the stored reply, so w2's ack does not run.
	w2 := fetchOne(2)
	if err := p.AckWorkItem(provider.WithAttemptID(ctx, id), w2.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.AbandonWorkItem(ctx, w2.LockToken, 0, true); err != nil {
		t.Fatalf("w2 still locked after an ack answered from the stored reply: abandon: %v", err)
	}
	// Marked first: it runs, so the item is acknowledged and its token gone.
	w3 := fetchOne(3)
	if err := p.AckWorkItem(provider.WithFirstAttemptID(ctx, id), w3.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.AckWorkItem(ctx, w3.LockToken, nil); !errors.Is(err, provider.ErrInvalidLockToken) {
		t.Fatalf("ack of an item already acknowledged by a first-marked attempt: %v, want ErrInvalidLockToken", err)
	}
}

// An ack's reply outlives the lock it was acknowledged under: a caller retries an ack with the
// same attempt id for as long as it holds the lock (dx does), here 90 s, longer than the 20 s an
// enqueue's reply is kept.
func TestAttemptReplyOutlivesTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "long-lock", ExecutionID: 1, ID: 1, Name: "A", Input: "{}"}}
	if err := p.EnqueueForWorker(ctx, act); err != nil {
		t.Fatal(err)
	}
	w, err := p.FetchWorkItem(ctx, 90*time.Second, 0, nil, provider.TagFilterDefaultOnly())
	if err != nil || w == nil {
		t.Fatalf("fetch work: %v %v", w, err)
	}
	id := uuid.NewString()
	if err := p.AckWorkItem(provider.WithFirstAttemptID(ctx, id), w.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	ttl := p.Client().PTTL(ctx, p.Keyspace().Attempt(p.Keyspace().PartitionOf("long-lock"), id)).Val()
	if ttl < 90*time.Second {
		t.Fatalf("the ack's reply is kept %v, want at least the 90 s lock", ttl)
	}
}
