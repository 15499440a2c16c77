package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The orchestration functions of the workloads.

// helloOrch (W1): one activity, then complete with its result.
type helloOrch struct{}

func (helloOrch) decide(t *turn) {
	if len(t.activities) == 0 {
		t.scheduleActivity("Hello", t.input)
		return
	}
	if a := t.activities[0]; a.done {
		t.complete(a.result)
	}
}

// fanoutOrch (W2): width activities in parallel; complete when all have completed.
type fanoutOrch struct{ width int }

func (o fanoutOrch) decide(t *turn) {
	if len(t.activities) == 0 {
		for i := range o.width {
			t.scheduleActivity("Work", `{"part":`+strconv.Itoa(i)+`}`)
		}
		return
	}
	if t.doneActivities() == len(t.activities) {
		t.complete(`{"parts":` + strconv.Itoa(len(t.activities)) + `}`)
	}
}

// timerOrch (W3): wait one durable timer, then complete. Background instances wait bgDelay.
type timerOrch struct {
	delay, bgDelay time.Duration
	bgPrefix       string
}

func (o timerOrch) decide(t *turn) {
	if len(t.timers) == 0 {
		d := o.delay
		if strings.HasPrefix(t.instance, o.bgPrefix) {
			d = o.bgDelay
		}
		t.createTimer(d)
		return
	}
	if t.timers[0].fired {
		t.complete(`"timer fired"`)
	}
}

// longOrch (W4): steps sequential activities, then complete.
type longOrch struct{ steps int }

func (o longOrch) decide(t *turn) {
	done := t.doneActivities()
	if done < len(t.activities) {
		return
	}
	if done < o.steps {
		t.scheduleActivity("Step", `{"step":`+strconv.Itoa(done+1)+`}`)
		return
	}
	t.complete(`{"steps":` + strconv.Itoa(done) + `}`)
}

// waitOrch (wake): subscribe to the external event "go", complete when it arrives.
type waitOrch struct{}

func (waitOrch) decide(t *turn) {
	if !t.subscribed["go"] {
		t.subscribe("go")
		return
	}
	if _, ok := t.received["go"]; ok {
		t.complete(`"went"`)
	}
}

// runState tracks the orchestrations of one workload by instance index.
type runState struct {
	prefix    string
	n         int
	starts    []atomic.Int64 // unix ns of each StartOrchestration enqueue
	started   atomic.Int64
	completed atomic.Int64
	lastDone  atomic.Int64 // unix ns of the latest completion
	lat       latencies    // start -> complete
	done      chan struct{}
	doneOnce  sync.Once
	freed     chan struct{} // a completion (for -inflight)

	// Instances the dx client started get ids of its own (UUIDs): register maps them to
	// indexes; a completion seen before its id was registered waits in early.
	mu    sync.Mutex
	ids   map[string]int
	early map[string]time.Time
}

func newRunState(prefix string, n int) *runState {
	return &runState{prefix: prefix, n: n, starts: make([]atomic.Int64, n), done: make(chan struct{}), freed: make(chan struct{}, 1),
		ids: map[string]int{}, early: map[string]time.Time{}}
}

// register maps an instance id the client chose to index i.
func (r *runState) register(id string, i int) {
	r.mu.Lock()
	r.ids[id] = i
	t1, done := r.early[id]
	delete(r.early, id)
	r.mu.Unlock()
	if done {
		r.completeIndex(i, t1)
	}
}

func (r *runState) instance(i int) string { return r.prefix + strconv.Itoa(i) }

