// Command format1gen builds and finishes a namespace holding every kind of dxredis state, on the dx
// runtime and redisprovider of the tree it is built from. redisprovider's tests build it twice:
// from the last format-1 commit (563f790, a namespace in storage format 1) and from the working
// tree, and compare the two (format1_test.go). It lives under testdata so `go build ./...` skips it;
// it uses only the API both trees share.
//
//	format1gen populate -addr A -ns N [-timer 3s]     create the state, stop the runtime, print the manifest
//	format1gen finish -addr A -ns N -manifest FILE    run every instance to its end, print each one's result
//	format1gen calls -addr A -ns N [-only NAME|-list] call every provider write once, print each error
//
// -addr is one server, or comma-separated cluster nodes. Output is JSON on stdout; logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// Manifest is what populate prints and finish reads: the instances and what finish must do to
// bring each of them to its end.
type Manifest struct {
	// Instances are every instance populate created or finish starts (children included), sorted.
	Instances []string `json:"instances"`
	// States are the states populate left each instance in (one word each), for the reader.
	States map[string]string `json:"states"`
	// Raise are the events finish raises, in order; Enqueue the queue messages; Start the starts.
	Raise   []Message `json:"raise"`
	Enqueue []Message `json:"enqueue"`
	Start   []Start   `json:"start"`
}

// Message is an event (Raise) or a queue message (Enqueue) for an instance.
type Message struct {
	Instance string `json:"instance"`
	Name     string `json:"name"`
	Data     string `json:"data"`
}

// Start is a client start of an instance.
type Start struct {
	Instance      string `json:"instance"`
	Orchestration string `json:"orchestration"`
	Input         WaitIn `json:"input"`
}

// WaitIn is the input of the Wait orchestration: what it waits on before it ends.
type WaitIn struct {
	Kind  string        `json:"kind"`            // timer, event, queue, child, tagged, session, delayed
	Event string        `json:"event,omitempty"` // event, delayed: the event's name; child: the child's
	Timer time.Duration `json:"timer,omitempty"` // timer: its duration
	Child string        `json:"child,omitempty"` // child: the child's instance id
}

// CounterIn is the Counter orchestration's input: it continues as new until N reaches Stop, then
// (with Timer) sleeps, and returns N.
type CounterIn struct {
	N     int           `json:"n"`
	Stop  int           `json:"stop"`
	Timer time.Duration `json:"timer,omitempty"`
}

const (
	lockTimeout = 5 * time.Second
	// Sessions are owned per process (NodeID): populate's session must expire for finish's
	// process to take it, so its lock is short.
	sessionLock = 2 * time.Second
	laterTag    = "later" // activities populate's runtime does not run (left queued)
	sessionID   = "s1"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: format1gen populate|finish|calls -addr A -ns N [-manifest FILE] [-timer D]"))
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "Redis address, or comma-separated cluster nodes")
	ns := fs.String("ns", "", "namespace")
	manifest := fs.String("manifest", "", "finish: the manifest populate printed")
	timer := fs.Duration("timer", 3*time.Second, "populate: the durable timers' duration")
	only := fs.String("only", "", "calls: make only the call of this name")
	list := fs.Bool("list", false, "calls: list the calls' names, call nothing")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	_ = fs.Parse(os.Args[2:])
	if *ns == "" {
		fail(errors.New("-ns is required"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	g := &gen{addr: *addr, ns: *ns}
	var out any
	var err error
	switch mode {
	case "populate":
		out, err = g.populate(ctx, *timer)
	case "finish":
		var m Manifest
		b, rerr := os.ReadFile(*manifest)
		if rerr == nil {
			rerr = json.Unmarshal(b, &m)
		}
		if rerr != nil {
			fail(fmt.Errorf("manifest: %w", rerr))
		}
		out, err = g.finish(ctx, m)
	case "calls":
		out, err = g.calls(ctx, *only, *list)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "format1gen:", err)
	os.Exit(1)
}

type gen struct {
	addr, ns string
	clients  []redis.UniversalClient
}

var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// open opens a provider on the namespace; retention 0 keeps finished instances forever.
func (g *gen) open(ctx context.Context, retention time.Duration) (*redisprovider.Provider, error) {
	opts := redisprovider.Options{Namespace: g.ns, Retention: retention, Logger: logger}
	if strings.Contains(g.addr, ",") {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(g.addr, ","), MaxRetries: -1})
		g.clients = append(g.clients, c)
		return redisprovider.NewFromClient(ctx, c, opts)
	}
	opts.Addr = g.addr
	return redisprovider.New(ctx, opts)
}

