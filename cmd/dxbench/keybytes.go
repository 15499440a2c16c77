package main

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// shortTTL is the longest time to live of a key that redis_kept_bytes_per_orch does not count:
// keys that expire within seconds by design (the 20 s attempt-id keys of retried writes, wake
// lists, the wake-filter set) go away on their own and are reported apart, in
// redis_expiring_bytes_per_orch.
const shortTTL = 60 * time.Second

// keyBytes is MEMORY USAGE summed over the namespace's keys, split by time to live.
type keyBytes struct {
	ok       bool
	kept     int64 // keys without a TTL or with one longer than shortTTL
	expiring int64 // keys that expire within shortTTL
	keys     int64
}

// scanKeyBytes sums MEMORY USAGE over every key of the run's namespace (SCAN on its prefix,
// pipelined MEMORY USAGE + PTTL). ok is false where the server has no MEMORY USAGE (miniredis).
func (b *bench) scanKeyBytes(ctx context.Context) keyBytes {
	prefix := b.p.Keyspace().Prefix(0)
	match := strings.NewReplacer(`\`, `\\`, "{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix) + "*"
	var kb keyBytes
	var batch []string
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		pipe := b.admin.Pipeline()
		mem := make([]*redis.IntCmd, len(batch))
		ttl := make([]*redis.DurationCmd, len(batch))
		for i, k := range batch {
			mem[i] = pipe.MemoryUsage(ctx, k, 0)
			ttl[i] = pipe.PTTL(ctx, k)
		}
		_, _ = pipe.Exec(ctx)
		for i := range batch {
			n, err := mem[i].Result()
			if err == redis.Nil {
				continue // gone since the SCAN
			}
			if err != nil {
				return false
			}
			kb.keys++
			if d, err := ttl[i].Result(); err == nil && d > 0 && d <= shortTTL {
				kb.expiring += n
			} else {
				kb.kept += n
			}
		}
		batch = batch[:0]
		return true
	}
	iter := b.admin.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 && !flush() {
			return keyBytes{}
		}
	}
	if iter.Err() != nil || !flush() {
		return keyBytes{}
	}
	kb.ok = true
	return kb
}
