package redisprovider_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// loadCounter counts the commands that send script sources to the server.
type loadCounter struct {
	mu    sync.Mutex
	loads []string
}

func (*loadCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *loadCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) >= 2 {
			name := strings.ToLower(fmt.Sprint(args[0], " ", args[1]))
			if name == "function load" || name == "script load" {
				c.mu.Lock()
				c.loads = append(c.loads, name)
				c.mu.Unlock()
			}
		}
		return next(ctx, cmd)
	}
}

func (*loadCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *loadCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.loads
	c.loads = nil
	return l
}

// A second New on a server that already holds this version's scripts (a Functions library, or
// EVALSHA scripts where FUNCTION is missing) sends none of them again: tools such as dxctl create
// a provider per call, and re-sending ~20 KB of Lua each time costs the server for nothing.
func TestNewDoesNotReloadLoadedScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := os.Getenv("DXREDIS_TEST_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	for _, disableFunctions := range []bool{false, true} {
		counter := &loadCounter{}
		client := redis.NewClient(&redis.Options{Addr: addr})
		client.AddHook(counter)
		opts := redisprovider.Options{Namespace: "t-load", Logger: quietLogger, DisableFunctions: disableFunctions}
		for i := range 2 {
			p, err := redisprovider.NewFromClient(ctx, client, opts)
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Close()
			if loads := counter.take(); i == 1 && len(loads) > 0 {
				t.Errorf("DisableFunctions=%v: the second New sent %d loads (%s), want none", disableFunctions, len(loads), loads[0])
			}
		}
		_ = client.Close()
	}
}
