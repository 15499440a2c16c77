package redisprovider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// errMigrateStopped: Migrate stopped after MigrateOptions.steps steps (tests of a crash).
var errMigrateStopped = errors.New("dxredis: migrate stopped (test)")

// ErrNamespaceBusy is returned (wrapped) by Migrate while a runtime still uses the namespace:
// a turn or activity is locked, a session is owned, or a fetcher waits.
var ErrNamespaceBusy = errors.New("dxredis: the namespace is in use")

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	// Partitions is the partition count the namespace gets (1-256; 0: the count it has). Another
	// count than the namespace's re-partitions it (see Migrate).
	Partitions int
	// Logger receives a line per step. Default: discard.
	Logger *slog.Logger

	// steps, when positive, stops after that many atomic steps that changed something, as a
	// crash would (tests).
	steps int
}

// MigrateReport says what Migrate did.
type MigrateReport struct {
	Namespace string
	From      int // the format found (0: the namespace holds nothing; it gets format 2 with its first write)
	To        int // the format it has now
	// FromPartitions and ToPartitions are the partition counts before and after.
	FromPartitions, ToPartitions int
	Steps                        []string      // what ran, in order (empty: nothing to do)
	Elapsed                      time.Duration // from the first step to the last: how long the namespace was unusable
}

