package redisprovider

import (
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func cacheLine(t *testing.T, id uint64) string {
	b, err := provider.Marshal(provider.Event{EventID: id, InstanceID: "i", ExecutionID: 1, DuroxideVersion: "0.1.30",
		Kind: provider.ActivityCompletedEvent{Result: strings.Repeat("x", 20)}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func ids(events []provider.Event) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

// TestHistoryCacheReusesOnlyMatchingPrefixes: a cached prefix is used only when the stored bytes
// still start with it; anything else is decoded from scratch, so the cache is never wrong.
func TestHistoryCacheReusesOnlyMatchingPrefixes(t *testing.T) {
	t.Parallel()
	c := newHistoryCache(1 << 20)
	h12 := cacheLine(t, 1) + cacheLine(t, 2)
	if ev, err := c.decode("i", 1, h12); err != nil || len(ev) != 2 {
		t.Fatalf("first decode: %v %v", ids(ev), err)
	}
	// Appended history: the prefix is reused, the tail decoded.
	h123 := h12 + cacheLine(t, 3)
	ev, err := c.decode("i", 1, h123)
	if err != nil || len(ev) != 3 || ev[2].EventID != 3 {
		t.Fatalf("appended: %v %v", ids(ev), err)
	}
	// The caller may modify what it got without touching the cache.
	ev[0].EventID = 99
	if again, _ := c.decode("i", 1, h123); again[0].EventID != 1 {
		t.Fatalf("cache shares memory with callers: %v", ids(again))
	}
	// A tail with a lower id than the cached ones is merged in order.
	if ev, _ := c.decode("i", 1, h123+cacheLine(t, 0)); ids(ev)[0] != 0 || len(ev) != 4 {
		t.Fatalf("out-of-order tail: %v", ids(ev))
	}
	// Rewritten (e.g. corrupted) or other-execution bytes are never matched with the cache.
	if _, err := c.decode("i", 1, "NOT_VALID_JSON{{{\n"); err == nil {
		t.Fatal("corrupted history decoded through the cache")
	}
	if ev, err := c.decode("i", 2, cacheLine(t, 1)); err != nil || len(ev) != 1 {
		t.Fatalf("other execution: %v %v", ids(ev), err)
	}
}

func TestHistoryCacheEvictsByBytes(t *testing.T) {
	t.Parallel()
	line := cacheLine(t, 1)
	c := newHistoryCache(8 * len(line))
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		if _, err := c.decode(id, 1, line); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > c.maxBytes || len(c.byID) != 8 || c.lru.Len() != 8 {
		t.Fatalf("cache holds %d bytes in %d entries (max %d bytes)", c.bytes, len(c.byID), c.maxBytes)
	}
	if _, ok := c.byID["a"]; ok {
		t.Fatal("least recently used entry not evicted")
	}
	// A history larger than a quarter of the cache is not cached at all.
	big := strings.Repeat(line, 3)
	if _, err := c.decode("big", 1, big); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.byID["big"]; ok {
		t.Fatal("oversized history was cached")
	}
}
