package conformance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("capability_filtering",
		test{"test_fetch_with_filter_none_returns_any_item", FetchWithFilterNoneReturnsAnyItem},
		test{"test_fetch_with_compatible_filter_returns_item", FetchWithCompatibleFilterReturnsItem},
		test{"test_fetch_with_incompatible_filter_skips_item", FetchWithIncompatibleFilterSkipsItem},
		test{"test_fetch_filter_skips_incompatible_selects_compatible", FetchFilterSkipsIncompatibleSelectsCompatible},
		test{"test_fetch_filter_does_not_lock_skipped_instances", FetchFilterDoesNotLockSkippedInstances},
		test{"test_fetch_filter_null_pinned_version_always_compatible", FetchFilterNullPinnedVersionAlwaysCompatible},
		test{"test_fetch_filter_boundary_versions", FetchFilterBoundaryVersions},
		test{"test_pinned_version_stored_via_ack_metadata", PinnedVersionStoredViaAckMetadata},
		test{"test_pinned_version_immutable_across_ack_cycles", PinnedVersionImmutableAcrossAckCycles},
		test{"test_continue_as_new_execution_gets_own_pinned_version", ContinueAsNewExecutionGetsOwnPinnedVersion},
		test{"test_filter_with_empty_supported_versions_returns_nothing", FilterWithEmptySupportedVersionsReturnsNothing},
		test{"test_concurrent_filtered_fetch_no_double_lock", ConcurrentFilteredFetchNoDoubleLock},
		test{"test_ack_stores_pinned_version_via_metadata_update", AckStoresPinnedVersionViaMetadataUpdate},
		test{"test_provider_updates_pinned_version_when_told", ProviderUpdatesPinnedVersionWhenTold},
		test{"test_fetch_corrupted_history_filtered_vs_unfiltered", FetchCorruptedHistoryFilteredVsUnfiltered},
		test{"test_fetch_deserialization_error_increments_attempt_count", FetchDeserializationErrorIncrementsAttemptCount},
		test{"test_fetch_deserialization_error_eventually_reaches_poison", FetchDeserializationErrorEventuallyReachesPoison},
		test{"test_fetch_filter_applied_before_history_deserialization", FetchFilterAppliedBeforeHistoryDeserialization},
		test{"test_fetch_single_range_only_uses_first_range", FetchSingleRangeOnlyUsesFirstRange},
		test{"test_ack_appends_event_to_corrupted_history", AckAppendsEventToCorruptedHistory},
	)
}

// capVersion parses a version the tests spell correctly.
func capVersion(v string) *semver.Version { return semver.MustParse(v) }

// capRange is the inclusive range [lo, hi].
func capRange(lo, hi string) provider.SemverRange {
	return provider.SemverRange{Min: capVersion(lo), Max: capVersion(hi)}
}

// capFilter is a filter with the single range [lo, hi].
func capFilter(lo, hi string) *provider.DispatcherCapabilityFilter {
	return &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{capRange(lo, hi)}}
}

// capStarted is OrchestrationStarted (event 1, execution 1) written by duroxide version dv.
func capStarted(instance, dv string) provider.Event {
	e := started(instance)
	e.DuroxideVersion = dv
	return e
}

// capFetch fetches with a 30 s lock, poll timeout 0 and filter, failing the test on error.
func capFetch(t *testing.T, p provider.Provider, filter *provider.DispatcherCapabilityFilter) *provider.LockedOrchestrationItem {
	t.Helper()
	it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, filter)
	if err != nil {
		t.Fatalf("fetch_orchestration_item(filter %v): %v", filter, err)
	}
	return it
}

// capMustFetch is capFetch that fails the test when nothing is returned.
func capMustFetch(t *testing.T, p provider.Provider, filter *provider.DispatcherCapabilityFilter, what string) *provider.LockedOrchestrationItem {
	t.Helper()
	it := capFetch(t, p, filter)
	if it == nil {
		t.Fatalf("%s: fetch returned nothing, want an item", what)
	}
	return it
}