// Migrate converts a namespace's storage to this release's format (dxredis.Format) with its
// runtimes stopped: it refuses (ErrNamespaceBusy) while any of them holds a lock, owns a session
// or waits to fetch, and from its first step on every process of either format refuses the
// namespace (format-1 processes meet hashes where their sequence, gates and orphan index were;
// format-2 ones a migration mark) until it is done. Each step is atomic and Migrate may be run
// again after a crash anywhere: it goes on where it stopped. On a namespace that is already in
// format 2 it only converts execution records that a release before the one record layout wrote
// (scripts/lib_admin.lua, record_convert; nothing when there are none), instance by instance,
// with the runtimes stopped as well. The runtimes are then started with this release.
//
// With opts.Partitions other than the namespace's count, Migrate then re-partitions it (keys.go,
// "Partitions"), offline as well: it refuses (ErrNamespaceBusy, nothing written) while a lock is
// held, a session owned, a fetcher waits or an outbox holds entries it could not forward; every
// instance, worker item and session moves to its partition under the new count, the indexes are
// rebuilt there with their scores, and the records come last (repartition.go). A re-partitioning
// that stopped is finished by Migrate with the same count (or 0); no process can use the
// namespace until it is. The runtimes are then started with Options.Partitions 0 (or the new
// count).
func Migrate(ctx context.Context, client redis.UniversalClient, namespace string, opts MigrateOptions) (*MigrateReport, error) {
	if ctx == nil {
		return nil, errNilContext("migrate")
	}
	if client == nil {
		return nil, provider.NewPermanentError("migrate", "nil Redis client").WithKind(provider.ErrInvalidInput)
	}
	if opts.Partitions < 0 || opts.Partitions > dxredis.MaxPartitions {
		return nil, invalid("migrate", "%d partitions: want 1-%d (0: the namespace's count)", opts.Partitions, dxredis.MaxPartitions)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// An administrative run, like dxctl's: the eviction-policy check guards runtimes, not this.
	p, err := NewFromClient(ctx, client, Options{Namespace: namespace, Logger: logger, AllowEvictingMaxmemoryPolicy: true, anyFormat: true})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	start := time.Now()
	steps := &stepBudget{limit: opts.steps}
	rep := &MigrateReport{Namespace: namespace}
	plan, err := readPlan(ctx, client, p.keys)
	if err != nil {
		return nil, p.mapErr("migrate", err)
	}
	if plan == nil { // (a namespace being re-partitioned is in this release's format)
		if err := p.migrateFormat(ctx, steps, rep); err != nil {
			return nil, err
		}
	} else {
		rep.From, rep.To = dxredis.Format, dxredis.Format
	}
	if rep.To == dxredis.Format {
		if err := p.repartition(ctx, opts.Partitions, steps, rep); err != nil {
			return nil, err
		}
	}
	for _, s := range rep.Steps {
		logger.Info("dxredis: migrate", "namespace", namespace, "step", s)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// migrateFormat is Migrate's conversion to format 2 (see Migrate).
func (p *Provider) migrateFormat(ctx context.Context, steps *stepBudget, rep *MigrateReport) error {
	found, migrating, err := NamespaceFormat(ctx, p.rdb, p.keys, 0)
	if err != nil {
		return p.mapErr("migrate", err)
	}
	rep.From, rep.To = found, found
	if found == 0 {
		return nil // nothing to convert
	}
	if found > dxredis.Format {
		return p.formatErr("migrate", &FormatError{Namespace: p.keys.Namespace(), Found: found})
	}
	step := func(name string, ids ...string) (int64, error) {
		if err := steps.next(); err != nil {
			return 0, err
		}
		e := luascripts.AdminMigrate.Encoder(1 + len(ids))
		e.Set("step", name)
		e.Section("ids")
		for _, id := range ids {
			e.Entry(id)
		}
		args, err := encoded("migrate", e)
		if err != nil {
			return 0, err
		}
		res, err := p.run(ctx, "migrate", luascripts.AdminMigrate.Op, 0, args...)
		if err != nil {
			if _, why, busy := strings.Cut(err.Error(), "DX_BUSY "); busy {
				return 0, fmt.Errorf("%w: %s", ErrNamespaceBusy, why)
			}
			return 0, err
		}
		n, _ := res.(int64)
		if n > 0 {
			steps.done++
		}
		return n, nil
	}
	// records converts older execution-record layouts (format 1, and format 2 as written before
	// the one layout): a step of its own, which a format-2 namespace runs alone.
	records := func() error {
		if p.keys.Partitions() > 1 {
			return nil // older layouts exist only in namespaces of one partition (this release made the others)
		}
		converted, err := p.migrateEach(ctx, step, "records", nil, "i:*", "xs:*")
		if converted > 0 {
			rep.Steps = append(rep.Steps, fmt.Sprintf("records of %d instances", converted))
		}
		return err
	}
	if found == dxredis.Format && !migrating {
		return records()
	}
	if n, err := step("begin"); err != nil {
		return err
	} else if n == 1 {
		rep.Steps = append(rep.Steps, "begin")
	}
	converted, err := p.migrateEach(ctx, step, "messages", nil, "qz:*")
	if err != nil {
		return err
	}
	if converted > 0 {
		rep.Steps = append(rep.Steps, fmt.Sprintf("messages of %d instances", converted))
	}
	if err := records(); err != nil {
		return err
	}
	items, err := p.migrateEach(ctx, step, "items", workItemNumber, "wq:m:*")
	if err != nil {
		return err
	}
	if items > 0 {
		rep.Steps = append(rep.Steps, fmt.Sprintf("%d worker items", items))
	}
	if n, err := step("finish"); err != nil {
		return err
	} else if n == 1 {
		rep.Steps = append(rep.Steps, "finish")
	}
	rep.To = dxredis.Format
	return nil
}

// migrateEach runs admin_migrate's step name over the ids of the namespace's keys of the given
// kinds (globs of "<kind>:*" relative to the prefix, e.g. the format-1 message visibility sets
// qz:<id>) that keep accepts (nil: all), in batches of 200; a batch that ran converts nothing when
// it runs again (nor does an id found under a second kind).
func (p *Provider) migrateEach(ctx context.Context, step func(string, ...string) (int64, error), name string, keep func(string) bool, kinds ...string) (int, error) {
	prefix := p.keys.Prefix(0)
	total := 0
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := step(name, batch...)
		total += int(n)
		batch = batch[:0]
		return err
	}
	err := forEachPrimary(ctx, p.rdb, func(ctx context.Context, c redis.Cmdable) error {
		for _, kind := range kinds {
			iter := c.Scan(ctx, 0, globQuote(prefix)+kind, 1000).Iterator()
			for iter.Next(ctx) {
				id := strings.TrimPrefix(iter.Val(), prefix+strings.TrimSuffix(kind, "*"))
				if keep != nil && !keep(id) {
					continue
				}
				if batch = append(batch, id); len(batch) == 200 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return total, p.mapErr("migrate", err)
	}
	return total, flush()
}

// workItemNumber says whether a wq:m:<s> key names a format-1 worker item (its id a bare sequence
// number; format 2's ids start with a letter, dxredis.WorkItemID).
func workItemNumber(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
