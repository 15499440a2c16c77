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
	t.Parallel()
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

// TestWatchStatusFirstWatchIsSubscribed: the first watch returns only once Redis confirmed the
// subscription, so a change published right after it is not lost (before, go-redis's Subscribe
// returned at once, and a client's first Wait could miss the finish and sleep out its 3 s
// polling fallback).
func TestWatchStatusFirstWatchIsSubscribed(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	for i := range 30 {
		p, err := New(context.Background(), Options{Addr: mr.Addr(), Namespace: "watch", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ch, stop := p.WatchStatus("a")
		if err := p.rdb.Publish(context.Background(), p.keys.StatusChannel(0), "a").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: a change published right after the first watch was lost", i)
		}
		stop()
		_ = p.Close()
	}
}