func (r *runState) index(instance string) (int, bool) {
	rest, ok := strings.CutPrefix(instance, r.prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && i < r.n
}

// complete records that instance completed at t1 (the ack carrying OrchestrationCompleted returned).
func (r *runState) complete(instance string, t1 time.Time) {
	i, ok := r.index(instance)
	if !ok {
		r.mu.Lock()
		if i, ok = r.ids[instance]; !ok {
			r.early[instance] = t1
		}
		r.mu.Unlock()
		if !ok {
			return
		}
	}
	r.completeIndex(i, t1)
}

func (r *runState) completeIndex(i int, t1 time.Time) {
	if t0 := r.starts[i].Load(); t0 != 0 {
		r.lat.add(t1.Sub(time.Unix(0, t0)))
	}
	r.lastDone.Store(t1.UnixNano())
	n := r.completed.Add(1)
	select {
	case r.freed <- struct{}{}:
	default:
	}
	if n == int64(r.n) {
		r.doneOnce.Do(func() { close(r.done) })
	}
}

// enqueue with the runtime client's retry on retryable errors.
func enqueueOrch(ctx context.Context, p provider.Provider, item provider.WorkItem) error {
	var err error
	for attempt := range 5 {
		if err = p.EnqueueForOrchestrator(ctx, item, 0); err == nil || !provider.IsRetryable(err) {
			return err
		}
		sleepCtx(ctx, 10*time.Millisecond<<attempt)
	}
	return err
}

func startItem(instance, name string, input string) provider.WorkItem {
	v := "1.0.0"
	return provider.WorkItem{Kind: provider.StartOrchestration{Instance: instance, Orchestration: name,
		Input: input, Version: &v, ExecutionID: 1}}
}

// enqueueStarts starts every instance of r with start: all at once over several client
// goroutines when rate and inflight are 0, else paced at rate per second from begin, or one
// goroutine keeping at most inflight instances started and not completed.
func enqueueStarts(ctx context.Context, r *runState, rate float64, inflight int, begin time.Time, start func(i int) error) error {
	workers := 8
	if rate > 0 {
		workers = 4
	}
	if inflight > 0 {
		workers = 1
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= r.n {
					return
				}
				if rate > 0 {
					sleepCtx(ctx, time.Until(begin.Add(time.Duration(float64(i)/rate*float64(time.Second)))))
				}
				for inflight > 0 && r.started.Load()-r.completed.Load() >= int64(inflight) && ctx.Err() == nil {
					select {
					case <-r.freed:
					case <-ctx.Done():
					}
				}
				r.starts[i].Store(time.Now().UnixNano())
				if err := start(i); err != nil {
					errc <- fmt.Errorf("start %d: %w", i, err)
					return
				}
				r.started.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// startInput is the input of the i-th measured instance.
func startInput(i int) string { return `{"n":` + strconv.Itoa(i) + `}` }

// orchSpec describes a workload of n orchestrations driven to completion.
type orchSpec struct {
	name, orchName string
	n              int
	code           orchestration // the fake runtime's orchestration (-mode provider)
	rate           float64
	inflight       int // at most this many started and not completed (0: no limit)
	workers        bool
	hooks          turnHooks // extra observers, called after the completion bookkeeping
	// setup runs with the dispatchers running, before the measured window (W3's background
	// timers); start starts an instance of orchName with the given id and input "{}".
	setup func(ctx context.Context, start func(id string) error) error
	// sample runs every 100 ms during the measured window.
	sample func()
}

// measured is what a driver hands to the report: the window and the run's counters.
type measured struct {
	r          *runState
	d          *dispatchers
	mode       string
	before     serverStats
	after      serverStats
	cpuBefore  time.Duration
	cpuAfter   time.Duration
	keysBefore keyBytes // MEMORY USAGE of the namespace's keys, outside the measured window
	keysAfter  keyBytes
	calls      int64 // provider calls of the dispatchers over the window (countingProvider)
	begin, end time.Time
	enqueueDur time.Duration // rate 0: time to enqueue every start before dispatching
}

// driver runs one workload's dispatchers in one mode and starts its instances.
type driver struct {
	start      func() error // starts the dispatchers
	stop       func()       // stops them and waits
	startIndex func(i int) error
	startNamed func(id string) error
}

// runOrchestrations drives one workload of orchestrations from start to completion, through
// the fake runtime (-mode provider) or the dx runtime (-mode runtime).
func (b *bench) runOrchestrations(parent context.Context, mode string, spec orchSpec) (*measured, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r := newRunState(spec.name+"-", spec.n)
	cp := &countingProvider{Provider: b.p, noBatchFetch: b.cfg.noBatchFetch}
	var dp provider.Provider = cp
	if !b.cfg.noExt {
		dp = cp.exposed() // the played dispatchers use ack-and-fetch-next when the provider has it
	}
	d := newDispatchers(dp, spec.code, b.cfg.payloadBytes, func(err error) { cancel(err) })
	d.actDelay = b.cfg.activityDelay
	fetched := spec.hooks.fetched
	acked := func(o *turnObs) {
		if o.completed {
			r.complete(o.instance, o.done)
		}
		if spec.hooks.acked != nil {
			spec.hooks.acked(o)
		}
	}
	var drv driver
	if mode == modeRuntime {
		drv = b.runtimeDriver(ctx, spec, r, cp, d, fetched, acked)
	} else {
		d.hooks = turnHooks{fetched: fetched, acked: acked}
		dctx, stop := context.WithCancel(ctx)
		drv = driver{
			start: func() error {
				d.startOrch(dctx, b.cfg.orchConcurrency, dispatcherPoll)
				if spec.workers {
					d.startWorkers(dctx, b.cfg.workerConcurrency, dispatcherPoll)
				}
				return nil
			},
			stop: func() { stop(); d.wait() },
			startIndex: func(i int) error {
				return enqueueOrch(ctx, b.p, startItem(r.instance(i), spec.orchName, startInput(i)))
			},
			startNamed: func(id string) error { return enqueueOrch(ctx, b.p, startItem(id, spec.orchName, "{}")) },
		}
	}
	m := &measured{r: r, d: d, mode: mode}
	running := false
	defer func() {
		if running {
			drv.stop()
		}
	}()
	startDispatchers := func() error {
		if running {
			return nil
		}
		running = true
		return drv.start()
	}
	if spec.setup != nil {
		if err := startDispatchers(); err != nil {
			return nil, err
		}
		if err := spec.setup(ctx, drv.startNamed); err != nil {
			return nil, err
		}
	}
	if !b.cfg.noKeyBytes {
		m.keysBefore = b.scanKeyBytes(ctx)
	}
	m.before, m.cpuBefore = readStats(ctx, b.admin, b.hook), processCPU()
	calls0 := cp.calls.Load()
	enqErr := make(chan error, 1)
	if spec.rate <= 0 && spec.inflight <= 0 {
		t := time.Now()
		if err := enqueueStarts(ctx, r, 0, 0, t, drv.startIndex); err != nil {
			return nil, causeOr(ctx, err)
		}
		m.enqueueDur = time.Since(t)
		enqErr <- nil
		if err := startDispatchers(); err != nil {
			return nil, err
		}
		m.begin = time.Now()
	} else {
		if err := startDispatchers(); err != nil {
			return nil, err
		}
		m.begin = time.Now()
		go func() { enqErr <- enqueueStarts(ctx, r, spec.rate, spec.inflight, m.begin, drv.startIndex) }()
	}
	if err := b.waitDone(ctx, spec.name, m, enqErr, spec.sample); err != nil {
		return m, err
	}
	m.after, m.cpuAfter = readStats(ctx, b.admin, b.hook), processCPU()
	m.calls = cp.calls.Load() - calls0
	m.end = time.Unix(0, r.lastDone.Load())
	if !b.cfg.noKeyBytes {
		m.keysAfter = b.scanKeyBytes(ctx)
	}
	if mode == modeRuntime {
		if err := b.verifyCompleted(ctx, r); err != nil {
			return m, err
		}
	}
	return m, nil
}

func causeOr(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// waitDone waits for every orchestration of m to complete, printing progress every second once
// the run is longer than a few seconds, and gives up on -stall without progress or on -timeout.
func (b *bench) waitDone(ctx context.Context, name string, m *measured, enqErr <-chan error, sample func()) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(b.cfg.timeout)
	lastProgress, lastCount := time.Now(), int64(-1)
	lastPrint, lastPrintCount := time.Now(), int64(0)
	for {
		select {
		case <-m.r.done:
			return nil
		case err := <-enqErr:
			if err != nil {
				return causeOr(ctx, err)
			}
			enqErr = nil
		case <-ctx.Done():
			if c := context.Cause(ctx); c != nil {
				return c
			}
			return ctx.Err()
		case now := <-tick.C:
			if sample != nil {
				sample()
			}
			c := m.r.completed.Load()
			// Progress is any turn, activity or start: W4's orchestrations all complete near the end.
			if work := c + m.d.turns.Load() + m.d.activities.Load() + m.r.started.Load(); work != lastCount {
				lastProgress, lastCount = now, work
			}
			if now.Sub(lastProgress) > b.cfg.stall {
				_, errs := m.d.errorSummary()
				return fmt.Errorf("%s stalled: %d/%d completed, no turn or activity for %v (errors: %s)", name, c, m.r.n, b.cfg.stall, orNone(errs))
			}
			if now.After(deadline) {
				return fmt.Errorf("%s timed out after %v: %d/%d completed", name, b.cfg.timeout, c, m.r.n)
			}
			if el := now.Sub(m.begin); el >= 3*time.Second && now.Sub(lastPrint) >= time.Second {
				errs, _ := m.d.errorSummary()
				fmt.Fprintf(b.stderr, "dxbench: [%s %5.1fs] started %d/%d completed %d (%.0f/s) turns %d activities %d errors %d\n",
					name, el.Seconds(), m.r.started.Load(), m.r.n, c, float64(c-lastPrintCount)/now.Sub(lastPrint).Seconds(),
					m.d.turns.Load(), m.d.activities.Load(), errs)
				lastPrint, lastPrintCount = now, c
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// report turns a measured window into a Result with the fields every orchestration workload has.
func (b *bench) report(name string, m *measured) *Result {
	res := &Result{Workload: name, Mode: m.mode, N: m.r.n, Backend: b.backend, Completed: int(m.r.completed.Load()),
		Turns: m.d.turns.Load(), Activities: m.d.activities.Load(), BaselineScriptCallsPerSec: num(b.baseline)}
	res.Errors, res.ErrorDetail = m.d.errorSummary()
	secs := m.end.Sub(m.begin).Seconds()
	if secs > 0 {
		res.Seconds = num(secs)
		res.OrchPerSec = num(float64(res.Completed) / secs)
		res.ActivitiesPerSec = num(float64(res.Activities) / secs)
		res.TurnsPerSec = num(float64(res.Turns) / secs)
	}
	res.P50Ms, res.P99Ms = m.r.lat.p50p99()
	diff := diffStats(m.before, m.after)
	n := float64(m.r.n)
	res.RedisCmdsPerOrch = num(float64(diff.commands) / n)
	res.RoundTripsPerOrch = num(float64(m.calls) / n)
	if diff.cmdstats {
		res.RedisRoundTripsPerOrch = num(float64(diff.roundTrips) / n)
		res.RedisUsecPerOrch = num(float64(diff.usec["evalsha"]+diff.usec["eval"]+diff.usec["fcall"]) / n)
	}
	if diff.memOK {
		res.RedisBytesPerOrch = num(float64(diff.memory) / n)
	}
	if m.keysBefore.ok && m.keysAfter.ok {
		res.RedisKeptBytesPerOrch = num(float64(m.keysAfter.kept-m.keysBefore.kept) / n)
		res.RedisExpiringBytesPerOrch = num(float64(m.keysAfter.expiring-m.keysBefore.expiring) / n)
	}
	if diff.cpuOK && diff.seconds > 0 {
		res.RedisCPUCores = num(diff.cpuSeconds / diff.seconds)
		res.RedisCPUUsecPerOrch = num(diff.cpuSeconds * 1e6 / n)
	}
	if cpu := m.cpuAfter - m.cpuBefore; cpu > 0 && diff.seconds > 0 {
		res.ClientCPUCores = num(cpu.Seconds() / diff.seconds)
		res.ClientCPUUsecPerOrch = num(float64(cpu.Microseconds()) / n)
	}
	res.diff = diff
	res.enqueueDur = m.enqueueDur
	return res
}

// --- W1 hello, W2 fanout, W4 longhistory -------------------------------------------------------

func (b *bench) runHello(ctx context.Context, mode string, n int) (*Result, error) {
	m, err := b.runOrchestrations(ctx, mode, orchSpec{name: "hello", orchName: "Hello", n: n, code: helloOrch{},
		rate: b.cfg.rate, inflight: b.cfg.inflight, workers: true})
	if err != nil {
		return nil, err
	}
	res := b.report("hello", m)
	res.Rate, res.Inflight = b.cfg.rate, b.cfg.inflight
	return res, nil
}

func (b *bench) runFanout(ctx context.Context, mode string, n int) (*Result, error) {
	m, err := b.runOrchestrations(ctx, mode, orchSpec{name: "fanout", orchName: "FanOut", n: n,
		code: fanoutOrch{width: b.cfg.fanoutWidth}, rate: b.cfg.rate, inflight: b.cfg.inflight, workers: true})
	if err != nil {
		return nil, err
	}
	res := b.report("fanout", m)
	res.Rate, res.Inflight = b.cfg.rate, b.cfg.inflight
	return res, nil
}

// runChildren runs the children workload (an orchestration calling -fanout-width
// sub-orchestrations of one activity each) on the dx runtime.
func (b *bench) runChildren(ctx context.Context, mode string, n int) (*Result, error) {
	m, err := b.runOrchestrations(ctx, mode, orchSpec{name: "children", orchName: "Children", n: n, rate: b.cfg.rate, inflight: b.cfg.inflight, workers: true})
	if err != nil {
		return nil, err
	}
	res := b.report("children", m)
	res.Rate, res.Inflight = b.cfg.rate, b.cfg.inflight
	return res, nil
}

// historyBuckets are W4's history sizes (events in the fetched history) that turn latency is
// reported for; a turn falls in a bucket within ±max(5, 5%) events.
var historyBuckets = []int{0, 100, 250, 500, 1000}

func bucketOf(events int) int {
	for i, t := range historyBuckets {
		tol := max(5, t/20)
		if t == 0 {
			tol = 0
		}
		if events >= t-tol && events <= t+tol {
			return i
		}
	}
	return -1
}

func (b *bench) runLongHistory(ctx context.Context, mode string, n int) (*Result, error) {
	type bucket struct{ total, fetch, ack latencies }
	buckets := make([]bucket, len(historyBuckets))
	hooks := turnHooks{acked: func(o *turnObs) {
		if i := bucketOf(o.historyEvents); i >= 0 {
			buckets[i].total.add(o.done.Sub(o.fetchStart))
			buckets[i].fetch.add(o.fetched.Sub(o.fetchStart))
			buckets[i].ack.add(o.done.Sub(o.ackStart))
		}
	}}
	m, err := b.runOrchestrations(ctx, mode, orchSpec{name: "longhistory", orchName: "LongHistory", n: n,
		code: longOrch{steps: b.cfg.lhSteps}, rate: b.cfg.rate, inflight: b.cfg.inflight, workers: true, hooks: hooks})
	if err != nil {
		return nil, err
	}
	res := b.report("longhistory", m)
	res.Rate, res.Inflight = b.cfg.rate, b.cfg.inflight
	for i, t := range historyBuckets {
		bk := &buckets[i]
		if bk.total.count() == 0 {
			continue
		}
		tb := TurnBucket{HistoryEvents: t, Turns: bk.total.count()}
		tb.P50Ms, tb.P99Ms = bk.total.p50p99()
		tb.FetchP50Ms, _ = bk.fetch.p50p99()
		tb.AckP50Ms, _ = bk.ack.p50p99()
		res.TurnLatency = append(res.TurnLatency, tb)
	}
	if len(res.TurnLatency) > 1 && res.TurnLatency[0].P50Ms != nil && *res.TurnLatency[0].P50Ms > 0 {
		last := res.TurnLatency[len(res.TurnLatency)-1]
		for _, tb := range res.TurnLatency {
			if tb.HistoryEvents == 500 {
				last = tb
			}
		}
		if last.P50Ms != nil {
			res.TurnGrowth = num(*last.P50Ms / *res.TurnLatency[0].P50Ms)
		}
	}
	return res, nil
}

// --- W3 timer ---------------------------------------------------------------------------------

// timerBgPrefix starts the ids of W3's background instances, which wait 1 h instead of
// -timer-delay.
const timerBgPrefix = "timerbg-"

func (b *bench) runTimer(ctx context.Context, mode string, n int) (*Result, error) {
	var lateness latencies
	var created, fired, bgArmed atomic.Int64
	var pendSum, pendSamples, pendMax int64
	bg := b.cfg.timerBackground
	code := timerOrch{delay: b.cfg.timerDelay, bgDelay: time.Hour, bgPrefix: timerBgPrefix}
	hooks := turnHooks{
		fetched: func(o *turnObs) {
			if strings.HasPrefix(o.instance, timerBgPrefix) {
				return
			}
			for _, fireAt := range o.firedAt {
				lateness.addMs(float64(o.fetched.UnixMicro())/1000 - float64(fireAt))
				fired.Add(1)
			}
		},
		acked: func(o *turnObs) {
			if strings.HasPrefix(o.instance, timerBgPrefix) {
				bgArmed.Add(int64(o.timersArmed))
				return
			}
			created.Add(int64(o.timersArmed))
		},
	}
	spec := orchSpec{name: "timer", orchName: "Timer", n: n, code: code, rate: b.cfg.timerRate, workers: false, hooks: hooks}
	if bg > 0 {
		spec.setup = func(ctx context.Context, start func(id string) error) error {
			// Background instances arm a 1 h timer each and stay Running: the pending timers the
			// measured ones share the store with.
			prefix := fmt.Sprintf("%s%d-", timerBgPrefix, time.Now().UnixNano())
			var next atomic.Int64
			var wg sync.WaitGroup
			var firstErr atomic.Value
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1) - 1; i < int64(bg) && ctx.Err() == nil; i = next.Add(1) - 1 {
						if err := start(prefix + strconv.FormatInt(i, 10)); err != nil {
							firstErr.CompareAndSwap(nil, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err, _ := firstErr.Load().(error); err != nil {
				return fmt.Errorf("background timers: %w", err)
			}
			deadline := time.Now().Add(b.cfg.stall)
			for bgArmed.Load() < int64(bg) {
				if time.Now().After(deadline) {
					return fmt.Errorf("background timers: only %d/%d armed after %v", bgArmed.Load(), bg, b.cfg.stall)
				}
				sleepCtx(ctx, 10*time.Millisecond)
				if ctx.Err() != nil {
					return causeOr(ctx, ctx.Err())
				}
			}
			return nil
		}
	}
	spec.sample = func() {
		p := bgArmed.Load() + created.Load() - fired.Load()
		pendSum += p
		pendSamples++
		pendMax = max(pendMax, p)
	}
	m, err := b.runOrchestrations(ctx, mode, spec)
	if err != nil {
		return nil, err
	}
	res := b.report("timer", m)
	res.Rate = b.cfg.timerRate
	res.LatenessP50Ms, res.LatenessP99Ms = lateness.p50p99()
	if q := lateness.quantiles(1); q != nil {
		res.LatenessMaxMs = num(q[0])
	}
	if pendSamples > 0 {
		res.TimersPendingAvg = num(float64(pendSum) / float64(pendSamples))
		res.TimersPendingMax = pendMax
	}
	res.TimerBackground = bg
	return res, nil
}

// --- wake -------------------------------------------------------------------------------------

// runWake measures enqueue -> fetch-return latency with one fetcher long-polling (poll 5 s):
// for each instance, StartOrchestration, then (once that turn is acked) ExternalRaised "go".
func (b *bench) runWake(parent context.Context, _ string, n int) (*Result, error) {
	const poll = 5 * time.Second
	const settle = 3 * time.Millisecond // let the fetcher get back into its blocking wait
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r := newRunState("wake-", n)
	var wake latencies
	var enqueuedAt atomic.Int64
	acked := make(chan struct{}, 1)
	cp := &countingProvider{Provider: b.p}
	d := newDispatchers(cp, waitOrch{}, b.cfg.payloadBytes, func(err error) { cancel(err) })
	d.hooks.fetched = func(o *turnObs) {
		if t0 := enqueuedAt.Swap(0); t0 != 0 {
			wake.add(o.fetched.Sub(time.Unix(0, t0)))
		}
	}
	d.hooks.acked = func(o *turnObs) {
		if o.completed {
			r.complete(o.instance, o.done)
		}
		select {
		case acked <- struct{}{}:
		default:
		}
	}
	m := &measured{r: r, d: d, mode: modeProvider}
	dctx, stop := context.WithCancel(ctx)
	defer func() { stop(); d.wait() }()
	d.startOrch(dctx, 1, poll)
	sleepCtx(ctx, 50*time.Millisecond)
	m.before, m.cpuBefore = readStats(ctx, b.admin, b.hook), processCPU()
	calls0 := cp.calls.Load()
	m.begin = time.Now()
	step := func(item provider.WorkItem, i int, start bool) error {
		sleepCtx(ctx, settle)
		t0 := time.Now()
		enqueuedAt.Store(t0.UnixNano())
		if start {
			r.starts[i].Store(t0.UnixNano())
		}
		if err := enqueueOrch(ctx, b.p, item); err != nil {
			return causeOr(ctx, err)
		}
		if start {
			r.started.Add(1)
		}
		select {
		case <-acked:
			return nil
		case <-time.After(b.cfg.stall):
			_, errs := d.errorSummary()
			return fmt.Errorf("wake: no turn acked %v after an enqueue (errors: %s)", b.cfg.stall, orNone(errs))
		case <-ctx.Done():
			return causeOr(ctx, ctx.Err())
		}
	}
	lastPrint := time.Now()
	for i := range n {
		inst := r.instance(i)
		if err := step(startItem(inst, "WaitForEvent", "{}"), i, true); err != nil {
			return nil, err
		}
		if err := step(provider.WorkItem{Kind: provider.ExternalRaised{Instance: inst, Name: "go", Data: `"now"`}}, i, false); err != nil {
			return nil, err
		}
		if el := time.Since(m.begin); el >= 3*time.Second && time.Since(lastPrint) >= time.Second {
			fmt.Fprintf(b.stderr, "dxbench: [wake %5.1fs] %d/%d instances, %d wakes measured\n", el.Seconds(), i+1, n, wake.count())
			lastPrint = time.Now()
		}
	}
	m.after, m.cpuAfter = readStats(ctx, b.admin, b.hook), processCPU()
	m.calls = cp.calls.Load() - calls0
	m.end = time.Unix(0, r.lastDone.Load())
	res := b.report("wake", m)
	res.WakeP50Ms, res.WakeP99Ms = wake.p50p99()
	res.WakeSamples = wake.count()
	// For wake the headline latency is enqueue -> fetch return, not start -> complete (which
	// includes the pauses between steps).
	res.P50Ms, res.P99Ms = res.WakeP50Ms, res.WakeP99Ms
	return res, nil
}

// --- idle -------------------------------------------------------------------------------------

// runIdle counts what one idle orchestration fetcher (and, when the worker side works, one idle
// worker fetcher) costs Redis: poll 2 s, for -idle.
func (b *bench) runIdle(ctx context.Context, _ string, _ int) (*Result, error) {
	const poll = 2 * time.Second
	res := &Result{Workload: "idle", Mode: modeProvider, Backend: b.backend, BaselineScriptCallsPerSec: num(b.baseline)}
	polls := b.cfg.idle.Seconds() / poll.Seconds()
	measure := func(worker bool) (statsDiff, error) {
		dctx, stop := context.WithCancel(ctx)
		d := newDispatchers(b.p, helloOrch{}, b.cfg.payloadBytes, func(error) {})
		if worker {
			d.startWorkers(dctx, 1, poll)
		} else {
			d.startOrch(dctx, 1, poll)
		}
		// Let the fetcher drain wake tokens left by earlier workloads and settle into its wait.
		sleepCtx(ctx, time.Second)
		before := readStats(ctx, b.admin, b.hook)
		sleepCtx(ctx, b.cfg.idle)
		after := readStats(ctx, b.admin, b.hook)
		stop()
		d.wait()
		if n, errs := d.errorSummary(); n > 0 {
			return statsDiff{}, fmt.Errorf("idle fetcher: %s", errs)
		}
		return diffStats(before, after), ctx.Err()
	}
	od, err := measure(false)
	if err != nil {
		return nil, err
	}
	res.IdleSeconds = num(b.cfg.idle.Seconds())
	res.IdleCmdsPerPoll = num(float64(od.commands) / polls)
	if od.cmdstats {
		res.IdleRoundTripsPerPoll = num(float64(od.roundTrips) / polls)
	}
	res.idleOrch = &od
	if _, err := b.p.FetchWorkItem(ctx, time.Second, 0, nil, provider.TagFilterDefaultOnly()); err != nil {
		res.IdleWorkerNote = "worker fetcher not measured: " + err.Error()
	} else {
		wd, err := measure(true)
		if err != nil {
			return nil, err
		}
		res.IdleWorkerCmdsPerPoll = num(float64(wd.commands) / polls)
		if wd.cmdstats {
			res.IdleWorkerRoundTripsPerPoll = num(float64(wd.roundTrips) / polls)
		}
		res.idleWorker = &wd
	}
	return res, nil
}
