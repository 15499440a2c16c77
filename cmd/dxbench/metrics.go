package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// latencies collects durations (as float ms) from many goroutines.
type latencies struct {
	mu sync.Mutex
	ms []float64
}

func (l *latencies) add(d time.Duration) { l.addMs(float64(d) / float64(time.Millisecond)) }

func (l *latencies) addMs(ms float64) {
	l.mu.Lock()
	l.ms = append(l.ms, ms)
	l.mu.Unlock()
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ms)
}

// quantiles returns the requested quantiles (nearest rank), or nil when there are no samples.
func (l *latencies) quantiles(qs ...float64) []float64 {
	l.mu.Lock()
	s := slices.Clone(l.ms)
	l.mu.Unlock()
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	out := make([]float64, len(qs))
	for i, q := range qs {
		rank := int(math.Ceil(q*float64(len(s)))) - 1
		out[i] = s[min(max(rank, 0), len(s)-1)]
	}
	return out
}

// p50p99 returns the median and 99th percentile (nil pointers without samples).
func (l *latencies) p50p99() (*float64, *float64) {
	q := l.quantiles(0.5, 0.99)
	if q == nil {
		return nil, nil
	}
	return num(q[0]), num(q[1])
}

// num rounds to 3 decimals and returns a pointer (nil-able JSON number).
func num(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	r := math.Round(x*1000) / 1000
	return &r
}

func fmtMs(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*p, 'f', 3, 64) + " ms"
}

func fmtNum(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}

// countingHook counts the commands and round trips the provider's script client sends (the
// blocking client that runs BLPOP is internal to the provider; its calls come from commandstats).
type countingHook struct {
	cmds, trips atomic.Int64
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// serverStats is one INFO snapshot. On real Redis it has commandstats, memory and cpu; miniredis
// only reports total_commands_processed.
type serverStats struct {
	at          time.Time
	cmdstats    bool
	calls       map[string]int64 // command -> calls (script-internal redis.call()s included)
	usec        map[string]int64
	totalCmds   int64
	memOK       bool
	usedMemory  int64
	cpuOK       bool
	cpuSeconds  float64 // used_cpu_user + used_cpu_sys of the server
	hookTrips   int64   // provider script-client round trips (countingHook)
	hookCmds    int64
	clientCount int64
}

// blockingCommands are the calls that can only come from clients (scripts cannot block).
var blockingCommands = []string{"blpop", "brpop", "bzpopmin", "bzpopmax", "blmove", "brpoplpush", "blmpop", "bzmpop"}

func readStats(ctx context.Context, c *redis.Client, hook *countingHook) serverStats {
	s := serverStats{at: time.Now(), calls: map[string]int64{}, usec: map[string]int64{}}
	if hook != nil {
		s.hookTrips, s.hookCmds = hook.trips.Load(), hook.cmds.Load()
	}
	txt, err := c.Info(ctx, "commandstats", "memory", "cpu", "clients").Result()
	if err == nil {
		s.cmdstats = true
		for _, line := range strings.Split(txt, "\n") {
			line = strings.TrimSpace(line)
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(k, "cmdstat_"):
				name := strings.TrimPrefix(k, "cmdstat_")
				for _, f := range strings.Split(v, ",") {
					fk, fv, _ := strings.Cut(f, "=")
					n, _ := strconv.ParseInt(fv, 10, 64)
					switch fk {
					case "calls":
						s.calls[name] = n
					case "usec":
						s.usec[name] = n
					}
				}
			case k == "used_memory":
				s.usedMemory, _ = strconv.ParseInt(v, 10, 64)
				s.memOK = true
			case k == "used_cpu_user" || k == "used_cpu_sys":
				f, _ := strconv.ParseFloat(v, 64)
				s.cpuSeconds += f
				s.cpuOK = true
			case k == "connected_clients":
				s.clientCount, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		for _, n := range s.calls {
			s.totalCmds += n
		}
		return s
	}
	// miniredis: INFO takes one section and knows only clients and stats.
	if txt, err := c.Info(ctx, "stats").Result(); err == nil {
		for _, line := range strings.Split(txt, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "total_commands_processed" {
				s.totalCmds, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return s
}

// statsDiff is what happened on the server between two snapshots.
type statsDiff struct {
	cmdstats   bool
	commands   int64            // every command executed, script-internal calls included, INFO excluded
	byCommand  map[string]int64 // calls per command
	usec       map[string]int64
	roundTrips int64 // provider round trips: script-client calls + blocking calls
	memOK      bool
	memory     int64
	cpuOK      bool
	cpuSeconds float64
	seconds    float64
}

func diffStats(a, b serverStats) statsDiff {
	d := statsDiff{cmdstats: a.cmdstats && b.cmdstats, byCommand: map[string]int64{}, usec: map[string]int64{},
		seconds: b.at.Sub(a.at).Seconds()}
	if d.cmdstats {
		for k, v := range b.calls {
			if k == "info" {
				continue
			}
			if n := v - a.calls[k]; n > 0 {
				d.byCommand[k] = n
				d.commands += n
			}
		}
		for k, v := range b.usec {
			if n := v - a.usec[k]; n > 0 {
				d.usec[k] = n
			}
		}
	} else {
		d.commands = b.totalCmds - a.totalCmds - 1 // the first INFO itself
	}
	d.roundTrips = b.hookTrips - a.hookTrips
	for _, k := range blockingCommands {
		d.roundTrips += d.byCommand[k]
	}
	d.memOK = a.memOK && b.memOK
	d.memory = b.usedMemory - a.usedMemory
	d.cpuOK = a.cpuOK && b.cpuOK
	d.cpuSeconds = b.cpuSeconds - a.cpuSeconds
	return d
}

// topCommands renders the busiest commands of a diff, e.g. "fcall 14000 (41us/call), blpop 3".
func (d statsDiff) topCommands(k int) string {
	if !d.cmdstats {
		return "n/a (no INFO commandstats on this server)"
	}
	type kv struct {
		name  string
		calls int64
	}
	var all []kv
	for n, c := range d.byCommand {
		all = append(all, kv{n, c})
	}
	slices.SortFunc(all, func(x, y kv) int { return int(y.calls - x.calls) })
	var parts []string
	for i, e := range all {
		if i == k {
			break
		}
		p := fmt.Sprintf("%s %d", e.name, e.calls)
		if e.name == "evalsha" || e.name == "eval" || e.name == "fcall" {
			p += fmt.Sprintf(" (%.1f us/call)", float64(d.usec[e.name])/float64(e.calls))
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// baseline runs a trivial EVALSHA ("return 1") loop at the given concurrency for d and returns
// calls per second: the ceiling of script round trips this client machine and server reach.
func baseline(ctx context.Context, c *redis.Client, concurrency int, d time.Duration) (float64, error) {
	if d <= 0 {
		return 0, nil
	}
	script := redis.NewScript("return 1")
	if err := script.Load(ctx, c).Err(); err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	var calls atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range max(concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := script.EvalSha(ctx, c, nil).Err(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	return float64(calls.Load()) / time.Since(start).Seconds(), nil
}

// redisVersion reads redis_version from INFO server ("" when the server does not say).
func redisVersion(ctx context.Context, c *redis.Client) string {
	txt, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(txt, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "redis_version" {
			return v
		}
	}
	return ""
}

// reachable reports whether something accepts TCP connections at addr.
func reachable(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
