package redisprovider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis"
)

// TagLimits are the fleet-wide limits on the activities of one tag (keys_worker.go, "Caps"): at
// most Concurrency of them locked by workers at once (0: no limit) and at most Rate starts per
// second with bursts of up to Burst (Rate 0: no limit; Burst 0 means 1). A fetch that would go over
// a limit leaves the tag's items queued: they wait, they are never failed or dropped. An item stops
// counting against Concurrency when it is acked, abandoned or deleted, or when its lock expires (a
// worker that died frees its slots after its lock timeout). Items of sessions are not limited.
type TagLimits struct {
	Concurrency int
	Rate        float64
	Burst       int
}

// capsRefresh is how long a provider uses the caps it read before it reads them again: a cap set
// or removed applies to the fetches and enqueues of every process within about this long.
const capsRefresh = time.Second

// capsCache is a provider's copy of the namespace's caps hash (tag keys only).
type capsCache struct {
	mu   sync.Mutex
	at   time.Time
	tags map[string]bool // tag keys with a cap
}

// cappedTags returns the tag keys with a cap, read again when the copy is older than capsRefresh
// (on an error the old copy stays).
func (p *Provider) cappedTags() map[string]bool {
	c := &p.caps
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < capsRefresh {
		return c.tags
	}
	ctx, cancel := context.WithTimeout(p.closeCtx, 2*time.Second)
	defer cancel()
	keys, err := p.rdb.HKeys(ctx, p.capsKey()).Result()
	if err != nil {
		return c.tags
	}
	c.at = time.Now()
	c.tags = nil
	for _, k := range keys {
		if c.tags == nil {
			c.tags = map[string]bool{}
		}
		c.tags[k] = true
	}
	return c.tags
}

// capsKey is the caps hash: in partition 0, where the items of capped tags live (workPartition).
func (p *Provider) capsKey() string { return p.keys.Prefix(0) + "caps" }

// SetTagLimits sets (or, with zero limits, removes) the limits of tag's activities ("" is the
// untagged activities). Within about a second every process applies them; items already running
// when a cap is set are not counted against it. Bad limits are ErrInvalidInput.
func (p *Provider) SetTagLimits(ctx context.Context, tag string, l TagLimits) error {
	const op = "set_tag_limits"
	if l.Concurrency < 0 || l.Burst < 0 || l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) {
		return invalid(op, "limits must not be negative, got %+v", l)
	}
	if l.Rate == 0 && l.Burst != 0 {
		return invalid(op, "a burst needs a rate")
	}
	tk := dxredis.WorkTagKey(tag)
	var err error
	if l == (TagLimits{}) {
		err = p.rdb.HDel(ctx, p.capsKey(), tk).Err()
	} else {
		err = p.rdb.HSet(ctx, p.capsKey(), tk, fmt.Sprintf("%d %s %d", l.Concurrency, strconv.FormatFloat(l.Rate, 'f', -1, 64), l.Burst)).Err()
	}
	if err != nil {
		return p.mapErr(op, err)
	}
	p.caps.mu.Lock()
	p.caps.at = time.Time{} // this process applies them at once
	p.caps.mu.Unlock()
	return nil
}

// TagLimitsSet is a tag's limits and its state now.
type TagLimitsSet struct {
	Tag string
	TagLimits
	Running int // items of the tag counted against Concurrency now (unexpired locks)
}

// GetTagLimits returns the limits set, by tag, with how many items of each run now: one round
// trip when none is set, two more and one per tag else.
func (p *Provider) GetTagLimits(ctx context.Context) ([]TagLimitsSet, error) {
	const op = "get_tag_limits"
	all, err := p.rdb.HGetAll(ctx, p.capsKey()).Result()
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	out := []TagLimitsSet{}
	if len(all) == 0 {
		return out, nil
	}
	now, err := p.rdb.Time(ctx).Result()
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	for tk, v := range all {
		var s TagLimitsSet
		var rate string
		if _, err := fmt.Sscanf(v, "%d %s %d", &s.Concurrency, &rate, &s.Burst); err != nil {
			continue
		}
		s.Rate, _ = strconv.ParseFloat(rate, 64)
		if tk != "-" {
			_, s.Tag, _ = strings.Cut(tk, ":")
		}
		n, err := p.rdb.ZCount(ctx, p.keys.Prefix(0)+"cap:run:"+tk, "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
		if err != nil {
			return nil, p.mapErr(op, err)
		}
		s.Running = int(n)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TagLimitsSet) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}
