package redisprovider_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// forEachServer runs fn on the server of client, or on every primary of a cluster.
func forEachServer(t testing.TB, client redis.UniversalClient, fn func(c *redis.Client)) {
	t.Helper()
	switch c := client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(context.Background(), func(_ context.Context, n *redis.Client) error { fn(n); return nil }); err != nil {
			t.Fatal(err)
		}
	case *redis.Client:
		fn(c)
	default:
		t.Fatalf("unexpected client %T", client)
	}
}

// needFunctions skips on miniredis, which has no Redis Functions.
func needFunctions(t *testing.T) {
	t.Helper()
	if backend() == "miniredis" {
		t.Skip("miniredis has no Redis Functions; set DXREDIS_TEST_ADDR or DXREDIS_TEST_CLUSTER")
	}
}

// testClient opens a client on the test server (or cluster); hook, when set, is added to it and
// to every cluster node's client.
func testClient(t *testing.T, hook redis.Hook) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if backend() == "cluster" {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("DXREDIS_TEST_CLUSTER"), ",")})
		if hook != nil {
			cc.OnNewNode(func(n *redis.Client) { n.AddHook(hook) })
		}
		c = cc
	} else {
		c = redis.NewClient(&redis.Options{Addr: os.Getenv("DXREDIS_TEST_ADDR")})
	}
	if hook != nil {
		c.AddHook(hook)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// flakyLoad fails the first FUNCTION LIST or LOAD (what New sends first) as a node that cannot be
// reached would, and records the script commands it sees.
type flakyLoad struct {
	loads atomic.Int64
	seen  sync.Map // lower-case command name -> true
}

func (h *flakyLoad) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *flakyLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.seen.Store(cmd.Name(), true)
		if args := cmd.Args(); cmd.Name() == "function" && len(args) > 1 &&
			(strings.EqualFold(args[1].(string), "load") || strings.EqualFold(args[1].(string), "list")) && h.loads.Add(1) == 1 {
			err := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (h *flakyLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFunctionsKeptWhenANodeIsDownAtStart: when the library cannot be loaded
// on one server at start because it is unreachable (one cluster node down), the provider keeps
// Redis Functions (each node loads the library on its first call) instead of falling back to
// EVALSHA for the rest of its life.
func TestFunctionsKeptWhenANodeIsDownAtStart(t *testing.T) {
	t.Parallel()
	needFunctions(t)
	ctx := context.Background()
	h := &flakyLoad{}
	p, err := redisprovider.NewFromClient(ctx, testClient(t, h), redisprovider.Options{
		Namespace: "fn-" + uuid.NewString()[:8], Logger: quietLogger})
	if err != nil {
		t.Fatalf("New with a node down: %v", err)
	}
	t.Cleanup(func() { dropNamespace(t, p); _ = p.Close() })
	if h.loads.Load() == 0 {
		t.Fatal("the hook saw no FUNCTION LIST or LOAD")
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	_, fcall := h.seen.Load("fcall")
	_, evalsha := h.seen.Load("evalsha")
	if !fcall || evalsha {
		t.Fatalf("after a failed load at start: fcall %v, evalsha %v; want Functions kept", fcall, evalsha)
	}
}

// TestOlderReleaseLibrariesAreDeleted: loading the library deletes the
// libraries of older dxredis releases, and only those: newer releases and libraries whose
// release it cannot tell stay.
func TestOlderReleaseLibrariesAreDeleted(t *testing.T) {
	t.Parallel()
	needFunctions(t)
	ctx := context.Background()
	client := testClient(t, nil)
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	older, newer, unnamed := "dxredis_v0_0_1_"+suffix, "dxredis_v999_0_0_"+suffix, "dxredis_"+suffix
	forEachServer(t, client, func(c *redis.Client) {
		for _, lib := range []string{older, newer, unnamed} {
			code := "#!lua name=" + lib + "\nredis.register_function('" + lib + "_f', function() return 1 end)\n"
			if err := c.FunctionLoad(ctx, code).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Cleanup(func() {
		forEachServer(t, client, func(c *redis.Client) {
			for _, lib := range []string{older, newer, unnamed} {
				_ = c.FunctionDelete(ctx, lib).Err()
			}
		})
	})
	p, err := redisprovider.NewFromClient(ctx, client, redisprovider.Options{Namespace: "fn-" + suffix, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, p); _ = p.Close() })
	forEachServer(t, client, func(c *redis.Client) {
		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "dxredis_*"}).Result()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, l := range libs {
			have[l.Name] = true
		}
		if have[older] || !have[newer] || !have[unnamed] || !have[luascripts.LibraryName()] {
			t.Errorf("%s: libraries after New: older %v newer %v unnamed %v own %v; want only the older one gone",
				c.Options().Addr, have[older], have[newer], have[unnamed], have[luascripts.LibraryName()])
		}
	})
}