// capMustNone is capFetch that fails the test when an item is returned.
func capMustNone(t *testing.T, p provider.Provider, filter *provider.DispatcherCapabilityFilter, what string) {
	t.Helper()
	if it := capFetch(t, p, filter); it != nil {
		t.Fatalf("%s: fetch returned instance %q, want nothing", what, it.Item.Instance)
	}
}

// capAbandon abandons with no delay and fails the test on error.
func capAbandon(t *testing.T, p provider.Provider, token string, ignoreAttempt bool) {
	t.Helper()
	wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), token, 0, ignoreAttempt), "abandon_orchestration_item")
}

// capAck acks execution 1 with delta and TestOrch 1.0.0 metadata pinned to pin (nil: no pin).
func capAck(t *testing.T, p provider.Provider, token string, delta []provider.Event, pin *semver.Version) {
	t.Helper()
	meta := testMeta()
	meta.PinnedDuroxideVersion = pin
	mustAck(t, p, token, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta, Metadata: meta})
}

// capPing enqueues an ExternalRaised named name for instance.
func capPing(t *testing.T, p provider.Provider, instance, name string) {
	t.Helper()
	mustEnqueueOrch(t, p, externalRaised(instance, name, "{}"))
}

// capSeed is duroxide's seed_instance_with_version: create instance pinned to version (its
// OrchestrationStarted written by that version) and, in the same ack, queue an ExternalRaised
// "ping" for it. Other instances fetched on the way are abandoned with ignore_attempt afterwards.
func capSeed(t *testing.T, p provider.Provider, instance, version string) {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	var others []string
	var it *provider.LockedOrchestrationItem
	for {
		it = capFetch(t, p, nil)
		if it == nil {
			t.Fatalf("seed %s: fetch returned nothing, want work available", instance)
		}
		if it.Item.Instance == instance {
			break
		}
		others = append(others, it.LockToken)
	}
	meta := testMeta()
	meta.PinnedDuroxideVersion = capVersion(version)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID:       1,
		HistoryDelta:      []provider.Event{capStarted(instance, version)},
		OrchestratorItems: []provider.WorkItem{externalRaised(instance, "ping", "{}")},
		Metadata:          meta,
	})
	for _, tok := range others {
		_ = p.AbandonOrchestrationItem(ctx(t), tok, 0, true)
	}
}

// capSeedCorrupt seeds instance pinned to version, then corrupts its stored history.
func capSeedCorrupt(t *testing.T, f Factory, p provider.Provider, instance, version string) {
	t.Helper()
	capSeed(t, p, instance, version)
	f.CorruptInstanceHistory(t, p, instance)
}

// capWantHistoryError fails the test unless a fetch result carries history_error with empty history.
func capWantHistoryError(t *testing.T, it *provider.LockedOrchestrationItem, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: fetch failed with %v, want an item with history_error", what, err)
	}
	if it == nil {
		t.Fatalf("%s: fetch returned nothing, want an item with history_error", what)
	}
	if it.Item.HistoryError == "" {
		t.Fatalf("%s: history_error not set for corrupted history", what)
	}
	if len(it.Item.History) != 0 {
		t.Fatalf("%s: history has %d events, want none when history_error is set", what, len(it.Item.History))
	}
}

// FetchWithFilterNoneReturnsAnyItem proves a fetch without filter returns a pinned instance.
func FetchWithFilterNoneReturnsAnyItem(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-1", "1.2.3")
	capMustFetch(t, p, nil, "fetch without filter")
}

// FetchWithCompatibleFilterReturnsItem proves a filter whose range holds the pin returns the instance.
func FetchWithCompatibleFilterReturnsItem(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-2", "1.2.3")
	capMustFetch(t, p, capFilter("1.0.0", "1.9.9"), "fetch with filter [1.0.0, 1.9.9] for pin 1.2.3")
}

