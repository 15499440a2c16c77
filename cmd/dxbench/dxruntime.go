package main

// -mode runtime: the workloads driven through the real dx runtime (dx.NewRuntime, dx.Register)
// with real orchestrations, started through dx.NewClient.
//
// Completion is observed in-process: the runtime's provider is wrapped by countingProvider,
// which sees every AckOrchestrationItem the dispatchers make; an ack carrying status Completed
// that returned is a completion, exactly the point -mode provider measures. This costs Redis
// nothing. Waiting through the client instead (Client.Wait per instance) would poll
// GetInstanceInfo + GetCustomStatus per instance, backing off to 100 ms: with 2,000 instances in
// flight, up to ~40,000 commands/s of polling, which would dominate what is measured. After the
// window, one ListInstances(Completed) through the client checks that Redis agrees.

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// The modes (-mode).
const (
	modeRuntime  = "runtime"  // the dx runtime runs real orchestrations
	modeProvider = "provider" // the fake runtime (runtime.go) plays the dispatchers over the provider
	modeBoth     = "both"     // provider, then runtime, each workload; reported side by side
)

// runtimeDriver runs a workload's orchestrations on a dx runtime over cp, and starts them with a
// dx client over the unwrapped provider (the client's calls are not counted as round trips).
func (b *bench) runtimeDriver(ctx context.Context, spec orchSpec, r *runState, cp *countingProvider, d *dispatchers,
	fetched, acked func(*turnObs)) driver {
	var stopping atomic.Bool
	cp.failed = func(op string, err error) {
		if !stopping.Load() {
			d.noteErr(op, err)
		}
	}
	cp.workAcked = func() { d.activities.Add(1) }
	if fetched != nil {
		cp.fetched = func(item *provider.LockedOrchestrationItem, start, at time.Time) { fetched(observe(item, start, at)) }
	}
	cp.acked = func(ack *provider.OrchestrationAck, f fetchInfo, ackStart, done time.Time) {
		d.turns.Add(1)
		o := &turnObs{instance: f.instance, historyEvents: f.historyEvents, fetchStart: f.start, fetched: f.at}
		o.observeAck(ack, ackStart, done)
		acked(o)
	}
	rt := dx.NewRuntime(cp.exposed(), dx.Options{
		OrchestrationConcurrency: b.cfg.orchConcurrency,
		WorkerConcurrency:        b.cfg.workerConcurrency,
		OrchestrationPollers:     b.cfg.orchPollers,
		WorkerPollers:            b.cfg.workerPollers,
		ActivityAckBatch:         b.cfg.ackBatch,
		PollTimeout:              dispatcherPoll,
		Logger:                   b.logger,
		Metrics:                  benchMetrics{d},
	})
	registerWorkloads(rt, b.cfg)
	client := dx.NewClient(b.p)
	return driver{
		// The dispatcher goroutines carry the profile label dxbench=runtime (they inherit it
		// from the goroutine that starts them): go tool pprof -tagfocus dxbench=runtime.
		start: func() error {
			var err error
			pprof.Do(ctx, pprof.Labels("dxbench", "runtime"), func(ctx context.Context) {
				err = rt.Start(context.WithoutCancel(ctx))
			})
			return err
		},
		stop: func() {
			stopping.Store(true)
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rt.Shutdown(sctx); err != nil {
				fmt.Fprintf(b.stderr, "dxbench: runtime shutdown: %v\n", err)
			}
		},
		startIndex: func(i int) error {
			id, err := startRetry(ctx, func() (string, error) {
				return client.Start(ctx, spec.orchName, json.RawMessage(startInput(i)))
			})
			if err == nil {
				r.register(id, i)
			}
			return err
		},
		startNamed: func(id string) error {
			_, err := startRetry(ctx, func() (string, error) {
				return client.Start(ctx, spec.orchName, json.RawMessage("{}"), dx.WithInstanceID(id))
			})
			return err
		},
	}
}

// startRetry retries a client start on retryable errors, as enqueueOrch does.
func startRetry(ctx context.Context, start func() (string, error)) (string, error) {
	var err error
	for attempt := range 5 {
		var id string
		if id, err = start(); err == nil || !provider.IsRetryable(err) {
			return id, err
		}
		sleepCtx(ctx, 10*time.Millisecond<<attempt)
	}
	return "", err
}

// verifyCompleted checks, through the client and outside the measured window, that Redis lists
// every instance the runtime was seen completing as Completed.
func (b *bench) verifyCompleted(ctx context.Context, r *runState) error {
	ids, err := dx.NewClient(b.p).ListInstances(ctx, dx.StateCompleted)
	if err != nil {
		return fmt.Errorf("listing completed instances: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := r.ids[id]; ok {
			n++
		}
	}
	if n != r.n {
		return fmt.Errorf("the runtime acknowledged %d completions, but Redis lists %d of the %d instances as Completed",
			r.completed.Load(), n, r.n)
	}
	return nil
}

