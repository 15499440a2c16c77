// Package webfixture fills a namespace for the tests of dxctl web (its handler tests and the browser
// tests, a module of their own): a fan-out with a failing activity, a timer and a child, and
// instances that wait for an event, one of them under a hostile id.
package webfixture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// The fixture's instances.
const (
	FanOut = "order-fanout"
	Child  = FanOut + "-child" // the fan-out's child: <fan-out id>-child
	Waiter = "waiter-1"
	// Hostile is an id a page must show as text: markup, quotes and non-ASCII.
	Hostile = `<script>alert("x")</script>'"&amp;ü→🙂`
)

// Fixture is a running runtime over the filled namespace.
type Fixture struct {
	Runtime *dx.Runtime
	Client  *dx.Client
	stop    context.CancelFunc
	done    chan struct{}
}

func register(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Work", func(_ context.Context, n int) (int, error) {
		if n == 2 {
			return 0, errors.New("item 2 failed")
		}
		return n * 10, nil
	})
	dx.Register(rt, "FanOut", func(ctx dx.Context, n int) (int, error) {
		ctx.SetCustomStatus(`{"phase":"fan-out"}`)
		fs := make([]dx.Future[int], n)
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Work", i)
		}
		sum := 0
		for _, f := range fs {
			v, err := f.Await(ctx)
			if err == nil {
				sum += v
			}
		}
		if err := ctx.Sleep(20 * time.Millisecond); err != nil {
			return 0, err
		}
		c, err := dx.CallSub[int](ctx, "Child", sum, dx.WithInstanceID(ctx.InstanceID()+"-child")).Await(ctx)
		if err != nil {
			return 0, err
		}
		ctx.SetKV("total", fmt.Sprint(c))
		ctx.SetCustomStatus(`{"phase":"done"}`)
		return c, nil
	})
	dx.Register(rt, "Child", func(ctx dx.Context, n int) (int, error) {
		return dx.Call[int](ctx, "Work", n).Await(ctx)
	})
	// Looper continues as new until its input reaches 2 (registered, not started by Fill).
	dx.Register(rt, "Looper", func(ctx dx.Context, n int) (int, error) {
		if n < 2 {
			return 0, dx.ContinueAsNew(ctx, n+1)
		}
		return n, nil
	})
	dx.Register(rt, "Waiter", func(ctx dx.Context, in string) (string, error) {
		return dx.WaitEvent[string](ctx, "go").Await(ctx)
	})
}

// Fill starts a runtime on p, starts the fixture's instances and returns once the fan-out has
// completed and the waiters wait. Stop the runtime with Close.
func Fill(ctx context.Context, p provider.Provider) (*Fixture, error) {
	rt := dx.NewRuntime(p, dx.Options{WorkerConcurrency: 4, PollTimeout: 200 * time.Millisecond,
		MinPollInterval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	register(rt)
	rctx, stop := context.WithCancel(context.Background())
	f := &Fixture{Runtime: rt, Client: dx.NewClient(p), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		_ = rt.Run(rctx)
	}()
	c := f.Client
	if _, err := c.Start(ctx, "FanOut", 5, dx.WithInstanceID(FanOut)); err != nil {
		f.Close()
		return nil, err
	}
	for _, id := range []string{Waiter, Hostile} {
		if _, err := c.Start(ctx, "Waiter", "hi", dx.WithInstanceID(id)); err != nil {
			f.Close()
			return nil, err
		}
	}
	st, err := c.Wait(ctx, FanOut)
	if err == nil && st.State != dx.StateCompleted {
		err = fmt.Errorf("fan-out ended %s: %v", st.State, st.Err)
	}
	for _, id := range []string{Waiter, Hostile} {
		if err != nil {
			break
		}
		err = f.waitSubscribed(ctx, id)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// waitSubscribed polls until the instance's history shows its wait for the event.
func (f *Fixture) waitSubscribed(ctx context.Context, id string) error {
	for {
		h, err := f.Client.History(ctx, id, 0)
		if err == nil {
			for _, e := range h {
				if _, ok := e.Kind.(provider.ExternalSubscribedEvent); ok {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %q never waited for its event: %w", id, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close stops the runtime and waits for it.
func (f *Fixture) Close() {
	f.stop()
	<-f.done
}
