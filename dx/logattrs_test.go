package dx_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

// keysHandler records, for each record, its message and its attribute keys (the logger's and the
// record's).
type keysHandler struct {
	mu    *sync.Mutex
	recs  *[]string
	attrs []string
}

func (h *keysHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *keysHandler) WithGroup(string) slog.Handler            { return h }
func (h *keysHandler) WithAttrs(as []slog.Attr) slog.Handler {
	keys := append([]string{}, h.attrs...)
	for _, a := range as {
		keys = append(keys, a.Key)
	}
	return &keysHandler{mu: h.mu, recs: h.recs, attrs: keys}
}

func (h *keysHandler) Handle(_ context.Context, r slog.Record) error {
	keys := append([]string{}, h.attrs...)
	r.Attrs(func(a slog.Attr) bool { keys = append(keys, a.Key); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r.Message+" | "+strings.Join(keys, " "))
	return nil
}

// TestLogRecordsRepeatNoAttribute: the runtime's records name each attribute once (a turn's
// logger named the item's execution and version, "unknown" for a start, and the record the
// resolved ones again: version=unknown … version=1.0.0).
func TestLogRecordsRepeatNoAttribute(t *testing.T) {
	p := newProvider(t)
	var recs []string
	var mu sync.Mutex
	o := testOptions()
	o.Logger = slog.New(&keysHandler{mu: &mu, recs: &recs})
	rt := dx.NewRuntime(p, o)
	if err := dx.RegisterVersion(rt, "Fails", "1.0.0", func(ctx dx.Context, in string) (string, error) {
		return "", errors.New("no")
	}); err != nil {
		t.Fatal(err)
	}
	if err := dx.Register(rt, "Done", func(ctx dx.Context, in string) (string, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	for _, name := range []string{"Fails", "Done"} {
		id, err := c.Start(ctx, name, "x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// The runtime logs a turn's outcome after its ack, which Wait may see first.
	finished := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range recs {
			if strings.HasPrefix(r, "dx: orchestration failed") || strings.HasPrefix(r, "dx: orchestration completed") {
				n++
			}
		}
		return n
	}
	waitFor(t, "the records of a failed and a completed orchestration", func() bool { return finished() >= 2 })
	mu.Lock()
	defer mu.Unlock()
	for _, r := range recs {
		_, keys, _ := strings.Cut(r, " | ")
		count := map[string]int{}
		for _, k := range strings.Fields(keys) {
			if count[k]++; count[k] == 2 {
				t.Errorf("attribute %q repeated in %q", k, r)
			}
		}
	}
}
