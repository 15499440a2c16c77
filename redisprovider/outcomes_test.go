package redisprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// outActivities enqueues one activity of inst per outcome, fetches each and acks it with its
// outcome: 'c' an ActivityCompleted, 'f' an ActivityFailed, '-' no completion.
func outActivities(t *testing.T, p *redisprovider.Provider, inst string, outcomes string) {
	t.Helper()
	ctx := t.Context()
	for i, o := range outcomes {
		wEnqueue(t, p, wAct(inst, uint64(i+1), "", ""))
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		if it == nil {
			t.Fatal("nothing fetched")
		}
		var c *provider.WorkItem
		switch o {
		case 'c':
			c = &provider.WorkItem{Kind: provider.ActivityCompleted{Instance: inst, ExecutionID: 1, ID: uint64(i + 1), Result: `1`}}
		case 'f':
			c = &provider.WorkItem{Kind: provider.ActivityFailed{Instance: inst, ExecutionID: 1, ID: uint64(i + 1), Details: provider.ErrorDetails{
				Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppActivityFailed}, Message: "boom"}}}}
		}
		if err := p.AckWorkItem(ctx, it.LockToken, c); err != nil {
			t.Fatal(err)
		}
	}
}

// outSum sums the last minutes of OutcomeStats: orchestrations completed, failed, activities
// completed, failed.
func outSum(t *testing.T, p *redisprovider.Provider, minutes int) [4]uint64 {
	t.Helper()
	ms, err := p.OutcomeStats(context.Background(), minutes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != minutes {
		t.Fatalf("%d minutes, want %d", len(ms), minutes)
	}
	var s [4]uint64
	for i, m := range ms {
		if i > 0 && !m.Minute.Equal(ms[i-1].Minute.Add(time.Minute)) {
			t.Fatalf("minute %d is %v after %v", i, m.Minute, ms[i-1].Minute)
		}
		s[0] += m.OrchestrationsCompleted
		s[1] += m.OrchestrationsFailed
		s[2] += m.ActivitiesCompleted
		s[3] += m.ActivitiesFailed
	}
	return s
}

// TestOutcomeStatsCountsAcks: the acks count instances that complete or fail (not a
// continue-as-new, not a turn that leaves it running) and activity results and failures (not an
// ack without a completion).
func TestOutcomeStatsCountsAcks(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	if got := outSum(t, p, 60); got != [4]uint64{} {
		t.Fatalf("a new namespace counts %v", got)
	}
	admCreate(t, p, "done-1", "", []int{2}, provider.StatusCompleted)
	admCreate(t, p, "done-2", "", []int{1, 2}, provider.StatusCompleted) // a continue-as-new, then completed
	admCreate(t, p, "failed-1", "", []int{2}, provider.StatusFailed)
	admCreate(t, p, "running-1", "", []int{2}, "")
	outActivities(t, p, "acts", "ccfc-f")
	if got, want := outSum(t, p, 60), [4]uint64{2, 1, 3, 2}; got != want {
		t.Fatalf("counts %v, want %v", got, want)
	}
	if _, err := p.OutcomeStats(t.Context(), 0); err == nil {
		t.Fatal("0 minutes accepted")
	}
	if _, err := p.OutcomeStats(t.Context(), redisprovider.OutcomeMinutes+1); err == nil {
		t.Fatal("more than a day accepted")
	}
}

// TestOutcomeStatsRetention: minutes older than a day are deleted by the next minute's first
// count, however long the namespace was idle, so the hash stays bounded (embedded miniredis: its
// clock is set by the test).
func TestOutcomeStatsRetention(t *testing.T) {
	t.Parallel()
	p, mr := newTestProviderWith(t, redisprovider.Options{})
	if mr == nil {
		t.Skip("needs the embedded miniredis to move the server's clock")
	}
	const inst = "ret"
	key := p.Keyspace().Prefix(p.Keyspace().PartitionOf(inst)) + "stats"
	t0 := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	at := func(min int) { mr.SetTime(t0.Add(time.Duration(min) * time.Minute)) }
	fields := func() int {
		t.Helper()
		n, err := p.Client().HLen(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	for m := range 10 { // minutes 0-9: one completion each
		at(m)
		outActivities(t, p, inst, "c")
	}
	if n := fields(); n != 11 {
		t.Fatalf("%d fields after 10 minutes, want 10 and the trim mark", n)
	}
	at(1445) // minutes 0-5 left the day
	outActivities(t, p, inst, "cf")
	if n := fields(); n != 4+2+1 {
		t.Fatalf("%d fields at minute 1445, want minutes 6-9, this minute's two kinds and the mark", n)
	}
	if got, want := outSum(t, p, redisprovider.OutcomeMinutes), [4]uint64{0, 0, 4 + 1, 1}; got != want {
		t.Fatalf("a day's counts at minute 1445: %v, want %v", got, want)
	}
	at(3 * 1440) // idle for more than a day: everything before goes
	outActivities(t, p, inst, "f")
	if n := fields(); n != 2 {
		t.Fatalf("%d fields after two idle days, want this minute's and the mark", n)
	}
	if got, want := outSum(t, p, redisprovider.OutcomeMinutes), [4]uint64{0, 0, 0, 1}; got != want {
		t.Fatalf("counts after two idle days: %v, want %v", got, want)
	}
}

// TestOutcomeStatsSurviveRedisRestart: the counts are ordinary keys of the namespace: a server
// with an append-only file, SIGKILLed and restarted, still has them.
func TestOutcomeStatsSurviveRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	opts := redisprovider.Options{Addr: srv.Addr(), Namespace: "stats", Logger: quietLogger, Partitions: testPartitions()}
	p, err := redisprovider.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	admCreate(t, p, "done-1", "", []int{2}, provider.StatusCompleted)
	outActivities(t, p, "acts", "cf")
	want := outSum(t, p, 60)
	if want != [4]uint64{1, 0, 1, 1} {
		t.Fatalf("counts before the restart %v", want)
	}
	p.Close()
	srv.Kill()
	srv.Restart()
	if p, err = redisprovider.New(ctx, opts); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := outSum(t, p, 60); got != want {
		t.Fatalf("counts after the restart %v, want %v", got, want)
	}
}
