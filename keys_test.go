package dxredis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/redis/go-redis/v9"
)

// odd instance ids that must neither break the hash tag nor collide.
var oddIDs = []string{"plain", "{a}", "}{", "a:b", "a::b:", "with space", "日本語-🎉", strings.Repeat("x", 1024), "x", "x:1", "x:1:h", "1:x"}

// TestLuaKeysMatchGo checks that the key builders in scripts/lib.lua produce exactly the keys
// keys.go does, for odd instance ids too.
func TestLuaKeysMatchGo(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ks, err := dxredis.NewKeyspace("ns-1")
	if err != nil {
		t.Fatal(err)
	}
	lib := luascripts.LibSource()
	script := redis.NewScript(lib + `
local id = ARGV[2]
return { k_inst(id), k_execs(id), k_exec(id, 7), k_xout(id, 7), k_hist(id, 7), k_hids(id, 7), k_msgs(id), k_lock(id),
  k_cs(id), k_kv(id), k_kd(id), k_children(id), K_META, K_WAKE_ORCH, K_WAKE_FILTERS, k_wake_filter('*'),
  k_wake_filter(id) }`)
	for _, id := range oddIDs {
		got, err := script.Run(context.Background(), rdb, []string{ks.Meta(0)}, ks.Prefix(0), id).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{ks.Instance(id), ks.Executions(id), ks.Execution(id, 7), ks.ExecutionOutput(id, 7), ks.History(id, 7), ks.HistoryIDs(id, 7), ks.Messages(id),
			ks.Lock(id), ks.CustomStatus(id), ks.KVStore(id), ks.KVDelta(id), ks.Children(id),
			ks.Meta(0), ks.WakeOrch(0), ks.WakeFilters(0), ks.WakeOrchFilter(0, "*"), ks.WakeOrchFilter(0, id)}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("id %q: lua keys\n%v\ngo keys\n%v", id, got, want)
		}
	}
}

// TestKeysShareOneSlotAndNeverCollide checks the cluster and isolation properties of the keyspace.
func TestKeysShareOneSlotAndNeverCollide(t *testing.T) {
	ks, _ := dxredis.NewKeyspace("dx")
	tag := "{dx:0}"
	seen := map[string]string{}
	for _, id := range oddIDs {
		for _, k := range []string{ks.Instance(id), ks.Executions(id), ks.Execution(id, 1), ks.ExecutionOutput(id, 1), ks.History(id, 1), ks.HistoryIDs(id, 1),
			ks.Messages(id), ks.Lock(id), ks.CustomStatus(id), ks.KVStore(id), ks.KVDelta(id),
			ks.Children(id)} {
			if !strings.HasPrefix(k, tag+":") {
				t.Errorf("key %q does not start with the hash tag %s", k, tag)
			}
			if other, dup := seen[k]; dup {
				t.Errorf("key %q built for %q and %q", k, other, id)
			}
			seen[k] = id
		}
	}
	for _, bad := range []string{"", "a{b", "a}b", "a:b", "a b", strings.Repeat("n", 65), "日本"} {
		if _, err := dxredis.NewKeyspace(bad); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
}

// TestScriptsHaveHeaders checks every operation script documents KEYS, ARGV, reply and cost.
func TestScriptsHaveHeaders(t *testing.T) {
	for _, name := range luascripts.ScriptNames() {
		src := luascripts.ScriptSource(name)
		for _, want := range []string{"KEYS[1]", "ARGV[1]", "Reply", "Cost"} {
			if !strings.Contains(src, want) {
				t.Errorf("scripts/%s.lua: header lacks %q", name, want)
			}
		}
	}
}

// Worker item ids sort as strings in sequence order (a schedule breaks score ties by member).
func TestWorkItemIDOrder(t *testing.T) {
	ns := []uint64{1, 9, 10, 99, 100, 12345, 999999999, 1000000000, 1<<53 - 1}
	for i := 1; i < len(ns); i++ {
		a, b := dxredis.WorkItemID(ns[i-1]), dxredis.WorkItemID(ns[i])
		if a >= b {
			t.Errorf("WorkItemID(%d) = %q does not sort before WorkItemID(%d) = %q", ns[i-1], a, ns[i], b)
		}
	}
	if got := dxredis.WorkItemID(123); got != "c123" {
		t.Errorf("WorkItemID(123) = %q, want c123", got)
	}
}
