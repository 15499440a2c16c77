package dx

import (
	"container/list"
	"sync"
)

// engineCache keeps the live engine of recently active instances between their turns (go-workflows'
// executor cache; duroxide only proposes it). A turn of a kept instance applies only its new events
// instead of replaying the whole history. An engine leaves the cache (its goroutines end) when its
// instance finishes, when a turn's ack fails or is abandoned, when the fetched history is not the one
// it holds (another process moved the instance on, or it was deleted and re-created), and when it is
// the least recently used of more than the cache's size.
type engineCache struct {
	mu      sync.Mutex
	size    int
	order   *list.List // front: most recently used
	entries map[string]*list.Element
}

func newEngineCache(size int) *engineCache {
	if size <= 0 {
		return nil
	}
	return &engineCache{size: size, order: list.New(), entries: map[string]*list.Element{}}
}

// take removes and returns the instance's engine, if kept: a turn uses it exclusively.
func (c *engineCache) take(instance string) *engine {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[instance]
	if !ok {
		return nil
	}
	c.order.Remove(el)
	delete(c.entries, instance)
	return el.Value.(*engine)
}

// put keeps an engine after its turn was acknowledged, evicting the least recently used beyond size.
func (c *engineCache) put(e *engine) {
	var evicted []*engine
	c.mu.Lock()
	if old, ok := c.entries[e.instance]; ok { // cannot happen with locks, but never leak
		c.order.Remove(old)
		evicted = append(evicted, old.Value.(*engine))
	}
	c.entries[e.instance] = c.order.PushFront(e)
	for c.order.Len() > c.size {
		el := c.order.Back()
		c.order.Remove(el)
		old := el.Value.(*engine)
		delete(c.entries, old.instance)
		evicted = append(evicted, old)
	}
	c.mu.Unlock()
	for _, old := range evicted {
		old.stop()
	}
}

// clear ends every kept engine.
func (c *engineCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	var all []*engine
	for _, el := range c.entries {
		all = append(all, el.Value.(*engine))
	}
	c.entries = map[string]*list.Element{}
	c.order.Init()
	c.mu.Unlock()
	for _, e := range all {
		e.stop()
	}
}
