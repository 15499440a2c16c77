package redisprovider

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// go-redis has one logger per process (redis.SetLogger), which by default prints unstructured
// lines to stderr: one per failed dial during an outage. The first New replaces it with
// goRedisLog, which hands each line to the Logger of the newest open provider at Debug level, so
// it is quiet unless that logger enables Debug. With several providers, the lines go to the newest
// one still open (go-redis does not say which client a line is about); with none open they are
// dropped. An application that wants go-redis's lines elsewhere calls redis.SetLogger after its
// first New: the provider installs its logger only once.
var goRedisLog struct {
	once sync.Once
	mu   sync.Mutex
	open []*Provider // oldest first
}

type goRedisLogger struct{}

func (goRedisLogger) Printf(ctx context.Context, format string, args ...any) {
	goRedisLog.mu.Lock()
	var l *slog.Logger
	if n := len(goRedisLog.open); n > 0 {
		l = goRedisLog.open[n-1].opts.Logger
	}
	goRedisLog.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	if l == nil || !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	line := strings.TrimPrefix(fmt.Sprintf(format, args...), "redis: ")
	l.Log(ctx, slog.LevelDebug, "dxredis: go-redis: "+line)
}

// routeGoRedisLog installs goRedisLogger (once per process) and makes p's Logger receive
// go-redis's lines until p closes or a newer provider opens.
func routeGoRedisLog(p *Provider) {
	goRedisLog.once.Do(func() { redis.SetLogger(goRedisLogger{}) })
	goRedisLog.mu.Lock()
	defer goRedisLog.mu.Unlock()
	goRedisLog.open = append(goRedisLog.open, p)
}

// unrouteGoRedisLog stops sending go-redis's lines to p's Logger.
func unrouteGoRedisLog(p *Provider) {
	goRedisLog.mu.Lock()
	defer goRedisLog.mu.Unlock()
	goRedisLog.open = slices.DeleteFunc(goRedisLog.open, func(q *Provider) bool { return q == p })
}
