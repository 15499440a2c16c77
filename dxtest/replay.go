package dxtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// The replayer: the CI guard against breaking running orchestrations with a code change. Record
// histories (dxctl, a production store, or Env.History written out), keep them as testdata, and
// replay them against the current code in a test:
//
//	func TestHistoriesStillReplay(t *testing.T) {
//		rt := dx.NewRuntime(nil, dx.Options{}) // no provider needed: nothing runs
//		app.Register(rt)                       // the same registrations as production
//		dxtest.ReplayFile(t, rt, "testdata/histories.jsonl")
//	}

// ReplayFile replays every instance recorded in a JSON-lines file of events (one event per line,
// as duroxide and dxredis store them) against the orchestrations registered on rt, and fails the
// test with a diff for each instance the code no longer reproduces.
func ReplayFile(t testing.TB, rt *dx.Runtime, path string) {
	t.Helper()
	evs, err := ReadHistoryFile(path)
	if err != nil {
		t.Fatalf("dxtest: %v", err)
	}
	if err := Replay(rt, evs); err != nil {
		t.Errorf("dxtest: %s no longer replays (a running instance would fail with a nondeterminism error):\n%v", path, err)
	}
}

// ReplayInstance reads every execution of instance from p and replays it against rt, failing the
// test on nondeterminism.
func ReplayInstance(t testing.TB, rt *dx.Runtime, p provider.Provider, instance string) {
	t.Helper()
	evs, err := ReadHistory(context.Background(), p, instance)
	if err != nil {
		t.Fatalf("dxtest: %v", err)
	}
	if err := Replay(rt, evs); err != nil {
		t.Errorf("dxtest: instance %s no longer replays:\n%v", instance, err)
	}
}

// RequireReplayable checks, with dx.CheckReplay, that the build registered on rt replays the
// live instances of p (every running one, and the most recently finished of each orchestration
// version), and fails the test with the report, naming each instance it would break, the event and
// both sides, when it does not. For a CI step before a deploy: point p at the namespace (or a copy
// of it) the build is about to run on, register the build on rt (dx.NewRuntime(nil, ...) will
// do), and pass at most one dx.CheckReplayOptions (default: dx's defaults, among them its read
// budget of 500 reads per second). A failed read fails the test too.
func RequireReplayable(t testing.TB, p provider.Provider, rt *dx.Runtime, opts ...dx.CheckReplayOptions) *dx.CheckReplayReport {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("dxtest: RequireReplayable takes at most one dx.CheckReplayOptions, got %d", len(opts))
	}
	var o dx.CheckReplayOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	rep, err := dx.CheckReplay(context.Background(), p, rt, o)
	if err != nil {
		t.Fatalf("dxtest: the replay check failed: %v", err)
	}
	if !rep.OK() {
		t.Errorf("dxtest: this build would break live instances:\n%v", rep)
	}
	return rep
}

// Replay replays the events of one or more instances (grouped by instance id, executions and
// events ordered by id) with dx.Replay and joins the errors, one *dx.ReplayError per instance.
func Replay(rt *dx.Runtime, events []provider.Event) error {
	if len(events) == 0 {
		return errors.New("no events to replay")
	}
	var order []string
	byInstance := map[string][]provider.Event{}
	for _, ev := range events {
		if _, ok := byInstance[ev.InstanceID]; !ok {
			order = append(order, ev.InstanceID)
		}
		byInstance[ev.InstanceID] = append(byInstance[ev.InstanceID], ev)
	}
	var errs []error
	for _, id := range order {
		evs := byInstance[id]
		slices.SortStableFunc(evs, func(a, b provider.Event) int {
			if a.ExecutionID != b.ExecutionID {
				return cmpUint(a.ExecutionID, b.ExecutionID)
			}
			return cmpUint(a.EventID, b.EventID)
		})
		if err := dx.Replay(rt, evs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ReadHistory reads every execution of an instance from a provider, oldest first.
func ReadHistory(ctx context.Context, p provider.Provider, instance string) ([]provider.Event, error) {
	admin, ok := p.Admin()
	if !ok {
		return nil, errors.New("reading all executions needs a provider with management support (Provider.Admin)")
	}
	execs, err := admin.ListExecutions(ctx, instance)
	if err != nil {
		return nil, fmt.Errorf("list executions of %s: %w", instance, err)
	}
	if len(execs) == 0 {
		return nil, fmt.Errorf("instance %q not found", instance)
	}
	var out []provider.Event
	for _, x := range execs {
		evs, err := p.ReadWithExecution(ctx, instance, x)
		if err != nil {
			return nil, fmt.Errorf("read %s execution %d: %w", instance, x, err)
		}
		out = append(out, evs...)
	}
	return out, nil
}

// ReadHistoryFile reads a JSON-lines file of events, one event per line (blank lines are skipped).
func ReadHistoryFile(path string) ([]provider.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []provider.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		ev, err := provider.DecodeEvent(b)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// WriteHistoryFile writes events as JSON lines, the format ReadHistoryFile reads: record an
// instance's history once (ReadHistory) and keep it as testdata for ReplayFile.
func WriteHistoryFile(path string, events []provider.Event) error {
	var b bytes.Buffer
	for _, ev := range events {
		j, err := provider.Marshal(ev)
		if err != nil {
			return err
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