func (g *gen) close() {
	for _, c := range g.clients {
		_ = c.Close()
	}
}

// runtime is a runtime with every orchestration and activity of the fixture; tags adds activity
// tags beyond untagged ones.
func runtime(p provider.Provider, node string, tags ...string) (*dx.Runtime, error) {
	filter := provider.TagFilterDefaultOnly()
	if len(tags) > 0 {
		f, err := provider.TagFilterDefaultAnd(tags...)
		if err != nil {
			return nil, err
		}
		filter = f
	}
	rt := dx.NewRuntime(p, dx.Options{
		OrchestrationConcurrency: 4, WorkerConcurrency: 4,
		OrchestrationLockTimeout: lockTimeout, WorkerLockTimeout: lockTimeout, WorkerLockRenewalBuffer: time.Second,
		SessionLockTimeout: sessionLock, SessionLockRenewalBuffer: 500 * time.Millisecond,
		PollTimeout: time.Second, WorkerTagFilter: filter, NodeID: node, Logger: logger,
	})
	errs := []error{
		dx.RegisterActivity(rt, "Echo", func(_ context.Context, s string) (string, error) { return "echo:" + s, nil }),
		dx.RegisterActivity(rt, "Boom", func(_ context.Context, s string) (string, error) {
			return "", dx.Permanent(errors.New("boom: " + s))
		}),
		dx.Register(rt, "Wait", wait),
		dx.Register(rt, "Counter", counter),
		dx.Register(rt, "Done", func(ctx dx.Context, in string) (string, error) {
			ctx.SetKV("done", in)
			ctx.SetCustomStatus("done")
			return dx.Call[string](ctx, "Echo", in).Await(ctx)
		}),
		dx.Register(rt, "Fail", func(ctx dx.Context, in string) (string, error) {
			ctx.SetKV("failing", in)
			return dx.Call[string](ctx, "Boom", in).Await(ctx)
		}),
	}
	return rt, errors.Join(errs...)
}

// wait sets its custom status to "waiting:<kind>" in the turn that starts its wait (populate
// waits for that), then ends when the wait does.
func wait(ctx dx.Context, in WaitIn) (string, error) {
	ctx.SetKV("kind", in.Kind)
	switch in.Kind {
	case "timer":
		ctx.SetCustomStatus("waiting:timer")
		if err := ctx.Sleep(in.Timer); err != nil {
			return "", err
		}
		return dx.Call[string](ctx, "Echo", "after-timer").Await(ctx)
	case "event", "delayed":
		ctx.SetCustomStatus("waiting:" + in.Kind)
		v, err := dx.WaitEvent[string](ctx, in.Event).Await(ctx)
		ctx.SetKV("event", v)
		return in.Event + "=" + v, err
	case "queue":
		ctx.SetCustomStatus("waiting:queue")
		a, err := dx.Dequeue[string](ctx, "inbox").Await(ctx)
		if err != nil {
			return "", err
		}
		// finish sends the second message once this says the first was taken: the two then
		// never share a batch (which would change the history's order).
		ctx.SetCustomStatus("waiting:queue2")
		b, err := dx.Dequeue[string](ctx, "inbox").Await(ctx)
		return a + "," + b, err
	case "child":
		ctx.SetCustomStatus("waiting:child")
		out, err := dx.CallSub[string](ctx, "Wait", WaitIn{Kind: "event", Event: in.Event}, dx.WithInstanceID(in.Child)).Await(ctx)
		return "child:" + out, err
	case "tagged":
		ctx.SetCustomStatus("waiting:tagged")
		return dx.Call[string](ctx, "Echo", "tagged", dx.WithTag(laterTag)).Await(ctx)
	case "tagged-session":
		ctx.SetCustomStatus("waiting:tagged-session")
		return dx.Call[string](ctx, "Echo", "tagged-session", dx.WithTag(laterTag), dx.OnSession(in.Event)).Await(ctx)
	case "session":
		a, err := dx.Call[string](ctx, "Echo", "session-1", dx.OnSession(sessionID)).Await(ctx)
		if err != nil {
			return "", err
		}
		ctx.SetCustomStatus("waiting:session")
		if _, err := dx.WaitEvent[string](ctx, in.Event).Await(ctx); err != nil {
			return "", err
		}
		b, err := dx.Call[string](ctx, "Echo", "session-2", dx.OnSession(sessionID)).Await(ctx)
		return a + "," + b, err
	}
	return "", dx.Permanent(fmt.Errorf("unknown kind %q", in.Kind))
}

