package redisprovider_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// namespaceKeys lists a namespace's keys (relative to its prefix), sorted.
func namespaceKeys(t *testing.T, p *redisprovider.Provider) []string {
	t.Helper()
	ctx, prefix := context.Background(), p.Keyspace().Prefix(0)
	var (
		mu   sync.Mutex // ForEachMaster calls list concurrently
		keys []string
	)
	list := func(ctx context.Context, c redis.Cmdable) error {
		found, err := c.Keys(ctx, strings.NewReplacer("{", `\{`, "}", `\}`).Replace(prefix)+"*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range found {
			keys = append(keys, strings.TrimPrefix(k, prefix))
		}
		return err
	}
	var err error
	if cc, ok := p.Client().(*redis.ClusterClient); ok { // the namespace's slot is on one primary
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return list(ctx, c) })
	} else {
		err = list(ctx, p.Client())
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// reopen opens another provider on p's namespace and client.
func reopen(p *redisprovider.Provider) (*redisprovider.Provider, error) {
	return redisprovider.NewFromClient(context.Background(), p.Client(), redisprovider.Options{Namespace: p.Keyspace().Namespace(), Logger: quietLogger})
}

// A new namespace gets its format record with its first write, not at New (a dxctl call on a
// misspelt namespace writes nothing): format 2, one partition, its hash tag, the enqueue
// sequence; and the keys a format-1 process touches first are hashes it cannot use.
func TestFormatRecordWrittenByFirstWrite(t *testing.T) {
	onePartitionOnly(t, "a namespace of several partitions gets its records from New (TestPartitionsCreatedByNew)")
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	if keys := namespaceKeys(t, p); len(keys) != 0 {
		t.Fatalf("New wrote %q", keys)
	}
	if err := p.EnqueueForOrchestrator(ctx, obStart("fmt-1"), 0); err != nil {
		t.Fatal(err)
	}
	meta := p.Client().HGetAll(ctx, p.Keyspace().Meta(0)).Val()
	tag := strings.TrimSuffix(p.Keyspace().Prefix(0), ":")
	if meta["format"] != "2" || meta["partitions"] != "1" || meta["tags"] != tag || meta["seq"] == "" {
		t.Fatalf("format record %v: want format 2, partitions 1, tags %s and seq", meta, tag)
	}
	for _, k := range dxredis.Format1Keys {
		if typ := p.Client().Type(ctx, p.Keyspace().Prefix(0)+k).Val(); typ != "hash" {
			t.Errorf("%s is a %s, want the format-2 hash", k, typ)
		}
	}
}

// A namespace of another format is refused with a *FormatError that says what to do, before
// anything is written: at New, and by a write of a provider opened before the namespace changed.
func TestFormatOtherFormatsRefused(t *testing.T) {
	onePartitionOnly(t, "writes format-1 keys where a namespace of one keeps them")
	t.Parallel()
	cases := []struct {
		name   string
		damage [][]any // commands on the empty namespace; "$P" is the key prefix
		want   redisprovider.FormatError
		says   string
	}{
		{"format 1", [][]any{{"SET", "$Pseq", "41"}}, redisprovider.FormatError{Found: 1}, "dxctl migrate --ns"},
		{"newer", [][]any{{"HSET", "$Pmeta", "format", "3"}}, redisprovider.FormatError{Found: 3}, "upgrade dxredis"},
		{"migrating", [][]any{{"SET", "$Pseq", "41"}, {"HSET", "$Pmeta", "migrating", "2"}}, redisprovider.FormatError{Found: 1, Migrating: true}, "being migrated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := newTestProvider(t)
			skipFsck(t)
			for _, cmd := range c.damage {
				args := slices.Clone(cmd)
				args[1] = strings.Replace(args[1].(string), "$P", p.Keyspace().Prefix(0), 1)
				if err := p.Client().Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := namespaceKeys(t, p)
			check := func(what string, err error) {
				t.Helper()
				var fe *redisprovider.FormatError
				if !errors.As(err, &fe) || fe.Found != c.want.Found || fe.Migrating != c.want.Migrating {
					t.Fatalf("%s: %v, want a FormatError %+v", what, err, c.want)
				}
				if fe.Namespace != p.Keyspace().Namespace() || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("%s: %q does not name the namespace or say %q", what, err, c.says)
				}
				if after := namespaceKeys(t, p); !slices.Equal(after, before) {
					t.Fatalf("%s wrote: keys %q, were %q", what, after, before)
				}
			}
			q, err := reopen(p)
			if err == nil {
				_ = q.Close()
			}
			check("New", err)
			check("enqueue", p.EnqueueForOrchestrator(ctx, obStart("fmt-2"), 0))
			check("worker enqueue", p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "fmt-2", ExecutionID: 1, ID: 1, Name: "A", Input: "{}"}}))
		})
	}
}
