package redisprovider

import (
	lru "container/list"
	"sort"
	"strings"
	"sync"

	"github.com/duroxide-go/dxredis/provider"
)

// historyCache keeps the decoded history of recently fetched instances, so that a turn decodes
// only the events appended since this process last saw the instance instead of its whole history
// (decoding dominates the cost of long histories). Entries are checked against the stored bytes
// on every use: a cached prefix is reused only when the stored history still starts with exactly
// those bytes (histories are append-only), so the cache can be stale but never wrong.
type historyCache struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	lru      *lru.List // of *cachedHistory, most recent first
	byID     map[string]*lru.Element
}

type cachedHistory struct {
	instance string
	exec     uint64
	raw      string
	events   []provider.Event // ordered by event_id
}

func newHistoryCache(maxBytes int) *historyCache {
	return &historyCache{maxBytes: maxBytes, lru: lru.New(), byID: map[string]*lru.Element{}}
}

// decode returns the events of stored, the history of (instance, exec), reusing the cached
// prefix when it matches. The returned slice belongs to the caller.
func (c *historyCache) decode(instance string, exec uint64, stored string) ([]provider.Event, error) {
	if c.maxBytes <= 0 {
		return decodeHistory(stored, instance, exec)
	}
	c.mu.Lock()
	var prefix cachedHistory
	if el, ok := c.byID[instance]; ok {
		prefix = *el.Value.(*cachedHistory)
	}
	c.mu.Unlock()

	var events []provider.Event
	if prefix.exec == exec && prefix.raw != "" && strings.HasPrefix(stored, prefix.raw) {
		tail, err := decodeHistory(stored[len(prefix.raw):], instance, exec)
		if err != nil {
			return nil, err
		}
		events = make([]provider.Event, 0, len(prefix.events)+len(tail))
		events = append(append(events, prefix.events...), tail...)
		if len(tail) > 0 && len(prefix.events) > 0 && tail[0].EventID < prefix.events[len(prefix.events)-1].EventID {
			sort.SliceStable(events, func(a, b int) bool { return events[a].EventID < events[b].EventID })
		}
	} else {
		var err error
		if events, err = decodeHistory(stored, instance, exec); err != nil {
			c.forget(instance)
			return nil, err
		}
	}
	c.put(instance, exec, stored, events)
	return append([]provider.Event(nil), events...), nil
}

// put records the history of instance; events becomes the cache's (decode built it, and hands
// callers copies).
func (c *historyCache) put(instance string, exec uint64, raw string, events []provider.Event) {
	if len(raw) > c.maxBytes/4 { // one huge history must not flush everything else
		c.forget(instance)
		return
	}
	entry := &cachedHistory{instance: instance, exec: exec, raw: raw, events: events}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[instance]; ok {
		c.bytes -= len(el.Value.(*cachedHistory).raw)
		c.lru.Remove(el)
	}
	c.byID[instance] = c.lru.PushFront(entry)
	c.bytes += len(raw)
	for c.bytes > c.maxBytes {
		last := c.lru.Back()
		old := last.Value.(*cachedHistory)
		c.lru.Remove(last)
		delete(c.byID, old.instance)
		c.bytes -= len(old.raw)
	}
}

func (c *historyCache) forget(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[instance]; ok {
		c.bytes -= len(el.Value.(*cachedHistory).raw)
		c.lru.Remove(el)
		delete(c.byID, instance)
	}
}