func counter(ctx dx.Context, in CounterIn) (int, error) {
	ctx.SetKV("n", fmt.Sprint(in.N))
	if in.N < in.Stop {
		return 0, dx.ContinueAsNew(ctx, CounterIn{N: in.N + 1, Stop: in.Stop, Timer: in.Timer})
	}
	if in.Timer > 0 {
		ctx.SetCustomStatus(fmt.Sprintf("waiting:timer:%d", in.N))
		if err := ctx.Sleep(in.Timer); err != nil {
			return 0, err
		}
	}
	return in.N, nil
}

// populate creates the state in two runtime phases: one without retention (an instance that stays
// forever), one with a retention of a day (the rest; finished roots get TTLs).
func (g *gen) populate(ctx context.Context, timer time.Duration) (Manifest, error) {
	defer g.close()
	m := Manifest{States: map[string]string{}}

	// Phase 1: no retention.
	p1, err := g.open(ctx, 0)
	if err != nil {
		return m, err
	}
	defer p1.Close()
	if err := g.phase(ctx, p1, "format1gen-populate-1", func(c *dx.Client) error {
		if _, err := c.Start(ctx, "Done", "kept", dx.WithInstanceID("done-kept")); err != nil {
			return err
		}
		m.States["done-kept"] = "completed (no retention)"
		return waitState(ctx, c, "done-kept", string(dx.StateCompleted))
	}); err != nil {
		return m, err
	}

	// Phase 2: with retention.
	p, err := g.open(ctx, 24*time.Hour)
	if err != nil {
		return m, err
	}
	defer p.Close()
	starts := []struct {
		id, name string
		input    any
		waitFor  string // custom status, or a terminal state
		state    string
	}{
		{"done-1", "Done", "one", string(dx.StateCompleted), "completed (retention TTL)"},
		{"fail-1", "Fail", "one", string(dx.StateFailed), "failed (retention TTL)"},
		{"can-done", "Counter", CounterIn{Stop: 2}, string(dx.StateCompleted), "completed after 2 continue-as-new"},
		{"can-1", "Counter", CounterIn{Stop: 2, Timer: timer}, "waiting:timer:2", "continued as new twice, waiting on a timer"},
		{"timer-1", "Wait", WaitIn{Kind: "timer", Timer: timer}, "waiting:timer", "waiting on a durable timer"},
		{"event-1", "Wait", WaitIn{Kind: "event", Event: "go"}, "waiting:event", "waiting on an event (raised by populate, queued)"},
		{"event-2", "Wait", WaitIn{Kind: "event", Event: "late"}, "waiting:event", "waiting on an event (finish raises it)"},
		{"delayed-1", "Wait", WaitIn{Kind: "delayed", Event: "soon"}, "waiting:delayed", "waiting on an event enqueued with a delay"},
		{"queue-1", "Wait", WaitIn{Kind: "queue"}, "waiting:queue", "waiting on a queue (one message queued, finish sends the other)"},
		{"parent-1", "Wait", WaitIn{Kind: "child", Event: "child-go", Child: "child-1"}, "waiting:child", "waiting on a child"},
		{"tagged-1", "Wait", WaitIn{Kind: "tagged"}, "waiting:tagged", "its tagged activity queued, unfetched"},
		{"tagged-2", "Wait", WaitIn{Kind: "tagged"}, "waiting:tagged", "its tagged activity delayed (abandoned with a delay)"},
		{"tagged-3", "Wait", WaitIn{Kind: "tagged"}, "waiting:tagged", "its tagged activity locked by a worker that stopped (the lock expired)"},
		{"session-2", "Wait", WaitIn{Kind: "tagged-session", Event: "s2"}, "waiting:tagged-session", "its tagged activity on session s2 queued, unfetched"},
		{"session-3", "Wait", WaitIn{Kind: "tagged-session", Event: "s3"}, "waiting:tagged-session", "its tagged activity on session s3 locked by a worker that stopped (the lock expired)"},
		{"session-1", "Wait", WaitIn{Kind: "session", Event: "sess-go"}, "waiting:session", "ran a session activity, waits on an event"},
	}
	if err := g.phase(ctx, p, "format1gen-populate-2", func(c *dx.Client) error {
		for _, s := range starts {
			if _, err := c.Start(ctx, s.name, s.input, dx.WithInstanceID(s.id)); err != nil {
				return fmt.Errorf("start %s: %w", s.id, err)
			}
			m.States[s.id] = s.state
		}
		for _, s := range starts {
			if err := waitState(ctx, c, s.id, s.waitFor); err != nil {
				return err
			}
		}
		m.States["child-1"] = "waiting on an event (finish raises it)"
		return waitState(ctx, c, "child-1", "waiting:event")
	}); err != nil {
		return m, err
	}

	// With no runtime running: messages nobody fetches yet.
	c := dx.NewClient(p)
	if err := c.RaiseEvent(ctx, "event-1", "go", "early"); err != nil {
		return m, err
	}
	if err := c.EnqueueEvent(ctx, "queue-1", "inbox", "first"); err != nil {
		return m, err
	}
	// An event for an instance that does not exist yet: parked as an orphan until finish starts it.
	if err := c.RaiseEvent(ctx, "orphan-1", "hello", "parked"); err != nil {
		return m, err
	}
	m.States["orphan-1"] = "not started; an event for it parked as an orphan"
	// A delayed message (visible after the timer's duration).
	data, _ := json.Marshal("delayed")
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "delayed-1", Name: "soon", Data: string(data)}}, timer); err != nil {
		return m, err
	}
	// A delayed activity: tagged-2's, fetched and given back with a delay (its attempt not
	// counted); the other items fetched on the way are given back at once.
	if err := delayActivity(ctx, p, "tagged-2", timer); err != nil {
		return m, err
	}
	// Activities whose worker stopped while holding them: locked, the lock expired.
	if err := expireActivities(ctx, p, "tagged-3", "session-3"); err != nil {
		return m, err
	}
	if err := noLocks(ctx, p); err != nil {
		return m, err
	}

	m.Raise = []Message{{"event-2", "late", `"now"`}, {"child-1", "child-go", `"go"`}, {"session-1", "sess-go", `"go"`}}
	m.Enqueue = []Message{{"queue-1", "inbox", `"second"`}}
	// The orphan's start: a message that came before its instance's start is delivered with it, and
	// dropped by the runtime (nothing waits on it yet), so the instance waits on a timer of its own.
	m.Start = []Start{{"orphan-1", "Wait", WaitIn{Kind: "timer", Timer: timer}}}
	for id := range m.States {
		m.Instances = append(m.Instances, id)
	}
	sort.Strings(m.Instances)
	return m, nil
}

