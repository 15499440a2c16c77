package redisprovider_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// A message whose visibility entry is lost is made visible again at the time it carries: a
// timer at its own fire time (not now: it would fire early), any other message now.
func TestRepairTimerKeepsItsFireTime(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	fsckWorld(t, p)
	ctx := context.Background()
	fire := uint64(time.Now().Add(time.Hour).UnixMilli())
	timer := provider.WorkItem{Kind: provider.TimerFired{Instance: "a", ExecutionID: 1, ID: 3, FireAtMs: fire}}
	if err := p.EnqueueForOrchestrator(ctx, timer, time.Hour); err != nil {
		t.Fatal(err)
	}
	kz := p.Keyspace().MessageVisibility("a")
	seqs, err := p.Client().ZRange(ctx, kz, -1, -1).Result() // the newest message: the timer
	if err != nil || len(seqs) != 1 {
		t.Fatalf("messages of a: %q, %v", seqs, err)
	}
	p.Client().ZRem(ctx, kz, seqs[0])
	rep, err := p.Repair(ctx)
	if err != nil || len(rep.After.Violations) > 0 {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	at, err := p.Client().ZScore(ctx, kz, seqs[0]).Result()
	if err != nil || uint64(at) != fire {
		t.Fatalf("the timer is visible at %v (%v), want its fire time %d", at, err, fire)
	}
}

// What repair cannot tell from the keys it leaves as it is, and says why: a children set that
// lists an instance whose record names another parent.
func TestRepairLeavesWhatItCannotTell(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	skipFsck(t)
	fsckWorld(t, p)
	ctx := context.Background()
	ks := p.Keyspace()
	p.Client().HSet(ctx, ks.Instance("d"), "parent", "elsewhere")
	p.Client().SAdd(ctx, ks.Children("a"), "d")
	rep, err := p.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Actions) != 1 || rep.Actions[0].Code != "child_parent_mismatch" || rep.Actions[0].Outcome != redisprovider.RepairLeft ||
		!strings.Contains(rep.Actions[0].Why, "cannot be told") {
		t.Fatalf("actions: %+v", rep.Actions)
	}
	if len(rep.After.Violations) != 1 || rep.After.Violations[0].Code != "child_parent_mismatch" {
		t.Fatalf("left: %+v", rep.After.Violations)
	}
	if ok, _ := p.Client().SIsMember(ctx, ks.Children("a"), "d").Result(); !ok {
		t.Fatal("repair changed the children set it left")
	}
}

// Under load: a dx runtime runs instances (activities, timers) while damage to things that are
// not live (index entries and keys of instances that do not exist) is injected and Repair runs
// again and again. Fsck reports only that damage, Repair repairs only it (nothing live is
// touched: every repair names a ghost), and every instance completes with its result.
func TestRepairUnderLoad(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t) // its cleanup checks that fsck is clean at the end
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := dx.NewRuntime(p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger})
	dx.RegisterActivity(rt, "Double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	dx.Register(rt, "Work", func(ctx dx.Context, n int) (int, error) {
		a, err := dx.Call[int](ctx, "Double", n).Await(ctx)
		if err != nil {
			return 0, err
		}
		if _, err := ctx.Timer(20 * time.Millisecond).Await(ctx); err != nil {
			return 0, err
		}
		return dx.Call[int](ctx, "Double", a).Await(ctx)
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	c := dx.NewClient(p)

	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	startsDone := make(chan struct{})
	wg.Go(func() {
		defer close(startsDone)
		for i := range ids {
			id, err := c.Start(ctx, "Work", i, dx.WithInstanceID(fmt.Sprintf("live-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = id
			time.Sleep(5 * time.Millisecond)
		}
	})

	ks, prefix := p.Keyspace(), p.Keyspace().Prefix(0)
	var repairs []redisprovider.RepairAction
	var found []redisprovider.FsckViolation
	damage := func(round int) {
		ghost := fmt.Sprintf("ghost-%d", round)
		cl := p.Client()
		cl.ZAdd(ctx, prefix+"idx:instances", redisZ(1, ghost))
		cl.ZAdd(ctx, prefix+"idx:status:Running", redisZ(1, ghost))
		cl.HSet(ctx, ks.CustomStatus(ghost), "v", "1")
		cl.HSet(ctx, ks.KVStore(ghost), "k", "1|v")
		cl.ZAdd(ctx, ks.MessageVisibility(ghost+"-q"), redisZ(1, "999999"))
	}
	repairsDone := make(chan struct{})
	var overlapped int // repair rounds that began while instances were running
	go func() {
		defer close(repairsDone)
		for round := 0; ; round++ {
			select {
			case <-startsDone:
				if round >= 8 {
					return
				}
			default:
			}
			if round%2 == 0 {
				damage(round)
			}
			if m, err := p.GetSystemMetrics(ctx); err == nil && m.RunningInstances > 0 {
				overlapped++
			}
			rep, err := p.Repair(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			found = append(found, rep.Found...)
			repairs = append(repairs, rep.Actions...)
		}
	}()
	wg.Wait()
	<-repairsDone
	for i, id := range ids {
		if id == "" {
			t.FailNow()
		}
		got, err := dx.Result[int](ctx, c, id)
		if err != nil || got != 4*i {
			t.Fatalf("%s: %d, %v; want %d", id, got, err, 4*i)
		}
	}
	for _, v := range found {
		if !strings.HasPrefix(v.Subject, "ghost-") {
			t.Errorf("fsck under load reported %s %q: %s", v.Code, v.Subject, v.Detail)
		}
	}
	repaired := 0
	for _, a := range repairs {
		if a.Outcome == redisprovider.RepairRepaired {
			repaired++
			if !strings.HasPrefix(a.Subject, "ghost-") {
				t.Errorf("repair touched a live subject: %s %q: %s", a.Code, a.Subject, a.Why)
			}
		}
	}
	t.Logf("%d repairs, %d of them repaired, %d repair rounds began while instances ran", len(repairs), repaired, overlapped)
	if overlapped == 0 {
		t.Error("no repair ran while instances were running")
	}
	if repaired < 4 { // at least four rounds of damage, each repaired
		t.Errorf("repaired %d violations, want every injected one: %+v", repaired, repairs)
	}
	rep, err := p.Repair(ctx)
	if err != nil || len(rep.Found) > 0 {
		t.Fatalf("after the load: %+v, %v", rep.Found, err)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
