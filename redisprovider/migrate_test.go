package redisprovider_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// Migrate on a hand-made format-1 namespace (the keys format 2 changes; format1_test.go runs the
// format-1 code itself): refused while a lock or a waiting fetcher is live; then the sequence,
// the gates and the orphan index move, the format record is written and the namespace opens;
// a migration stopped after its first step is finished by the next run; a format-2 or empty
// namespace is left alone.
func TestMigrateFormat1Keys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	c, ns, prefix := p.Client(), p.Keyspace().Namespace(), p.Keyspace().Prefix(0)

	rep, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || rep.From != 0 || len(rep.Steps) != 0 || len(namespaceKeys(t, p)) != 0 {
		t.Fatalf("empty namespace: %+v %v, keys %q: want nothing done", rep, err, namespaceKeys(t, p))
	}
	now := time.Now().UnixMilli()
	c.Set(ctx, prefix+"seq", "41", 0)
	c.Set(ctx, prefix+"oq:next", "99999999999999", 0)
	c.Set(ctx, prefix+"wq:next", strconv.FormatInt(now, 10), 0)
	c.ZAdd(ctx, prefix+"oq:orphans", redis.Z{Score: float64(now + 3600_000), Member: "orphan"})
	c.ZAdd(ctx, prefix+"oq:locked", redis.Z{Score: float64(now + 60_000), Member: "busy"})
	before := namespaceKeys(t, p)
	_, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if !errors.Is(err, redisprovider.ErrNamespaceBusy) {
		t.Fatalf("migrate with a live lock: %v, want ErrNamespaceBusy", err)
	}
	if after := namespaceKeys(t, p); len(after) != len(before) || c.Type(ctx, prefix+"seq").Val() != "string" {
		t.Fatalf("refused migrate changed keys: %q -> %q", before, after)
	}
	c.ZAdd(ctx, prefix+"oq:locked", redis.Z{Score: float64(now - 1), Member: "busy"}) // the lock expired: format 2 reclaims it
	c.ZAdd(ctx, prefix+"wake:filters", redis.Z{Score: float64(now + 60_000), Member: "*"})
	if _, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{}); !errors.Is(err, redisprovider.ErrNamespaceBusy) {
		t.Fatalf("migrate with a waiting fetcher: %v, want ErrNamespaceBusy", err)
	}
	c.Del(ctx, prefix+"wake:filters")

	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{Partitions: 1})
	if err != nil || rep.From != 1 || rep.To != dxredis.Format || len(rep.Steps) != 2 {
		t.Fatalf("migrate: %+v %v", rep, err)
	}
	meta := c.HGetAll(ctx, p.Keyspace().Meta(0)).Val()
	if meta["format"] != "2" || meta["seq"] != "41" || meta["migrating"] != "" {
		t.Fatalf("format record after migrate: %v", meta)
	}
	if c.ZScore(ctx, prefix+"oq:parked", "orphan").Val() != float64(now+3600_000) {
		t.Fatalf("the orphan index did not move to oq:parked")
	}
	for _, k := range dxredis.Format1Keys {
		if typ := c.Type(ctx, prefix+k).Val(); typ != "hash" {
			t.Fatalf("%s is a %s after migrate, want the format-2 hash", k, typ)
		}
	}
	q, err := reopen(p)
	if err != nil {
		t.Fatalf("open after migrate: %v", err)
	}
	_ = q.Close()
	c.ZRem(ctx, prefix+"oq:locked", "busy") // the hand-made lock has no lock hash: not fsck-clean

	// Stopped after its first step: the next run finishes it.
	c.HSet(ctx, p.Keyspace().Meta(0), "migrating", "2")
	c.HDel(ctx, p.Keyspace().Meta(0), "format")
	if _, err := reopen(p); err == nil {
		t.Fatal("a namespace being migrated opened")
	}
	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || len(rep.Steps) != 1 || rep.Steps[0] != "finish" || c.HGet(ctx, p.Keyspace().Meta(0), "format").Val() != "2" {
		t.Fatalf("migrate after a stop: %+v %v", rep, err)
	}
	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || len(rep.Steps) != 0 || rep.From != 2 {
		t.Fatalf("migrate of a format-2 namespace: %+v %v, want nothing done", rep, err)
	}
	if _, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{Partitions: 4}); err == nil {
		t.Fatal("migrate to 4 partitions: want an error (one partition in this release)")
	}
}
