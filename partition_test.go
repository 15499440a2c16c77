package dxredis_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis"
	"github.com/redis/go-redis/v9"
)

// TestSlotKnownAnswers checks Slot against values Redis's CLUSTER KEYSLOT gives.
func TestSlotKnownAnswers(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":           0x31C3, // CRC-16/XMODEM's check value
		"foo":                 12182,
		"bar":                 5061,
		"{user1000}.follow":   dxredis.Slot("user1000"),
		"foo{}{bar}":          dxredis.Slot("foo{}{bar}"), // an empty first tag: the whole key
		"{dx:0}:i:x":          dxredis.Slot("dx:0"),
		"a{b}c{d}":            dxredis.Slot("b"),
		"{":                   dxredis.Slot("{"),
		"{dx:3/1}:wq:q:-":     dxredis.Slot("dx:3/1"),
		"{dx:0}:i:{other}:id": dxredis.Slot("dx:0"),
	} {
		if got := dxredis.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if dxredis.Slot("foo{}{bar}") == dxredis.Slot("bar") {
		t.Error("an empty first {} must hash the whole key")
	}
}

// TestSlotMatchesCluster compares Slot with CLUSTER KEYSLOT on a real cluster node, when one is
// given (DXREDIS_TEST_CLUSTER, as make test-cluster sets it).
func TestSlotMatchesCluster(t *testing.T) {
	addrs := os.Getenv("DXREDIS_TEST_CLUSTER")
	if addrs == "" {
		t.Skip("DXREDIS_TEST_CLUSTER not set")
	}
	c := redis.NewClient(&redis.Options{Addr: strings.Split(addrs, ",")[0]})
	defer c.Close()
	tags, _ := dxredis.PartitionTags("dx", 256)
	keys := append([]string{"foo", "a{b}c", "{}x", "日本語"}, tags...)
	for _, k := range keys {
		want, err := c.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := dxredis.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// TestPartitionTagsAimAtSlotRanges checks that partition p's tag lands in the p-th 1/P of the slot
// range for every allowed P, that P = 1 keeps the one-partition tag, and that the tags are valid
// for WithTags and no other count.
func TestPartitionTagsAimAtSlotRanges(t *testing.T) {
	for n := 1; n <= dxredis.MaxPartitions; n++ {
		tags, err := dxredis.PartitionTags("orders", n)
		if err != nil {
			t.Fatal(err)
		}
		if len(tags) != n {
			t.Fatalf("P=%d: %d tags", n, len(tags))
		}
		for p, tag := range tags {
			lo, hi := p*dxredis.Slots/n, (p+1)*dxredis.Slots/n
			if s := dxredis.Slot(tag); s < lo || s >= hi {
				t.Fatalf("P=%d: partition %d's tag %q is in slot %d, want [%d, %d)", n, p, tag, s, lo, hi)
			}
		}
		ks, _ := dxredis.NewKeyspace("orders")
		ks, err = ks.WithTags(tags)
		if err != nil {
			t.Fatalf("P=%d: %v", n, err)
		}
		if ks.Partitions() != n {
			t.Fatalf("P=%d: Partitions() = %d", n, ks.Partitions())
		}
	}
	one, _ := dxredis.PartitionTags("orders", 1)
	if one[0] != "orders:0" {
		t.Fatalf("P=1 tag %q, want the one-partition layout's orders:0", one[0])
	}
	for _, n := range []int{0, -1, 257} {
		if _, err := dxredis.PartitionTags("orders", n); err == nil {
			t.Errorf("PartitionTags(%d): no error", n)
		}
	}
	ks, _ := dxredis.NewKeyspace("orders")
	twelve, _ := dxredis.PartitionTags("orders", 12)
	for _, bad := range [][]string{
		{}, {"orders:1"}, {"other:0"}, // P=1 must be orders:0
		append([]string{"orders:0"}, twelve[1:]...),    // P>1 never uses the root tag
		append([]string{twelve[1]}, twelve[1:]...),     // another partition's tag
		append([]string{"orders:0/01"}, twelve[1:]...), // not canonical
		append([]string{"other:0/1"}, twelve[1:]...),
	} {
		if _, err := ks.WithTags(bad); err == nil {
			t.Errorf("WithTags(%q): no error", bad)
		}
	}
}

// TestPlacement checks that placement is a stable hash of the id, that auto-named
// sub-orchestrations live in their root's partition, and that instances spread over partitions.
func TestPlacement(t *testing.T) {
	ks, _ := dxredis.NewKeyspace("dx")
	if ks.PartitionOf("anything") != 0 || ks.SessionPartition("s") != 0 {
		t.Fatal("one partition: everything is in partition 0")
	}
	tags, _ := dxredis.PartitionTags("dx", 12)
	ks, _ = ks.WithTags(tags)
	// Stable: documented values (FNV-1a 64 of the id's bytes mod P). Changing them remaps every
	// namespace of P > 1.
	for id, want := range map[string]int{"order-1": 9, "order-2": 0, "": 5, "日本語": 3} {
		if got := ks.PartitionOf(id); got != want {
			t.Errorf("PartitionOf(%q) = %d, want %d", id, got, want)
		}
	}
	root := "order-1"
	for _, child := range []string{root + "::sub::2", root + "::sub::2::sub::7", root + "::sub::x"} {
		if ks.PartitionOf(child) != ks.PartitionOf(root) {
			t.Errorf("%q is not in its root's partition", child)
		}
	}
	counts := make([]int, 12)
	for i := range 12000 {
		counts[ks.PartitionOf("inst-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i))]++
	}
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if float64(hi)/float64(lo) > 1.3 {
		t.Errorf("12,000 ids over 12 partitions: counts %v (max/min %.2f > 1.3)", counts, float64(hi)/float64(lo))
	}
	// Keys of an instance carry its partition's tag.
	for _, id := range oddIDs {
		want := "{" + tags[ks.PartitionOf(id)] + "}:"
		for _, k := range []string{ks.Instance(id), ks.History(id, 1), ks.Lock(id), ks.Messages(id)} {
			if !strings.HasPrefix(k, want) {
				t.Errorf("key %q of %q: want prefix %s", k, id, want)
			}
		}
	}
	if ks.RootMeta() != "{dx:0}:meta" {
		t.Errorf("RootMeta %q", ks.RootMeta())
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}
