package dx_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// goldenHistories reads a golden folder's history.jsonl: each instance's events, executions in order.
func goldenHistories(t *testing.T, dir string) map[string][]provider.Event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]provider.Event{}
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		ev, err := provider.DecodeEvent(line)
		if err != nil {
			t.Fatalf("%s line %d: %v", dir, i+1, err)
		}
		out[ev.InstanceID] = append(out[ev.InstanceID], ev)
	}
	for _, evs := range out {
		slices.SortStableFunc(evs, func(a, b provider.Event) int {
			if a.ExecutionID != b.ExecutionID {
				return int(a.ExecutionID) - int(b.ExecutionID)
			}
			return int(a.EventID) - int(b.EventID)
		})
	}
	return out
}

// Every history duroxide recorded replays cleanly against the Go ports of its programs.
func TestReplayGoldenHistories(t *testing.T) {
	for name, prog := range goldenPrograms {
		t.Run(name, func(t *testing.T) {
			rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
			prog.register(&goldenEnv{t: t, rt: rt})
			for id, evs := range goldenHistories(t, filepath.Join("testdata", "golden", name)) {
				if err := dx.Replay(rt, evs); err != nil && !nodeErrorText(err) {
					t.Errorf("instance %s: %v", id, err)
				}
			}
		})
	}
}

// nodeErrorText reports a difference only in how the Node binding that recorded the goldens
// renders an orchestration's error text (see normaliseErrorText).
func nodeErrorText(err error) bool {
	var re *dx.ReplayError
	if !errors.As(err, &re) || !strings.HasPrefix(re.History, "the orchestration fails: ") || !strings.HasPrefix(re.Code, "fails: ") {
		return false
	}
	return stripNodePrefix(strings.TrimPrefix(re.History, "the orchestration fails: ")) ==
		stripNodePrefix(strings.TrimPrefix(re.Code, "fails: "))
}

func helloHistory(t *testing.T) []provider.Event {
	return goldenHistories(t, filepath.Join("testdata", "golden", "01-hello"))["hello"]
}

func helloRuntime(activity string, out func(string) string) *dx.Runtime {
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		s, err := dx.Call[string](ctx, activity, name).Await(ctx)
		return out(s), err
	})
	return rt
}

func replayError(t *testing.T, err error) *dx.ReplayError {
	t.Helper()
	var re *dx.ReplayError
	if !errors.As(err, &re) {
		t.Fatalf("Replay: got %v, want a *dx.ReplayError", err)
	}
	return re
}

func TestReplayReportsRenamedActivity(t *testing.T) {
	same := func(s string) string { return s }
	if err := dx.Replay(helloRuntime("Greet", same), helloHistory(t)); err != nil {
		t.Fatalf("unchanged code: %v", err)
	}
	re := replayError(t, dx.Replay(helloRuntime("Welcome", same), helloHistory(t)))
	if re.Instance != "hello" || re.ExecutionID != 1 || re.EventID != 2 ||
		re.History != `activity Greet("world")` || re.Code != `calls activity Welcome("world")` {
		t.Fatalf("got %#v", re)
	}
	for _, want := range []string{"event 2", `history: activity Greet("world")`, `code:    calls activity Welcome("world")`} {
		if !strings.Contains(re.Error(), want) {
			t.Errorf("message %q lacks %q", re.Error(), want)
		}
	}
}

func TestReplayReportsChangedOutput(t *testing.T) {
	re := replayError(t, dx.Replay(helloRuntime("Greet", strings.ToUpper), helloHistory(t)))
	if re.EventID != 4 || re.History != `the orchestration completes with output "Hello, world!"` ||
		re.Code != `completes with output "HELLO, WORLD!"` {
		t.Fatalf("got %#v", re)
	}
}

func TestReplayReportsExtraAndMissingWork(t *testing.T) {
	hist := helloHistory(t)
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		s, err := dx.Call[string](ctx, "Greet", name).Await(ctx)
		if err != nil {
			return "", err
		}
		_, err = dx.Call[string](ctx, "Audit", s).Await(ctx)
		return s, err
	})
	re := replayError(t, dx.Replay(rt, hist))
	if re.EventID != 4 || re.Code != `calls activity Audit("Hello, world!")` {
		t.Fatalf("extra activity: got %#v", re)
	}

	// A running instance (the activity not completed yet) whose code no longer calls anything.
	rt = dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) { return name, nil })
	re = replayError(t, dx.Replay(rt, hist[:2]))
	if re.EventID != 2 || re.History != `activity Greet("world")` {
		t.Fatalf("missing activity: got %#v", re)
	}
}

func TestReplayRefusesBadInput(t *testing.T) {
	hist := helloHistory(t)
	rt := helloRuntime("Greet", func(s string) string { return s })
	for name, h := range map[string][]provider.Event{
		"empty":         nil,
		"no start":      hist[1:],
		"unordered ids": {hist[0], hist[2], hist[1]},
	} {
		if err := dx.Replay(rt, h); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := dx.Replay(dx.NewRuntime(nil, dx.Options{Logger: quietLogger}), hist); err == nil ||
		!strings.Contains(err.Error(), `"Hello" version 1.0.0 is not registered`) {
		t.Errorf("unregistered: %v", err)
	}
}