// FetchWithIncompatibleFilterSkipsItem proves a filter whose range excludes the pin returns nothing.
func FetchWithIncompatibleFilterSkipsItem(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-3", "1.2.3")
	capMustNone(t, p, capFilter("2.0.0", "2.9.9"), "fetch with filter [2.0.0, 2.9.9] for pin 1.2.3")
}

// FetchFilterSkipsIncompatibleSelectsCompatible proves each filter picks the instance pinned inside its range.
func FetchFilterSkipsIncompatibleSelectsCompatible(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-v1", "1.0.0")
	capSeed(t, p, "inst-v2", "2.0.0")
	it := capMustFetch(t, p, capFilter("2.0.0", "2.9.9"), "fetch with v2 filter")
	if it.Item.Instance != "inst-v2" {
		t.Fatalf("fetch with v2 filter: got %q, want inst-v2", it.Item.Instance)
	}
	capAbandon(t, p, it.LockToken, true)
	it = capMustFetch(t, p, capFilter("1.0.0", "1.9.9"), "fetch with v1 filter")
	if it.Item.Instance != "inst-v1" {
		t.Fatalf("fetch with v1 filter: got %q, want inst-v1", it.Item.Instance)
	}
}

// FetchFilterDoesNotLockSkippedInstances proves an incompatible filtered fetch leaves the instance unlocked.
func FetchFilterDoesNotLockSkippedInstances(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-5", "1.0.0")
	capMustNone(t, p, capFilter("2.0.0", "2.9.9"), "fetch with incompatible filter")
	capMustFetch(t, p, capFilter("0.0.0", "1.9.9"), "fetch with compatible filter after an incompatible one (instance must not be locked)")
}

// FetchFilterNullPinnedVersionAlwaysCompatible proves an execution without a stored pin matches any filter.
func FetchFilterNullPinnedVersionAlwaysCompatible(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueOrch(t, p, startItem("inst-null"))
	it := mustFetchOrch(t, p, longLock)
	capAck(t, p, it.LockToken, []provider.Event{capStarted("inst-null", "0.0.0")}, nil)
	capPing(t, p, "inst-null", "ping")
	capMustFetch(t, p, capFilter("99.0.0", "99.9.9"), "fetch with filter [99.0.0, 99.9.9] for an unpinned execution")
}

// FetchFilterBoundaryVersions proves range bounds are inclusive and the next version outside is excluded.
func FetchFilterBoundaryVersions(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	filter := capFilter("1.0.0", "1.9.99")

	capSeed(t, p, "v1-low", "1.0.0")
	it := capMustFetch(t, p, filter, "fetch of pin 1.0.0 with [1.0.0, 1.9.99]")
	if it.Item.Instance != "v1-low" {
		t.Fatalf("fetch with [1.0.0, 1.9.99]: got %q, want v1-low", it.Item.Instance)
	}
	capAbandon(t, p, it.LockToken, true)

	capSeed(t, p, "v1-high", "1.9.99")
	it = capMustFetch(t, p, filter, "fetch of pin 1.9.99 with [1.0.0, 1.9.99]")
	capAbandon(t, p, it.LockToken, true)

	p2 := f.CreateProvider(t)
	capSeed(t, p2, "v2-exact", "2.0.0")
	capMustNone(t, p2, filter, "fetch of pin 2.0.0 with [1.0.0, 1.9.99]")
	capMustFetch(t, p2, nil, "fetch of pin 2.0.0 without filter")
}

// PinnedVersionStoredViaAckMetadata proves the pin given in ack metadata is what the filter checks.
func PinnedVersionStoredViaAckMetadata(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-8", "3.1.4")
	capMustFetch(t, p, capFilter("3.0.0", "3.9.9"), "fetch with [3.0.0, 3.9.9] for pin 3.1.4")
}

