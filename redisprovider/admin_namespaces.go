package redisprovider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
)

// NamespaceInfo is one namespace found on a server.
type NamespaceInfo struct {
	Name       string
	Instances  int64 // instance records (idx:instances); queued starts not run yet are not counted
	Partitions int   // the namespace's partition count
}

// ListNamespaces finds the namespaces on the server of client: those whose enqueue sequence key
// ("{<ns>:0}:seq", created by the first start or message) exists, sorted by name, with their
// instance counts. It SCANs the keyspace (every primary of a cluster) looking at no more than
// maxKeys keys per node (default 1,000,000 when maxKeys <= 0) and reports complete false when it
// stopped there. Like DropNamespace it takes a client, not a Provider: it belongs to no namespace.
func ListNamespaces(ctx context.Context, client redis.UniversalClient, maxKeys int) (found []NamespaceInfo, complete bool, err error) {
	const op = "list_namespaces"
	if maxKeys <= 0 {
		maxKeys = 1_000_000
	}
	var mu sync.Mutex
	names := map[string]bool{}
	complete = true
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for seen := 0; ; {
			keys, next, err := c.Scan(ctx, cursor, "{*:0}:seq", 1000).Result()
			if err != nil {
				return err
			}
			seen += 1000
			mu.Lock()
			for _, k := range keys {
				if ns, ok := strings.CutSuffix(strings.TrimPrefix(k, "{"), ":0}:seq"); ok {
					if _, err := dxredis.NewKeyspace(ns); err == nil {
						names[ns] = true
					}
				}
			}
			if next != 0 && seen >= maxKeys {
				complete = false
			}
			mu.Unlock()
			if next == 0 || seen >= maxKeys {
				return nil
			}
			cursor = next
		}
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, client)
	}
	if err != nil {
		return nil, false, provider.NewRetryableError(op, err.Error()).WithCause(err)
	}
	for _, ns := range slices.Sorted(maps.Keys(names)) {
		keys, _ := dxredis.NewKeyspace(ns)
		root, err := readRoot(ctx, client, keys)
		if err != nil {
			return nil, false, provider.NewRetryableError(op, err.Error()).WithCause(err)
		}
		if root.partitions > 1 {
			keys, _ = keys.WithTags(root.tags)
		}
		info := NamespaceInfo{Name: ns, Partitions: keys.Partitions()}
		for part := range keys.Partitions() {
			n, err := client.ZCard(ctx, keys.Prefix(part)+"idx:instances").Result()
			if err != nil {
				return nil, false, provider.NewRetryableError(op, err.Error()).WithCause(err)
			}
			info.Instances += n
		}
		found = append(found, info)
	}
	return found, complete, nil
}