// benchMetrics counts the runtime's poison and unregistered items as errors of the workload
// (failed provider calls are counted by countingProvider).
type benchMetrics struct{ d *dispatchers }

func (m benchMetrics) Count(name string, _ int64, l dx.Labels) {
	if name == dx.MetricPoison || name == dx.MetricUnregistered {
		m.d.noteErr(name, fmt.Errorf("%s %s%s", l.Queue, l.Orchestration, l.Activity))
	}
}

func (benchMetrics) Observe(string, time.Duration, dx.Labels) {}

// The workloads' orchestrations and activities as dx code.

type benchInput struct {
	N int `json:"n"`
}

type partInput struct {
	Part int `json:"part"`
}

type stepInput struct {
	Step int `json:"step"`
}

type countOutput struct {
	Parts int `json:"parts,omitempty"`
	Steps int `json:"steps,omitempty"`
}

// registerWorkloads registers W1 Hello, W2 FanOut, W3 Timer and W4 LongHistory, and their
// activities, whose result is a string of -payload-bytes.
func registerWorkloads(rt *dx.Runtime, cfg *config) {
	payload := strings.Repeat("x", cfg.payloadBytes)
	work := func(ctx context.Context) (string, error) {
		if cfg.activityDelay > 0 {
			t := time.NewTimer(cfg.activityDelay)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-t.C:
			}
		}
		return payload, nil
	}
	dx.RegisterActivity(rt, "Hello", func(ctx context.Context, _ benchInput) (string, error) { return work(ctx) })
	dx.RegisterActivity(rt, "Work", func(ctx context.Context, _ partInput) (string, error) { return work(ctx) })
	dx.RegisterActivity(rt, "Step", func(ctx context.Context, _ stepInput) (string, error) { return work(ctx) })

	// W1: one activity, then complete with its result.
	dx.Register(rt, "Hello", func(ctx dx.Context, in benchInput) (string, error) {
		return dx.Call[string](ctx, "Hello", in).Await(ctx)
	})
	// W2: -fanout-width activities in parallel; complete when all have completed.
	dx.Register(rt, "FanOut", func(ctx dx.Context, _ benchInput) (countOutput, error) {
		futs := make([]dx.Future[string], cfg.fanoutWidth)
		for i := range futs {
			futs[i] = dx.Call[string](ctx, "Work", partInput{Part: i})
		}
		if _, err := dx.All(ctx, futs...); err != nil {
			return countOutput{}, err
		}
		return countOutput{Parts: len(futs)}, nil
	})
	// children: -fanout-width sub-orchestrations of one activity each, auto-named
	// (<parent>::sub::<n>, in the root's partition) or, with -named-children, named by the parent
	// (placed by their own ids).
	dx.Register(rt, "Child", func(ctx dx.Context, in partInput) (string, error) {
		return dx.Call[string](ctx, "Work", in).Await(ctx)
	})
	dx.Register(rt, "Children", func(ctx dx.Context, _ benchInput) (countOutput, error) {
		futs := make([]dx.Future[string], cfg.fanoutWidth)
		for i := range futs {
			var opts []dx.SubOption
			if cfg.namedChildren {
				opts = append(opts, dx.WithInstanceID(ctx.InstanceID()+"-c"+strconv.Itoa(i)))
			}
			futs[i] = dx.CallSub[string](ctx, "Child", partInput{Part: i}, opts...)
		}
		if _, err := dx.All(ctx, futs...); err != nil {
			return countOutput{}, err
		}
		return countOutput{Parts: len(futs)}, nil
	})
	// W3: one durable timer of -timer-delay (1 h for the background instances), then complete.
	dx.Register(rt, "Timer", func(ctx dx.Context, _ dx.Raw) (string, error) {
		d := cfg.timerDelay
		if strings.HasPrefix(ctx.InstanceID(), timerBgPrefix) {
			d = time.Hour
		}
		if err := ctx.Sleep(d); err != nil {
			return "", err
		}
		return "timer fired", nil
	})
	// W4: -lh-activities sequential activities, then complete.
	dx.Register(rt, "LongHistory", func(ctx dx.Context, _ benchInput) (countOutput, error) {
		for i := 1; i <= cfg.lhSteps; i++ {
			if _, err := dx.Call[string](ctx, "Step", stepInput{Step: i}).Await(ctx); err != nil {
				return countOutput{}, err
			}
		}
		return countOutput{Steps: cfg.lhSteps}, nil
	})
}