// PinnedVersionImmutableAcrossAckCycles proves a later ack without a pin keeps the stored pin.
func PinnedVersionImmutableAcrossAckCycles(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-9", "1.0.0")
	filter := capFilter("0.0.0", "1.9.9")
	it := capMustFetch(t, p, filter, "first filtered fetch")
	if it.Item.Instance != "inst-9" {
		t.Fatalf("first filtered fetch: got %q, want inst-9", it.Item.Instance)
	}
	capAck(t, p, it.LockToken, nil, nil)
	capPing(t, p, "inst-9", "ping2")
	capMustFetch(t, p, filter, "filtered fetch after an ack without pin (pin must persist)")
}

// ContinueAsNewExecutionGetsOwnPinnedVersion proves the filter checks the current execution's pin after continue-as-new.
func ContinueAsNewExecutionGetsOwnPinnedVersion(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-can"
	capSeed(t, p, id, "1.0.0")

	it := capMustFetch(t, p, capFilter("0.0.0", "1.9.9"), "fetch of execution 1")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{ev(id, 2, provider.OrchestrationContinuedAsNewEvent{Input: "{}"})},
		OrchestratorItems: []provider.WorkItem{{Kind: provider.ContinueAsNew{
			Instance: id, Orchestration: "TestOrch", Input: "{}", Version: ptr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{},
		}}},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew, OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0"},
	})

	it = capMustFetch(t, p, nil, "fetch of the ContinueAsNew")
	st := capStarted(id, "2.0.0")
	st.ExecutionID = 2
	meta := testMeta()
	meta.PinnedDuroxideVersion = capVersion("2.0.0")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 2, HistoryDelta: []provider.Event{st}, Metadata: meta})
	capPing(t, p, id, "ping")

	it = capMustFetch(t, p, capFilter("2.0.0", "2.9.9"), "fetch with v2 filter after continue-as-new")
	if it.Item.Instance != id {
		t.Fatalf("fetch with v2 filter: got %q, want %s", it.Item.Instance, id)
	}
	capAbandon(t, p, it.LockToken, true)
	capMustNone(t, p, capFilter("1.0.0", "1.9.9"), "fetch with v1 filter (execution 2 is pinned to 2.0.0, not inherited 1.0.0)")
}

// FilterWithEmptySupportedVersionsReturnsNothing proves a filter with no ranges matches nothing.
func FilterWithEmptySupportedVersionsReturnsNothing(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-empty", "1.0.0")
	capMustNone(t, p, &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{}}, "fetch with empty supported versions")
}

// ConcurrentFilteredFetchNoDoubleLock proves a second filtered fetch does not return an instance already locked.
func ConcurrentFilteredFetchNoDoubleLock(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-conc", "1.0.0")
	filter := capFilter("0.0.0", "1.9.9")
	capMustFetch(t, p, filter, "first filtered fetch")
	capMustNone(t, p, filter, "second filtered fetch (instance locked)")
}

// AckStoresPinnedVersionViaMetadataUpdate proves a pin first given on a later ack (backfill) is honoured.
func AckStoresPinnedVersionViaMetadataUpdate(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-backfill"
	mustEnqueueOrch(t, p, startItem(id))
	it := mustFetchOrch(t, p, longLock)
	capAck(t, p, it.LockToken, []provider.Event{capStarted(id, "1.2.3")}, nil)
	capPing(t, p, id, "ping")
	it = mustFetchOrch(t, p, longLock)
	capAck(t, p, it.LockToken, nil, capVersion("1.2.3"))
	capPing(t, p, id, "ping2")
	capMustFetch(t, p, capFilter("1.0.0", "1.9.9"), "filtered fetch after the pin was backfilled")
}

