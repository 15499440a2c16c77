package redisprovider_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/redisprovider"
)

// lines is a slog handler that keeps the messages of the records it gets at level and above.
type lines struct {
	level slog.Level
	mu    sync.Mutex
	msgs  []string
}

func (h *lines) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *lines) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *lines) WithGroup(string) slog.Handler                { return h }
func (h *lines) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}

func (h *lines) find(part string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, part) {
			return m
		}
	}
	return ""
}

// TestGoRedisLogRoutedToSlog: go-redis's own lines (a failed dial), which it prints on stderr,
// reach the provider's Logger at Debug level, and a logger without Debug hears nothing. Not
// parallel: go-redis's logger is one per process and goes to the newest open provider.
func TestGoRedisLogRoutedToSlog(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		h := &lines{level: level}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := redisprovider.New(ctx, redisprovider.Options{Addr: "127.0.0.1:1", Logger: slog.New(h)})
		cancel()
		if err == nil {
			t.Fatal("New on a closed port: no error")
		}
		got := h.find("go-redis")
		switch {
		case level == slog.LevelDebug && !strings.Contains(got, "dial"):
			t.Errorf("Debug logger: no go-redis dial line in %q", h.msgs)
		case level == slog.LevelInfo && got != "":
			t.Errorf("Info logger got go-redis's %q", got)
		}
	}
}
