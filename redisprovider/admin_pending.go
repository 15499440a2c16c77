package redisprovider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/provider"
)

// PendingStart is an instance whose start is queued but has not run yet: no runtime has
// acknowledged its first turn, so it has no instance record (GetInstanceInfo says ErrNotFound and
// ListInstances leaves it out) while the orchestrator queue counts its start message.
type PendingStart struct {
	InstanceID       string
	Orchestration    string
	Version          string // "" when the start names none (the runtime picks the latest)
	ParentInstanceID string // a sub-orchestration's parent
	QueuedAt         uint64 // ms since the epoch: when the start message became visible
	Locked           bool   // a runtime is running its first turn now
}

// pendingScan bounds how many instances of each orchestrator index ListPendingStarts looks at.
const pendingScan = 1000

// ListPendingStarts returns up to limit instances whose start is queued and not yet run, oldest
// first. It looks at the first 1000 instances of each orchestrator index (ready, delayed, locked),
// a few round trips, and reads the queues without a lock: an instance may start meanwhile.
func (p *Provider) ListPendingStarts(ctx context.Context, limit int) ([]PendingStart, error) {
	const op = "list_pending_starts"
	if limit <= 0 {
		return nil, invalid(op, "limit must be positive")
	}
	// Each partition's, merged by sequence number (enqueue order: a namespace of several
	// partitions numbers its messages by a clock, lib.lua's next_seq).
	parts := make([][]pendingStart, p.keys.Partitions())
	if err := p.inPartitions(ctx, func(ctx context.Context, part int) (err error) {
		parts[part], err = p.pendingStarts(ctx, op, part)
		return err
	}); err != nil {
		return nil, err
	}
	out := slices.Concat(parts...)
	slices.SortFunc(out, func(a, b pendingStart) int { return cmp.Compare(a.seq, b.seq) })
	res := make([]PendingStart, 0, min(limit, len(out)))
	for _, f := range out[:min(limit, len(out))] {
		res = append(res, f.PendingStart)
	}
	return res, nil
}

// pendingStart is a PendingStart with its message's sequence number.
type pendingStart struct {
	PendingStart
	seq uint64
}

// pendingStarts are the pending starts of one partition (see ListPendingStarts).
func (p *Provider) pendingStarts(ctx context.Context, op string, part int) ([]pendingStart, error) {
	pre := p.keys.Prefix(part)
	pins, err := p.rdb.SMembers(ctx, pre+"oq:pins").Result()
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	indexes := []string{pre + "oq:ready:-", pre + "oq:due", pre + "oq:locked"}
	for _, pin := range pins {
		if pin != "-" {
			indexes = append(indexes, pre+"oq:ready:"+pin)
		}
	}
	pipe := p.rdb.Pipeline()
	ranges := make([]*redis.StringSliceCmd, len(indexes))
	for i, k := range indexes {
		ranges[i] = pipe.ZRange(ctx, k, 0, pendingScan-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, p.mapErr(op, err)
	}
	locked := map[string]bool{}
	var ids []string
	for i, r := range ranges {
		for _, id := range r.Val() {
			if indexes[i] == pre+"oq:locked" {
				locked[id] = true
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	pipe = p.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	msgs := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, p.keys.Instance(id))
		msgs[i] = pipe.HGetAll(ctx, p.keys.Messages(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, p.mapErr(op, err)
	}
	var out []pendingStart
	for i, id := range ids {
		if exists[i].Val() > 0 {
			continue
		}
		if ps, ok := pendingStartIn(id, msgs[i].Val(), locked[id]); ok {
			out = append(out, ps)
		}
	}
	return out, nil
}

// pendingStartIn finds the start message among an instance's orchestrator messages (q:<id>).
func pendingStartIn(id string, msgs map[string]string, locked bool) (pendingStart, bool) {
	for field, typ := range msgs {
		// t<s> is the type code and the ms the message becomes visible (scripts/lib.lua, oq_messages).
		if !strings.HasPrefix(field, "t") || !strings.HasPrefix(typ, "S") {
			continue
		}
		seq := field[1:]
		var w provider.WorkItem
		if err := json.Unmarshal([]byte(msgs["m"+seq]), &w); err != nil {
			continue
		}
		s, ok := w.Kind.(provider.StartOrchestration)
		if !ok {
			continue
		}
		ps := PendingStart{InstanceID: id, Orchestration: s.Orchestration, Locked: locked}
		if s.Version != nil {
			ps.Version = *s.Version
		}
		if s.ParentInstance != nil {
			ps.ParentInstanceID = *s.ParentInstance
		}
		ps.QueuedAt, _ = strconv.ParseUint(typ[1:], 10, 64)
		n, _ := strconv.ParseUint(seq, 10, 64)
		return pendingStart{ps, n}, true
	}
	return pendingStart{}, false
}

// PendingStartOf says whether instance is a pending start (see PendingStart): no instance record,
// and a start message in its orchestrator queue. ok is false for an instance with a record and for
// an unknown one. One round trip, read without a lock.
func (p *Provider) PendingStartOf(ctx context.Context, instance string) (ps PendingStart, ok bool, err error) {
	const op = "pending_start_of"
	if err := checkID(op, instance); err != nil {
		return PendingStart{}, false, err
	}
	pipe := p.rdb.Pipeline()
	exists := pipe.Exists(ctx, p.keys.Instance(instance))
	msgs := pipe.HGetAll(ctx, p.keys.Messages(instance))
	locked := pipe.Exists(ctx, p.keys.Lock(instance))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return PendingStart{}, false, p.mapErr(op, err)
	}
	if exists.Val() > 0 {
		return PendingStart{}, false, nil
	}
	s, ok := pendingStartIn(instance, msgs.Val(), locked.Val() > 0)
	return s.PendingStart, ok, nil
}