// ProviderUpdatesPinnedVersionWhenTold proves a pin given on a later ack overwrites the stored one.
func ProviderUpdatesPinnedVersionWhenTold(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-update"
	capSeed(t, p, id, "1.0.0")
	it := capMustFetch(t, p, capFilter("0.0.0", "1.9.9"), "fetch with v1 filter")
	capAck(t, p, it.LockToken, nil, capVersion("2.0.0"))
	capPing(t, p, id, "ping2")
	it = capMustFetch(t, p, capFilter("2.0.0", "2.0.0"), "fetch with [2.0.0, 2.0.0] after the pin was updated")
	capAbandon(t, p, it.LockToken, true)
	capMustNone(t, p, capFilter("1.0.0", "1.0.0"), "fetch with [1.0.0, 1.0.0] after the pin was updated to 2.0.0")
}

// FetchCorruptedHistoryFilteredVsUnfiltered proves a filtered-out corrupted instance yields no error, and unfiltered yields history_error.
func FetchCorruptedHistoryFilteredVsUnfiltered(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-corrupt-39"
	capSeedCorrupt(t, f, p, id, "1.0.0")

	it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, capFilter("2.0.0", "2.9.9"))
	if err != nil {
		t.Fatalf("filtered fetch of an excluded corrupted instance: %v, want no error", err)
	}
	if it != nil {
		t.Fatalf("filtered fetch of an excluded corrupted instance: got %q, want nothing", it.Item.Instance)
	}

	it, err = p.FetchOrchestrationItem(ctx(t), longLock, 0, nil)
	capWantHistoryError(t, it, err, "unfiltered fetch of corrupted history")
	if it.Item.Instance != id {
		t.Fatalf("unfiltered fetch: got %q, want %s", it.Item.Instance, id)
	}
	capAbandon(t, p, it.LockToken, true)
}

// capDeserializationCycles fetches the corrupted instance cycles times with a 50 ms lock, each time
// expecting history_error, abandoning without ignore_attempt and sleeping 100 ms.
func capDeserializationCycles(t *testing.T, p provider.Provider, cycles int) {
	t.Helper()
	for i := 1; i <= cycles; i++ {
		it, err := p.FetchOrchestrationItem(ctx(t), 50*time.Millisecond, 0, nil)
		capWantHistoryError(t, it, err, fmt.Sprintf("fetch #%d", i))
		capAbandon(t, p, it.LockToken, false)
		time.Sleep(100 * time.Millisecond)
	}
}

// FetchDeserializationErrorIncrementsAttemptCount proves each fetch of corrupted history increments the attempt count.
func FetchDeserializationErrorIncrementsAttemptCount(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-deser-41"
	capSeedCorrupt(t, f, p, id, "1.0.0")
	capDeserializationCycles(t, p, 2)
	if n := f.MaxAttemptCount(t, p, id); n < 2 {
		t.Fatalf("max attempt count after two fetch cycles: %d, want >= 2", n)
	}
}

// FetchDeserializationErrorEventuallyReachesPoison proves the attempt count keeps growing with history_error, to the poison threshold.
func FetchDeserializationErrorEventuallyReachesPoison(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-poison-42"
	const maxAttempts = 5
	capSeedCorrupt(t, f, p, id, "1.0.0")
	capDeserializationCycles(t, p, maxAttempts)
	if n := f.MaxAttemptCount(t, p, id); n < maxAttempts {
		t.Fatalf("max attempt count after %d fetch cycles: %d, want >= %d", maxAttempts, n, maxAttempts)
	}
}

// FetchFilterAppliedBeforeHistoryDeserialization proves the filter is checked before history is read.
func FetchFilterAppliedBeforeHistoryDeserialization(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeedCorrupt(t, f, p, "inst-order-43", "99.0.0")

	it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, capFilter("1.0.0", "2.0.0"))
	if err != nil {
		t.Fatalf("filtered fetch (filter must apply before deserialization): %v", err)
	}
	if it != nil {
		t.Fatalf("filtered fetch: got %q (history_error %q), want nothing for the excluded pin 99.0.0", it.Item.Instance, it.Item.HistoryError)
	}
	it, err = p.FetchOrchestrationItem(ctx(t), longLock, 0, nil)
	capWantHistoryError(t, it, err, "unfiltered fetch of corrupted history")
	capAbandon(t, p, it.LockToken, true)
}

