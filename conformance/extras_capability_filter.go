package conformance

import (
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// MultiRangeCapabilityFilter proves a filter with ranges [1.0.0, 1.5.0] and [3.0.0, 3.5.0]
// returns instances pinned to 1.2.0 and 3.1.0 but never 2.0.0, that an empty range list
// returns nothing, and that without a filter the oldest message (2.0.0's) comes first.
func MultiRangeCapabilityFilter(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	order := []string{"pin-2.0.0", "pin-1.2.0", "pin-3.1.0"}
	for _, id := range order {
		mustEnqueueOrch(t, p, startItem(id))
		it := mustFetchOrch(t, p, longLock)
		meta := testMeta()
		meta.PinnedDuroxideVersion = semver.MustParse(strings.TrimPrefix(id, "pin-"))
		mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started(id)}, Metadata: meta})
	}
	for _, id := range order {
		mustEnqueueOrch(t, p, externalRaised(id, "poke", "{}"))
	}
	r1, err := provider.NewSemverRange("1.0.0", "1.5.0")
	wantNoErr(t, err, "range 1")
	r2, err := provider.NewSemverRange("3.0.0", "3.5.0")
	wantNoErr(t, err, "range 2")
	filter := &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r1, r2}}
	fetch := func(filter *provider.DispatcherCapabilityFilter) *provider.LockedOrchestrationItem {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, filter)
		wantNoErr(t, err, "fetch_orchestration_item with filter")
		return it
	}

	var got []string
	var tokens []string
	for range 2 {
		it := fetch(filter)
		if it == nil {
			t.Fatalf("multi-range fetch returned nothing after %q, want the 1.2.0 and 3.1.0 instances", got)
		}
		got = append(got, it.Item.Instance)
		tokens = append(tokens, it.LockToken)
	}
	exSameSet(t, got, []string{"pin-1.2.0", "pin-3.1.0"}, "multi-range fetches")
	if it := fetch(filter); it != nil {
		t.Fatalf("multi-range fetch returned %q, want nothing (2.0.0 is in no range)", it.Item.Instance)
	}
	for _, tok := range tokens {
		wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), tok, 0, true), "abandon")
	}
	for _, empty := range []*provider.DispatcherCapabilityFilter{{}, {SupportedDuroxideVersions: []provider.SemverRange{}}} {
		if it := fetch(empty); it != nil {
			t.Fatalf("fetch with an empty range list returned %q, want nothing", it.Item.Instance)
		}
	}
	it := fetch(nil)
	if it == nil {
		t.Fatal("unfiltered fetch returned nothing, want pin-2.0.0")
	}
	if it.Item.Instance != "pin-2.0.0" {
		t.Fatalf("unfiltered fetch returned %q, want pin-2.0.0 (oldest message)", it.Item.Instance)
	}
}