// phase starts a runtime on p, runs do, and shuts the runtime down, waiting for it to give back
// everything it held.
func (g *gen) phase(ctx context.Context, p *redisprovider.Provider, node string, do func(*dx.Client) error) error {
	rt, err := runtime(p, node)
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	err = do(dx.NewClient(p))
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if serr := rt.Shutdown(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("shutdown: %w", serr))
	}
	return err
}

// waitState waits until the instance's custom status or state is want (status reads, as dxctl
// does: no sleeps beyond the poll between reads).
func waitState(ctx context.Context, c *dx.Client, id, want string) error {
	var last dx.Status
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			return fmt.Errorf("status %s: %w", id, err)
		}
		last = st
		if string(st.State) == want || (st.CustomStatus != nil && *st.CustomStatus == want && st.State == dx.StateRunning) {
			return nil
		}
		if st.Terminal() {
			return fmt.Errorf("%s ended %s (%v) while waiting for %q", id, st.State, st.Err, want)
		}
		var v uint64
		if st.CustomStatus != nil {
			v = st.CustomStatusVersion
		}
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = c.WaitForStatusChange(wctx, id, v)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%s: waiting for %q: last %s %v: %w", id, want, last.State, deref(last.CustomStatus), ctx.Err())
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// delayActivity makes the queued activity of instance visible only after delay.
func delayActivity(ctx context.Context, p *redisprovider.Provider, instance string, delay time.Duration) error {
	var held []string
	defer func() {
		for _, tok := range held {
			_ = p.AbandonWorkItem(ctx, tok, 0, true)
		}
	}()
	for {
		w, err := p.FetchWorkItem(ctx, lockTimeout, 0, nil, provider.TagFilterAny())
		if err != nil {
			return err
		}
		if w == nil {
			return fmt.Errorf("no queued activity of %s", instance)
		}
		if a, ok := w.Item.Kind.(provider.ActivityExecute); ok && a.Instance == instance {
			return p.AbandonWorkItem(ctx, w.LockToken, delay, true)
		}
		held = append(held, w.LockToken)
	}
}

