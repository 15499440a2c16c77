package redisprovider

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

// DropNamespace deletes every key of namespace through client (SCAN on its prefix, on every
// primary of a cluster, DEL in batches of 500) and returns how many it deleted. It is for tests,
// benchmarks and decommissioning: unlike the Admin methods it walks the keyspace, and it does not
// care what runs: in-flight turns simply fail. It takes a client, not a Provider, so that it can
// run after the namespace's providers are closed.
func DropNamespace(ctx context.Context, client redis.UniversalClient, namespace string) (int, error) {
	keys, err := dxredis.NewKeyspace(namespace)
	if err != nil {
		return 0, provider.NewPermanentError("drop_namespace", err.Error()).WithKind(provider.ErrInvalidInput)
	}
	// Every partition's tag, and the root's, is "<ns>:0" or "<ns>:<p>/<k>" (keys.go): keys under
	// such a tag, and no other key whose tag merely starts alike.
	match := globQuote("{"+keys.Namespace()+":") + "*" + globQuote("}:") + "*"
	ours := regexp.MustCompile(`^\{` + regexp.QuoteMeta(keys.Namespace()) + `:(0|[0-9]+/[0-9]+)\}:`)
	var deleted atomic.Int64
	drop := func(ctx context.Context, c redis.Cmdable) error {
		// One DEL per slot (a partition): a cluster refuses a multi-key command across slots.
		batches := map[int][]string{}
		flush := func(slot int) error {
			if len(batches[slot]) == 0 {
				return nil
			}
			n, err := c.Del(ctx, batches[slot]...).Result()
			deleted.Add(n)
			delete(batches, slot)
			return err
		}
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			if !ours.MatchString(iter.Val()) {
				continue
			}
			slot := dxredis.Slot(iter.Val())
			if batches[slot] = append(batches[slot], iter.Val()); len(batches[slot]) == 500 {
				if err := flush(slot); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for slot := range batches {
			if err := flush(slot); err != nil {
				return err
			}
		}
		return nil
	}
	if err := forEachPrimary(ctx, client, drop); err != nil {
		return int(deleted.Load()), provider.NewRetryableError("drop_namespace", err.Error()).WithCause(err)
	}
	return int(deleted.Load()), nil
}

// globQuote quotes s for a SCAN MATCH pattern (a namespace's prefix holds braces).
func globQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, "{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// forEachPrimary runs fn on client, or on every primary of a cluster (a namespace's keys are all
// in one slot, so on one primary; the others find none of them).
func forEachPrimary(ctx context.Context, client redis.UniversalClient, fn func(context.Context, redis.Cmdable) error) error {
	if cc, ok := client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, client)
}