// FetchSingleRangeOnlyUsesFirstRange proves a multi-range filter matches a pin in ANY of its ranges.
//
// Deviation from duroxide: duroxide's test of this name pins its providers' phase-1 limitation
// ("only the first range is used": the 3.0.0 instance must never be returned). This project's
// contract (provider.DispatcherCapabilityFilter, reference README point 4) matches a version in
// any range, as duroxide's own is_compatible does, so the port asserts that instead: with ranges
// [1.0.0, 1.5.0] and [3.0.0, 3.5.0], the 1.0.0 and 3.0.0 instances are both returned (the first
// one kept locked so the second can be fetched) and a 2.0.0 instance is not, though it has work.
func FetchSingleRangeOnlyUsesFirstRange(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	capSeed(t, p, "inst-range-a", "1.0.0")
	capSeed(t, p, "inst-range-b", "3.0.0")
	capSeed(t, p, "inst-range-c", "2.0.0")
	filter := &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{
		capRange("1.0.0", "1.5.0"), capRange("3.0.0", "3.5.0"),
	}}

	it := capMustFetch(t, p, filter, "first fetch with the two-range filter")
	if it.Item.Instance != "inst-range-a" {
		t.Fatalf("first fetch with the two-range filter: got %q, want inst-range-a (1.0.0, first range)", it.Item.Instance)
	}
	it = capMustFetch(t, p, filter, "second fetch with the two-range filter (3.0.0 is in the second range)")
	if it.Item.Instance != "inst-range-b" {
		t.Fatalf("second fetch with the two-range filter: got %q, want inst-range-b (3.0.0, second range)", it.Item.Instance)
	}
	capMustNone(t, p, filter, "third fetch with the two-range filter (2.0.0 is in neither range)")
	it = capMustFetch(t, p, nil, "unfiltered fetch")
	if it.Item.Instance != "inst-range-c" {
		t.Fatalf("unfiltered fetch: got %q, want inst-range-c", it.Item.Instance)
	}
}

// AckAppendsEventToCorruptedHistory proves ack is append-only: it succeeds on corrupted history and stores the Failed status.
func AckAppendsEventToCorruptedHistory(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "inst-ack-corrupt-45"
	capSeed(t, p, id, "1.0.0")
	f.CorruptInstanceHistory(t, p, id)

	it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, nil)
	capWantHistoryError(t, it, err, "fetch of corrupted history")
	herr := it.Item.HistoryError
	const attempts, maxAttempts = 4, 3
	details := provider.ErrorDetails{Kind: provider.PoisonError{
		AttemptCount: attempts, MaxAttempts: maxAttempts,
		MessageType: provider.PoisonMessageType{Kind: provider.PoisonFailedDeserialization{
			Instance: id, ExecutionID: it.Item.ExecutionID, Error: herr,
		}},
		Message: herr,
	}}
	failed := evExec(id, it.Item.ExecutionID, 99999, provider.OrchestrationFailedEvent{Details: details})
	// duroxide's ErrorDetails::display_message for a FailedDeserialization poison.
	output := fmt.Sprintf("poison: orchestration %s history deserialization failed after %d attempts (max %d): %s",
		id, attempts, maxAttempts, herr)
	err = p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID:  it.Item.ExecutionID,
		HistoryDelta: []provider.Event{failed},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Output: &output,
			OrchestrationName: it.Item.OrchestrationName, OrchestrationVersion: it.Item.Version},
	})
	wantNoErr(t, err, "ack appending OrchestrationFailed to corrupted history (must not re-read existing history)")

	info, err := mustAdmin(t, p).GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info")
	if info.Status != "Failed" {
		t.Fatalf("get_instance_info: status %q, want Failed", info.Status)
	}
	if info.Output == nil || !strings.Contains(*info.Output, "deserialization failed") {
		t.Fatalf("get_instance_info: output %v, want it to contain \"deserialization failed\"", info.Output)
	}
}