// expireActivities locks the queued activities of instances, session items included, for a
// moment and leaves them, as a worker that stopped would; it returns once their locks expired.
// The other items fetched on the way are given back at once.
func expireActivities(ctx context.Context, p *redisprovider.Provider, instances ...string) error {
	const lock = 300 * time.Millisecond // the fetches below take a few ms: no lock of theirs expires before the end
	session := &provider.SessionFetchConfig{OwnerID: "format1gen-stopped", LockTimeout: lock}
	var held []string
	for left := len(instances); left > 0; {
		w, err := p.FetchWorkItem(ctx, lock, 0, session, provider.TagFilterAny())
		if err != nil {
			return err
		}
		if w == nil {
			return fmt.Errorf("no queued activity of %s (%d left)", instances, left)
		}
		if a, ok := w.Item.Kind.(provider.ActivityExecute); ok && slices.Contains(instances, a.Instance) {
			left--
		} else {
			held = append(held, w.LockToken)
		}
	}
	for _, tok := range held {
		if err := p.AbandonWorkItem(ctx, tok, 0, true); err != nil {
			return err
		}
	}
	for { // a few hundred ms
		if n, err := liveLocks(ctx, p); err != nil || n == 0 {
			return err
		}
	}
}

// liveLocks counts the unexpired locks of format 1's lock indexes (by the server's clock).
func liveLocks(ctx context.Context, p *redisprovider.Provider) (int64, error) {
	pre := p.Keyspace().Prefix(0)
	t, err := p.Client().Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range []string{"oq:locked", "wq:locked"} {
		if t := p.Client().Type(ctx, pre+k).Val(); t != "zset" && t != "none" {
			continue // another layout
		}
		n += p.Client().ZCount(ctx, pre+k, fmt.Sprintf("(%d", t.UnixMilli()), "+inf").Val()
	}
	return n, nil
}

// noLocks checks that the stopped runtime left no live lock behind (format 1's lock indexes; the
// locks expireActivity left expired).
func noLocks(ctx context.Context, p *redisprovider.Provider) error {
	n, err := liveLocks(ctx, p)
	if err == nil && n > 0 {
		err = fmt.Errorf("%d live locks left after the runtime stopped", n)
	}
	return err
}

