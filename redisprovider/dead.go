package redisprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// Dead letters: an activity that exceeded its deliveries, parked by a runtime that holds poison
// (dx.Options.OnPoison) instead of failing it. A dead letter is its worker item, out of every
// schedule, listed in its partition's wq:dead (keys_worker.go) with the failure it would have
// recorded; nothing is written to its instance's history. Redrive puts it back (a fresh delivery
// count), discard records that failure.

// DeadLetter is a parked activity, or (Orchestration) an orchestration item held as poison: the
// runtime writes nothing for it and looks at it again every HoldRetryDelay, without running its
// code, until it is redriven.
type DeadLetter struct {
	ID string // "<partition>:<item id>", "<partition>:o:<instance>": what GetDeadLetter, RedriveDeadLetter and DiscardDeadLetter take
	// Orchestration is true for an orchestration item held as poison: Instance is held, Name is its
	// orchestration (when known), Reason the hold's note; the activity fields are zero.
	Orchestration bool
	Reason        string
	Instance      string
	ExecutionID   uint64
	ActivityID    uint64
	Name          string
	Tag           string // "" untagged
	Session       string // "" none
	Attempts      uint32 // deliveries before it was parked
	ParkedAt      time.Time
	// Failure is the ActivityFailed it would have recorded (duroxide's rule: a poison error), and
	// records when it is discarded.
	Failure provider.ErrorDetails
}

// ParkWorkItem parks the item a worker holds under lockToken as a dead letter, with failure, the
// ActivityFailed details it would otherwise record. An unknown or expired token is
// ErrInvalidLockToken, and nothing changes.
func (p *Provider) ParkWorkItem(ctx context.Context, lockToken string, failure provider.ErrorDetails) error {
	const op = "park_work_item"
	part, err := p.workToken(op, lockToken)
	if err != nil {
		return err
	}
	reason, err := json.Marshal(failure)
	if err != nil {
		return invalid(op, "failure details do not encode: %v", err)
	}
	args, err := argsOf(op, luascripts.WorkDead, "what", "park", "token", lockToken, "id", "", "lock_ms", "0", "reason", string(reason))
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.WorkDead.Op, part, args...)
	return err
}

// deadID splits a dead letter id: its partition and item id, or "o:<instance>".
func (p *Provider) deadID(op, id string) (int, string, error) {
	ps, item, ok := strings.Cut(id, ":")
	part, err := strconv.Atoi(ps)
	if ok && err == nil && strings.HasPrefix(item, "o:") && len(item) > 2 && part >= 0 && part < p.keys.Partitions() {
		return part, item, nil
	}
	if !ok || err != nil || part < 0 || part >= p.keys.Partitions() || len(item) < 2 || strings.Trim(item[1:], "0123456789") != "" {
		return 0, "", invalid(op, "dead letter id %q: want <partition>:<item id>, as dxctl dead lists them", id)
	}
	return part, item, nil
}

