// gwbench: W1 (hello: one activity per workflow) on go-workflows' Redis backend, reported like
// dxbench's JSON line, for a side-by-side run. Not part of dxredis (kept out of the repository).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	gwredis "github.com/cschleiden/go-workflows/backend/redis"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/redis/go-redis/v9"
)

func Hello(ctx workflow.Context, n int) (string, error) {
	return workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, HelloActivity, n).Get(ctx)
}

// Fanout: W2, width activities in parallel, then done.
func Fanout(ctx workflow.Context, width int) (int, error) {
	fs := make([]workflow.Future[string], width)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity[string](ctx, workflow.DefaultActivityOptions, HelloActivity, i)
	}
	for _, f := range fs {
		if _, err := f.Get(ctx); err != nil {
			return 0, err
		}
	}
	return width, nil
}

func HelloActivity(ctx context.Context, n int) (string, error) {
	return "hello " + strconv.Itoa(n), nil
}

// doneCounter sees completions in-process (-done ack), at no Redis cost: a CompleteWorkflowTask
// with state Finished that returned without error, like dxbench's counting provider.
type doneCounter struct {
	backend.Backend
	done chan struct{}
}

func (d *doneCounter) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executed, activity, timer []*history.Event, wf []*history.WorkflowEvent) error {
	err := d.Backend.CompleteWorkflowTask(ctx, task, state, executed, activity, timer, wf)
	if err == nil && state == core.WorkflowInstanceStateFinished {
		d.done <- struct{}{}
	}
	return err
}

type nullHandler struct{}

func (nullHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (nullHandler) Handle(context.Context, slog.Record) error { return nil }
func (h nullHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h nullHandler) WithGroup(string) slog.Handler           { return h }

func info(ctx context.Context, rc *redis.Client) (calls, scriptUsec, cpuUsec float64) {
	s := rc.Info(ctx, "commandstats", "cpu").Val()
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "used_cpu_sys:") || strings.HasPrefix(line, "used_cpu_user:") {
			v, _ := strconv.ParseFloat(line[strings.Index(line, ":")+1:], 64)
			cpuUsec += v * 1e6
		}
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name := line[len("cmdstat_"):strings.Index(line, ":")]
		for _, kv := range strings.Split(line[strings.Index(line, ":")+1:], ",") {
			p := strings.SplitN(kv, "=", 2)
			v, _ := strconv.ParseFloat(p[1], 64)
			if p[0] == "calls" && name != "info" {
				calls += v
			}
			if p[0] == "usec" && (name == "evalsha" || name == "eval" || name == "fcall") {
				scriptUsec += v
			}
		}
	}
	return
}

func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "")
	n := flag.Int("n", 2000, "")
	pollers := flag.Int("pollers", 4, "workflow and activity pollers each")
	parallel := flag.Int("parallel", 0, "MaxParallelWorkflowTasks and MaxParallelActivityTasks (0: go-workflows' default, no limit; dxbench's -orch-concurrency and -worker-concurrency are such limits)")
	width := flag.Int("fanout", 0, "0: hello; k: W2, k parallel activities per workflow")
	inflight := flag.Int("inflight", 0, "at most this many workflows started and not finished: each completion starts the next (0: all upfront; needs -done ack)")
	doneBy := flag.String("done", "poll", "completion: poll (one state read per instance, 1 ms between misses) | ack (seen in-process, no Redis cost)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 64})
	prefix := fmt.Sprintf("gw%d", time.Now().UnixNano())
	rb, err := gwredis.NewRedisBackend(rc, gwredis.WithKeyPrefix(prefix),
		gwredis.WithBackendOptions(backend.WithLogger(slog.New(nullHandler{}))))
	if err != nil {
		panic(err)
	}
	var b backend.Backend = rb
	dc := &doneCounter{Backend: rb, done: make(chan struct{}, *n)}
	if *doneBy == "ack" {
		b = dc
	} else if *doneBy != "poll" {
		panic("-done: poll or ack")
	}
	if *inflight < 0 || *inflight > 0 && *doneBy != "ack" {
		panic("-inflight: not negative, and only with -done ack")
	}
	wo := worker.DefaultOptions
	wo.WorkflowPollers, wo.ActivityPollers = *pollers, *pollers
	wo.MaxParallelWorkflowTasks, wo.MaxParallelActivityTasks = *parallel, *parallel
	wo.WorkflowPollingInterval, wo.ActivityPollingInterval = 0, 0
	wo.WorkflowExecutorCacheSize = *n + 100
	w := worker.New(b, &wo)
	w.RegisterWorkflow(Hello)
	w.RegisterWorkflow(Fanout)
	w.RegisterActivity(HelloActivity)
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	c := client.New(b)
	c0, s0, r0 := info(ctx, rc)
	u0 := cpu()
	start := time.Now()
	insts := make([]*workflow.Instance, *n)
	waited := 0 // completions taken from dc.done while starting (-inflight)
	for i := range insts {
		if *inflight > 0 && i-waited >= *inflight {
			<-dc.done
			waited++
		}
		opts := client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("%s-%d", prefix, i)}
		if *width > 0 {
			insts[i], err = c.CreateWorkflowInstance(ctx, opts, Fanout, *width)
		} else {
			insts[i], err = c.CreateWorkflowInstance(ctx, opts, Hello, i)
		}
		if err != nil {
			panic(err)
		}
	}
	for range insts[waited:] {
		if *doneBy != "ack" {
			break
		}
		<-dc.done
	}
	for _, in := range insts { // completion check: one state read per instance, 1 ms between misses
		if *doneBy == "ack" {
			break
		}
		for {
			s, err := b.GetWorkflowInstanceState(ctx, in)
			if err != nil {
				panic(err)
			}
			if s == core.WorkflowInstanceStateFinished {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	secs := time.Since(start).Seconds()
	c1, s1, r1 := info(ctx, rc)
	u1 := cpu()
	nf := float64(*n)
	acts := nf
	if *width > 0 {
		acts = nf * float64(*width)
	}
	out := map[string]any{"workload": "hello", "fanout": *width, "activities_per_sec": acts / secs, "engine": "go-workflows v1.2.0", "n": *n, "seconds": secs,
		"orch_per_sec": nf / secs, "redis_cmds_per_orch": (c1 - c0) / nf, "redis_script_usec_per_orch": (s1 - s0) / nf,
		"redis_cpu_usec_per_orch": (r1 - r0) / nf, "client_cpu_usec_per_orch": (u1 - u0) / nf, "pollers": *pollers, "parallel": *parallel, "done": *doneBy, "inflight": *inflight}
	j, _ := json.Marshal(out)
	fmt.Println(string(j))
	cancel()
	os.Exit(0)
}