// finish runs the runtime with every tag, does what the manifest says, waits until every instance
// ended and reports each.
// finish's result per instance is an object: state, output, error, custom_status and kv (each left
// out when empty) and executions, the event kinds of each execution's history in order (no
// timestamps). redisprovider's format1_test.go reads it (Format1Result).
func (g *gen) finish(ctx context.Context, m Manifest) (map[string]map[string]any, error) {
	defer g.close()
	p, err := g.open(ctx, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rt, err := runtime(p, "format1gen-finish", laterTag)
	if err != nil {
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Shutdown(sctx)
	}()
	c := dx.NewClient(p)
	for _, s := range m.Start {
		if _, err := c.Start(ctx, s.Orchestration, s.Input, dx.WithInstanceID(s.Instance)); err != nil {
			return nil, fmt.Errorf("start %s: %w", s.Instance, err)
		}
	}
	for _, r := range m.Raise {
		if err := c.RaiseEvent(ctx, r.Instance, r.Name, json.RawMessage(r.Data)); err != nil {
			return nil, fmt.Errorf("raise %s %s: %w", r.Instance, r.Name, err)
		}
	}
	for _, q := range m.Enqueue {
		if err := waitState(ctx, c, q.Instance, "waiting:queue2"); err != nil {
			return nil, err
		}
		if err := c.EnqueueEvent(ctx, q.Instance, q.Name, json.RawMessage(q.Data)); err != nil {
			return nil, fmt.Errorf("enqueue %s %s: %w", q.Instance, q.Name, err)
		}
	}
	out := map[string]map[string]any{}
	for _, id := range m.Instances {
		st, err := c.Wait(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("wait %s: %w", id, err)
		}
		r := map[string]any{"state": string(st.State)}
		set := func(key, v string) {
			if v != "" {
				r[key] = v
			}
		}
		set("output", st.Output)
		if st.Err != nil {
			set("error", st.Err.Error())
		}
		set("custom_status", deref(st.CustomStatus))
		kv, err := c.KVAll(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(kv) > 0 {
			r["kv"] = kv
		}
		execs, err := c.Executions(ctx, id)
		if err != nil {
			return nil, err
		}
		var kinds [][]string
		for _, e := range execs {
			h, err := c.History(ctx, id, e.ExecutionID)
			if err != nil {
				return nil, err
			}
			k := make([]string, 0, len(h))
			for _, ev := range h {
				k = append(k, strings.TrimSuffix(reflect.TypeOf(ev.Kind).Name(), "Event"))
			}
			kinds = append(kinds, k)
		}
		r["executions"] = kinds
		out[id] = r
	}
	return out, nil
}

// calls calls every write method of the provider once (only the one named, when only is set; none
// with list), on
// the instances populate creates, and reports each one's error ("ok" when it succeeded), in order.
// A lock call whose fetch returned nothing uses a made-up token.
func (g *gen) calls(ctx context.Context, only string, list bool) ([]Call, error) {
	defer g.close()
	p, err := g.open(ctx, 0)
	if err != nil {
		return []Call{{"New", err.Error()}}, nil
	}
	defer p.Close()
	raise := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "calls", Data: `"x"`}}
	}
	startItem := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "Done", Input: `"x"`, ExecutionID: 1}}
	}
	sess := sessionID
	work := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "timer-1", ExecutionID: 1, ID: 99, Name: "Echo", Input: `"x"`}}
	sessWork := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "timer-1", ExecutionID: 1, ID: 98, Name: "Echo", Input: `"x"`, SessionID: &sess}}
	cfg := &provider.SessionFetchConfig{OwnerID: "format1gen-calls", LockTimeout: time.Second}
	done := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "timer-1", ExecutionID: 1, ID: 98, Result: `"x"`}}
	ev := provider.Event{EventID: 1000, InstanceID: "done-1", ExecutionID: 1, DuroxideVersion: dx.DuroxideVersion,
		Kind: provider.ExternalEventEvent{Name: "calls", Data: `"x"`}}
	tok, wtok := "1.timer-1", "1.1" // replaced by a fetch's token when one returns an item
	orch := func(it *provider.LockedOrchestrationItem, err error) error {
		if err == nil && it != nil {
			tok = it.LockToken
		}
		return err
	}
	worker := func(it *provider.LockedWorkItem, err error) error {
		if err == nil && it != nil {
			wtok = it.LockToken
		}
		return err
	}
	second := func(_ any, err error) error { return err }
	steps := []struct {
		name string
		do   func() error
	}{
		{"EnqueueForOrchestrator", func() error { return p.EnqueueForOrchestrator(ctx, raise("timer-1"), 0) }},
		{"EnqueueForOrchestrator(delayed)", func() error { return p.EnqueueForOrchestrator(ctx, raise("event-2"), time.Minute) }},
		{"EnqueueForOrchestrator(orphan)", func() error { return p.EnqueueForOrchestrator(ctx, raise("calls-orphan"), 0) }},
		{"EnqueueForOrchestrator(start)", func() error { return p.EnqueueForOrchestrator(ctx, startItem("calls-new"), 0) }},
		{"EnqueueStartIfAbsent", func() error { return second(p.EnqueueStartIfAbsent(ctx, startItem("calls-new-2"))) }},
		{"EnqueueForWorker", func() error { return p.EnqueueForWorker(ctx, work) }},
		{"EnqueueForWorker(session)", func() error { return p.EnqueueForWorker(ctx, sessWork) }},
		{"FetchOrchestrationItem", func() error { return orch(p.FetchOrchestrationItem(ctx, lockTimeout, 0, nil)) }},
		{"RenewOrchestrationItemLock", func() error { return p.RenewOrchestrationItemLock(ctx, tok, lockTimeout) }},
		{"AbandonOrchestrationItem", func() error { return p.AbandonOrchestrationItem(ctx, tok, 0, false) }},
		{"FetchOrchestrationItemLite", func() error { return orch(p.FetchOrchestrationItemLite(ctx, lockTimeout, 0, nil)) }},
		{"HoldOrchestrationItem", func() error { return p.HoldOrchestrationItem(ctx, tok, time.Second, "format1gen calls") }},
		{"AckOrchestrationItem", func() error { return p.AckOrchestrationItem(ctx, tok, provider.OrchestrationAck{ExecutionID: 1}) }},
		{"AckOrchestrationItemAndFetch", func() error {
			return second(p.AckOrchestrationItemAndFetch(ctx, tok, provider.OrchestrationAck{ExecutionID: 1}, lockTimeout, nil, provider.FetchOptions{}))
		}},
		{"FetchWorkItem", func() error { return worker(p.FetchWorkItem(ctx, lockTimeout, 0, nil, provider.TagFilterAny())) }},
		{"RenewWorkItemLock", func() error { return p.RenewWorkItemLock(ctx, wtok, lockTimeout) }},
		{"AbandonWorkItem", func() error { return p.AbandonWorkItem(ctx, wtok, 0, false) }},
		{"FetchWorkItem(session)", func() error { return worker(p.FetchWorkItem(ctx, lockTimeout, 0, cfg, provider.TagFilterAny())) }},
		{"AckWorkItem", func() error { return p.AckWorkItem(ctx, wtok, &done) }},
		{"AckWorkItemAndFetch", func() error {
			return second(p.AckWorkItemAndFetch(ctx, wtok, &done, lockTimeout, cfg, provider.TagFilterAny(), provider.FetchOptions{}))
		}},
		{"RenewSessionLock", func() error {
			return second(p.RenewSessionLock(ctx, []string{cfg.OwnerID, "format1gen-populate-2"}, time.Minute, time.Minute))
		}},
		{"CleanupOrphanedSessions", func() error { return second(p.CleanupOrphanedSessions(ctx, 0)) }},
		{"AppendWithExecution", func() error { return p.AppendWithExecution(ctx, "done-1", 1, []provider.Event{ev}) }},
		{"PruneExecutions", func() error { return second(p.PruneExecutions(ctx, "can-done", provider.PruneOptions{KeepLast: 1})) }},
		{"PruneExecutionsBulk", func() error {
			return second(p.PruneExecutionsBulk(ctx, provider.InstanceFilter{}, provider.PruneOptions{KeepLast: 1}))
		}},
		{"DeleteInstance", func() error { return second(p.DeleteInstance(ctx, "done-1", false)) }},
		{"DeleteInstance(force)", func() error { return second(p.DeleteInstance(ctx, "timer-1", true)) }},
		{"DeleteInstance(force, queued activity)", func() error { return second(p.DeleteInstance(ctx, "tagged-1", true)) }},
		{"DeleteInstancesAtomic", func() error { return second(p.DeleteInstancesAtomic(ctx, []string{"fail-1"}, false)) }},
		{"DeleteInstanceBulk", func() error { return second(p.DeleteInstanceBulk(ctx, provider.InstanceFilter{})) }},
		{"PurgeOrphanMessages", func() error { return second(p.PurgeOrphanMessages(ctx)) }},
	}
	var res []Call
	for _, s := range steps {
		if only != "" && s.name != only {
			continue
		}
		c := Call{Name: s.name, Result: "ok"}
		if list {
			c.Result = ""
		} else if err := s.do(); err != nil {
			c.Result = err.Error()
		}
		res = append(res, c)
	}
	if only != "" && len(res) == 0 {
		return nil, fmt.Errorf("no call named %q", only)
	}
	return res, nil
}

// Call is one provider call's name and its error ("ok" when it succeeded).
type Call struct {
	Name   string `json:"name"`
	Result string `json:"result"`
}