// ListDeadLetters returns up to limit dead letters, oldest parked first (one page per partition,
// merged).
func (p *Provider) ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	const op = "list_dead_letters"
	if limit <= 0 {
		return nil, invalid(op, "limit must be positive")
	}
	parts := make([][]DeadLetter, p.keys.Partitions())
	if err := p.inPartitions(ctx, func(ctx context.Context, part int) error {
		ids, err := p.rdb.ZRange(ctx, p.keys.Prefix(part)+"wq:dead", 0, int64(limit-1)).Result()
		if err != nil {
			return p.mapErr(op, err)
		}
		held, err := p.heldPoison(ctx, op, part, limit)
		if err != nil {
			return err
		}
		parts[part] = held
		for _, id := range ids {
			d, err := p.deadLetter(ctx, op, part, id)
			if errors.Is(err, provider.ErrNotFound) {
				continue // redriven or discarded meanwhile
			}
			if err != nil {
				return err
			}
			parts[part] = append(parts[part], d)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := slices.Concat(parts...)
	slices.SortStableFunc(out, func(a, b DeadLetter) int { return a.ParkedAt.Compare(b.ParkedAt) })
	return out[:min(limit, len(out))], nil
}

// GetDeadLetter returns one dead letter; ErrNotFound when id is not parked.
func (p *Provider) GetDeadLetter(ctx context.Context, id string) (DeadLetter, error) {
	const op = "get_dead_letter"
	part, item, err := p.deadID(op, id)
	if err != nil {
		return DeadLetter{}, err
	}
	return p.deadLetter(ctx, op, part, item)
}

// heldPoison lists up to limit orchestration items of partition part held as poison (oq:dead),
// dropping the entries whose hold has ended (the instance's next ack deletes its note).
func (p *Provider) heldPoison(ctx context.Context, op string, part int, limit int) ([]DeadLetter, error) {
	key := p.keys.Prefix(part) + "oq:dead"
	ids, err := p.rdb.ZRange(ctx, key, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	var out []DeadLetter
	for _, id := range ids {
		d, err := p.deadLetter(ctx, op, part, "o:"+id)
		if errors.Is(err, provider.ErrNotFound) {
			p.rdb.ZRem(ctx, key, id) // the hold ended: a stale entry (best effort)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (p *Provider) deadLetter(ctx context.Context, op string, part int, item string) (DeadLetter, error) {
	if inst, ok := strings.CutPrefix(item, "o:"); ok {
		pre := p.keys.Prefix(part)
		h, err := p.rdb.HGet(ctx, pre+"q:"+inst, "h").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return DeadLetter{}, p.mapErr(op, err)
		}
		at, reason, _ := strings.Cut(h, " ")
		if !strings.HasPrefix(reason, "poison:") {
			return DeadLetter{}, provider.NewPermanentError(op, fmt.Sprintf("instance %q is not held as poison", inst)).WithKind(provider.ErrNotFound)
		}
		name, err := p.rdb.HGet(ctx, pre+"i:"+inst, "name").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return DeadLetter{}, p.mapErr(op, err)
		}
		ms, _ := strconv.ParseInt(at, 10, 64)
		return DeadLetter{ID: strconv.Itoa(part) + ":" + item, Orchestration: true, Reason: reason, Instance: inst, Name: name,
			ParkedAt: time.UnixMilli(ms).UTC()}, nil
	}
	v, err := p.rdb.HMGet(ctx, p.keys.Prefix(part)+"wq:m:"+item, "j", "n", "d").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return DeadLetter{}, p.mapErr(op, err)
	}
	j, _ := v[0].(string)
	n, _ := v[1].(string)
	rec, _ := v[2].(string)
	at, reason, ok := strings.Cut(rec, " ")
	if j == "" || !ok {
		return DeadLetter{}, provider.NewPermanentError(op, fmt.Sprintf("dead letter %d:%s not found", part, item)).WithKind(provider.ErrNotFound)
	}
	var w provider.WorkItem
	if err := json.Unmarshal([]byte(j), &w); err != nil {
		return DeadLetter{}, provider.NewPermanentError(op, "stored worker item does not decode: "+err.Error())
	}
	a, ok := w.Kind.(provider.ActivityExecute)
	if !ok {
		return DeadLetter{}, provider.NewPermanentError(op, "stored worker item is a "+w.Variant())
	}
	d := DeadLetter{ID: strconv.Itoa(part) + ":" + item, Instance: a.Instance, ExecutionID: a.ExecutionID, ActivityID: a.ID, Name: a.Name}
	if a.Tag != nil {
		d.Tag = *a.Tag
	}
	if a.SessionID != nil {
		d.Session = *a.SessionID
	}
	attempts, _ := strconv.ParseUint(n, 10, 32)
	d.Attempts = uint32(attempts)
	ms, _ := strconv.ParseInt(at, 10, 64)
	d.ParkedAt = time.UnixMilli(ms).UTC()
	if err := json.Unmarshal([]byte(reason), &d.Failure); err != nil {
		return DeadLetter{}, provider.NewPermanentError(op, "stored dead letter reason does not decode: "+err.Error())
	}
	return d, nil
}

// RedriveDeadLetter puts a dead letter back in its queue with a fresh delivery count: the next
// fetch runs it as if it had just been scheduled (an orchestration held as poison: its next
// fetch, at the end of the hold's delay, runs its turn). ErrNotFound when id is not parked.
func (p *Provider) RedriveDeadLetter(ctx context.Context, id string) error {
	const op = "redrive_dead_letter"
	part, item, err := p.deadID(op, id)
	if err != nil {
		return err
	}
	what := "redrive"
	if inst, ok := strings.CutPrefix(item, "o:"); ok {
		what, item = "oredrive", inst
	}
	args, err := argsOf(op, luascripts.WorkDead, "what", what, "token", "", "id", item, "lock_ms", "0", "reason", "")
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.WorkDead.Op, part, args...)
	return err
}

// DiscardDeadLetter applies the default rule to a dead letter: its activity fails with the
// failure it was parked with (an ActivityFailed for its orchestration, as without the hold).
// ErrNotFound when id is not parked. Two steps (lock it, then ack it with the failure): if the
// caller stops between them, the lock expires and the next fetch delivers it again (past its
// attempts: parked or failed again by the runtime's rule).
func (p *Provider) DiscardDeadLetter(ctx context.Context, id string) error {
	const op = "discard_dead_letter"
	d, err := p.GetDeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if d.Orchestration {
		return invalid(op, "%s is an orchestration held as poison: it cannot be discarded, only redriven (after the fix), cancelled (dxctl cancel, then redrive: its next turn fails it) or deleted", id)
	}
	part, item, _ := p.deadID(op, id)
	args, err := argsOf(op, luascripts.WorkDead, "what", "take", "token", p.workNonce(part), "id", item, "lock_ms", "30000", "reason", "")
	if err != nil {
		return err
	}
	res, err := p.runOnce(ctx, op, luascripts.WorkDead.Op, part, args...)
	if err != nil {
		return err
	}
	return p.AckWorkItem(ctx, str(res), &provider.WorkItem{Kind: provider.ActivityFailed{Instance: d.Instance,
		ExecutionID: d.ExecutionID, ID: d.ActivityID, Details: d.Failure}})
}
