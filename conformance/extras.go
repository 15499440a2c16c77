package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

// Tests duroxide's suite lacks, for what a Redis store gets wrong most easily: key construction
// from arbitrary instance ids, atomicity under concurrent dispatchers, multi-range capability
// filters and validation of malformed input.
func init() {
	register("redis_extras",
		test{"test_adversarial_instance_ids", AdversarialInstanceIDs},
		test{"test_concurrency_invariant", ConcurrencyInvariant},
		test{"test_multi_range_capability_filter", MultiRangeCapabilityFilter},
		test{"test_bad_input_rejected", BadInputRejected},
	)
}

var errExPanicked = errors.New("provider call panicked")

// exCall runs fn, turning a panic into a test error.
func exCall(t *testing.T, what string, fn func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = errExPanicked
		}
	}()
	return fn()
}

// exRejected runs fn and reports a test error unless it returns a permanent
// *provider.ProviderError matching one of kinds. It does not stop the test, so that one run lists
// every input a provider accepts; the callers check right after that nothing changed.
func exRejected(t *testing.T, what string, fn func() error, kinds ...error) {
	t.Helper()
	err := exCall(t, what, fn)
	if errors.Is(err, errExPanicked) {
		return
	}
	if err == nil {
		t.Errorf("%s: got no error, want a permanent %v error", what, kinds)
		return
	}
	pe, ok := provider.AsProviderError(err)
	if !ok {
		t.Errorf("%s: error %v (%T) is not a *provider.ProviderError", what, err, err)
		return
	}
	if pe.Retryable {
		t.Errorf("%s: error %v is retryable, want permanent", what, err)
		return
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return
		}
	}
	t.Errorf("%s: error %v is none of %v", what, err, kinds)
}

// exDepths asserts the unlocked queue depths.
func exDepths(t *testing.T, p provider.Provider, orch, work uint64, what string) {
	t.Helper()
	d, err := mustAdmin(t, p).GetQueueDepths(ctx(t))
	wantNoErr(t, err, "get_queue_depths")
	if d.OrchestratorQueue != orch || d.WorkerQueue != work {
		t.Fatalf("%s: queue depths orchestrator %d worker %d, want %d and %d", what, d.OrchestratorQueue, d.WorkerQueue, orch, work)
	}
}

// exNoWork fails the test when a worker fetch (any tag) returns an item.
func exNoWork(t *testing.T, p provider.Provider, what string) {
	t.Helper()
	if it := fetchWork(t, p, longLock, provider.TagFilterAny()); it != nil {
		t.Fatalf("%s: fetch_work_item returned %v of %q, want nothing", what, it.Item.Variant(), it.Item.TargetInstance())
	}
}

// exAdversarialIDs are instance ids that break naive key construction.
func exAdversarialIDs() []string {
	return []string{
		"{a}", "}{", "{", "a:b", "a::b:", ":", "with space", " padded ", "日本語のインスタンス", "emoji🎉🚀",
		strings.Repeat("L", 1024), "x", "x:1", "x:1:h", "x*", "x?", "[x]", `a\b`, `a"b`, "p|q",
	}
}

// exCheckInstance verifies everything AdversarialInstanceIDs wrote for id.
func exCheckInstance(t *testing.T, p provider.Provider, id string, hist []provider.Event) {
	t.Helper()
	rrSameEvents(t, mustRead(t, p, id), hist, fmt.Sprintf("read(%q)", id))
	rrSameEvents(t, rrReadExec(t, p, id, 1), hist, fmt.Sprintf("read_with_execution(%q, 1)", id))
	kvWant(t, p, id, "owner", ptr(id), "own KV value")
	kvWant(t, p, id, id, ptr("self"), "KV key equal to the id")
	all, err := p.GetKVAllValues(ctx(t), id)
	wantNoErr(t, err, "get_kv_all_values")
	if want := map[string]string{"owner": id, id: "self"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("get_kv_all_values(%q) = %v, want %v", id, all, want)
	}
	cs, err := p.GetCustomStatus(ctx(t), id, 0)
	wantNoErr(t, err, "get_custom_status")
	if cs == nil || cs.Status == nil || *cs.Status != "cs-"+id || cs.Version != 1 {
		t.Fatalf("get_custom_status(%q) = %+v, want status %q version 1", id, cs, "cs-"+id)
	}
	st, err := p.GetInstanceStats(ctx(t), id)
	wantNoErr(t, err, "get_instance_stats")
	if st == nil || st.HistoryEventCount != uint64(len(hist)) || st.KVUserKeyCount != 2 {
		t.Fatalf("get_instance_stats(%q) = %+v, want %d events and 2 KV keys", id, st, len(hist))
	}
	a := mustAdmin(t, p)
	info, err := a.GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info")
	if info.InstanceID != id || info.Status != provider.StatusCompleted || info.Output == nil || *info.Output != "o-"+id {
		t.Fatalf("get_instance_info(%q) = %+v, want Completed with output %q", id, info, "o-"+id)
	}
	execs, err := a.ListExecutions(ctx(t), id)
	wantNoErr(t, err, "list_executions")
	if !reflect.DeepEqual(execs, []uint64{1}) {
		t.Fatalf("list_executions(%q) = %v, want [1]", id, execs)
	}
}

// exSameSet asserts that got holds exactly want's strings, in any order.
func exSameSet(t *testing.T, got, want []string, what string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %q, want %q", what, g, w)
	}
}
