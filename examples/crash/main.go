// Command crash shows that nothing is lost or done twice when a worker process dies: this process
// starts 1,000 orchestrations, two worker processes (this program re-run with -worker) run them, and
// one of them is killed with SIGKILL halfway. The survivor takes the dead one's work over once its
// locks expire, and every instance completes exactly once.
//
//	go run ./examples/crash            # against $DXREDIS_ADDR / 127.0.0.1:6379, or an embedded miniredis
//	go run ./examples/crash -n 200     # fewer orchestrations
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// The activity and the orchestration, by name and types.
var (
	Double   = dx.NewActivity[int, int]("Double")
	Pipeline = dx.NewOrchestration[int, int]("Pipeline")
)

// double is the activity: slow enough for the kill to land while work is in flight.
func double(ctx context.Context, n int) (int, error) {
	select {
	case <-time.After(2 * time.Millisecond):
		return 2 * n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// pipeline doubles its input three times, one activity after the other.
func pipeline(ctx dx.Context, n int) (int, error) {
	for range 3 {
		var err error
		if n, err = Double.Call(ctx, n).Await(ctx); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// options: short locks, so the survivor takes over a second after the kill.
func options() dx.Options {
	return dx.Options{OrchestrationLockTimeout: time.Second, WorkerLockTimeout: time.Second,
		OrchestrationConcurrency: 4, WorkerConcurrency: 8, Logger: exenv.Logger()}
}

func main() {
	worker := flag.Bool("worker", false, "run as a worker process (started by the demo itself)")
	n := flag.Int("n", 1000, "orchestrations to start")
	flag.Parse()
	var err error
	if *worker {
		err = runWorker()
	} else {
		err = runDemo(*n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash:", err)
		os.Exit(1)
	}
}

// runWorker runs a runtime on the namespace the demo passes until it is killed or told to stop.
func runWorker() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: os.Getenv("CRASH_ADDR"), Namespace: os.Getenv("CRASH_NS"), Logger: exenv.Logger()})
	if err != nil {
		return err
	}
	defer p.Close()
	rt := dx.NewRuntime(p, options())
	if err := errors.Join(Double.Register(rt, double), Pipeline.Register(rt, pipeline)); err != nil {
		return err
	}
	return rt.Run(ctx)
}

func runDemo(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, addr, closeAll, err := exenv.ConnectAddr(ctx, "crash")
	if err != nil {
		return err
	}
	defer closeAll()
	c := dx.NewClient(p)
	ids := make([]string, n)
	for i := range ids {
		if ids[i], err = Pipeline.Start(ctx, c, i, dx.WithInstanceID(fmt.Sprintf("pipeline-%04d", i))); err != nil {
			return err
		}
	}
	fmt.Printf("started %d orchestrations\n", n)
	var workers []*exec.Cmd
	defer func() {
		for _, w := range workers {
			_ = w.Process.Signal(syscall.SIGTERM) // cleanup: a worker that already exited is fine
			_ = w.Wait()
		}
	}()
	for range 2 {
		w, err := startWorker(addr, p.Keyspace().Namespace())
		if err != nil {
			return fmt.Errorf("could not start a worker process: %w", err)
		}
		workers = append(workers, w)
	}
	// Kill one worker halfway.
	for done := 0; done < n/2; {
		time.Sleep(20 * time.Millisecond)
		if done, err = completed(ctx, c); err != nil {
			return err
		}
	}
	if err := workers[0].Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	killed := time.Now()
	done, err := completed(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("killed worker %d with SIGKILL after %d of %d completed\n", workers[0].Process.Pid, done, n)
	for _, id := range ids {
		if _, err := c.Wait(ctx, id); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
	}
	fmt.Printf("all %d completed %v after the kill\n", n, time.Since(killed).Round(time.Millisecond))
	if err := checkExactlyOnce(ctx, p, ids); err != nil {
		return err
	}
	fmt.Printf("checked: every instance completed exactly once, with the right output and an intact history\n")
	return nil
}

func startWorker(addr, ns string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-worker")
	cmd.Env = append(os.Environ(), "CRASH_ADDR="+addr, "CRASH_NS="+ns)
	cmd.Stderr = os.Stderr
	return cmd, cmd.Start()
}

func completed(ctx context.Context, c *dx.Client) (int, error) {
	ids, err := c.ListInstances(ctx, dx.StateCompleted)
	return len(ids), err
}

// checkExactlyOnce reads every history: one completion per activity, ids contiguous, one terminal
// event, and the output 8 times the input.
func checkExactlyOnce(ctx context.Context, p provider.Provider, ids []string) error {
	for i, id := range ids {
		h, err := p.Read(ctx, id)
		if err != nil {
			return err
		}
		answered := map[uint64]int{}
		terminal := 0
		for j, ev := range h {
			if ev.EventID != uint64(j+1) {
				return fmt.Errorf("%s: event ids not contiguous at %d", id, j)
			}
			if ev.SourceEventID != nil && ev.EventType() == "ActivityCompleted" {
				answered[*ev.SourceEventID]++
			}
			if ev.IsTerminal() {
				terminal++
			}
		}
		for _, ev := range h {
			if ev.EventType() == "ActivityScheduled" && answered[ev.EventID] != 1 {
				return fmt.Errorf("%s: activity %d completed %d times in the history", id, ev.EventID, answered[ev.EventID])
			}
		}
		last, ok := h[len(h)-1].Kind.(provider.OrchestrationCompletedEvent)
		if terminal != 1 || !ok || last.Output != fmt.Sprint(8*i) {
			return fmt.Errorf("%s: %d terminal events, last %s", id, terminal, h[len(h)-1].EventType())
		}
	}
	return nil
}
