package redisprovider

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestWatchStatusGoroutineEndsWithClose: the subscriber goroutine does not outlive Close, and a
// watch after Close starts nothing.
func TestWatchStatusGoroutineEndsWithClose(t *testing.T) {
	mr := miniredis.RunT(t)
	p, err := New(context.Background(), Options{Addr: mr.Addr(), Namespace: "watch", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := p.WatchStatus("a")
	defer stop()
	done := p.hub.done
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the fan-out goroutine outlived Close")
	}
	p.WatchStatus("b")
	if p.hub.done != done {
		t.Fatal("a watch after Close started a new subscriber")
	}
}
