package redisprovider

import (
	"context"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

var _ provider.StatusWatcher = (*Provider)(nil)

// subscribeWait bounds how long the first WatchStatus waits for Redis to confirm its subscription.
const subscribeWait = 2 * time.Second

// statusHub serves WatchStatus: one subscriber connection per provider, on the partitions' status
// channels (orch_ack publishes an instance id there when the instance finishes or its custom
// status changes), fanned out to the watchers of that instance. go-redis re-subscribes after a
// dropped connection; a change published meanwhile is missed, which the contract allows (callers
// keep a slow polling fallback).
type statusHub struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	pubsub   *redis.PubSub
	done     chan struct{} // closed when the fan-out goroutine ends
	closed   bool
}

// WatchStatus implements provider.StatusWatcher. The first watch starts the provider's subscriber
// connection; Close stops it. Each wake-up is a non-blocking send on a channel of capacity 1, so
// a slow watcher never holds up the others (its wake-ups merge).
func (p *Provider) WatchStatus(instance string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h := &p.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || p.isClosed() {
		return ch, func() {}
	}
	if h.pubsub == nil {
		h.watchers = map[string]map[chan struct{}]struct{}{}
		// Every partition's channel (one in a namespace of one): the connection serves every
		// instance.
		channels := make([]string, p.keys.Partitions())
		for i := range channels {
			channels[i] = p.keys.StatusChannel(i)
		}
		h.pubsub = p.rdb.Subscribe(context.Background(), channels...)
		// Subscribe returns before Redis confirms: a change published until then would be lost,
		// and the caller would sleep out its polling fallback. Wait for the confirmations
		// (bounded: on a failure the caller still has its fallback).
		ctx, cancel := context.WithTimeout(context.Background(), subscribeWait)
		for range channels {
			if _, err := h.pubsub.Receive(ctx); err != nil {
				break
			}
		}
		cancel()
		h.done = make(chan struct{})
		go h.fanOut(h.pubsub.Channel(), h.done)
	}
	set := h.watchers[instance]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.watchers[instance] = set
	}
	set[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if set := h.watchers[instance]; set != nil {
				delete(set, ch)
				if len(set) == 0 {
					delete(h.watchers, instance)
				}
			}
		})
	}
}

func (h *statusHub) fanOut(msgs <-chan *redis.Message, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		h.mu.Lock()
		for ch := range h.watchers[m.Payload] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		h.mu.Unlock()
	}
}

// close ends the subscriber connection and waits for the fan-out goroutine.
func (h *statusHub) close() error {
	h.mu.Lock()
	h.closed = true
	ps, done := h.pubsub, h.done
	h.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
