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
	"github.com/duroxide-go/dxredis/provider"
)

// ErrNamespaceBusy is returned (wrapped) by Migrate while a runtime still uses the namespace:
// a turn or activity is locked, a session is owned, or a fetcher waits.
var ErrNamespaceBusy = errors.New("dxredis: the namespace is in use")

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	// Partitions is the partition count the namespace gets (0: 1). This release has one
	// partition per namespace; Migrate refuses other counts.
	Partitions int
	// Logger receives a line per step. Default: discard.
	Logger *slog.Logger
}

// MigrateReport says what Migrate did.
type MigrateReport struct {
	Namespace string
	From      int           // the format found (0: the namespace holds nothing; it gets format 2 with its first write)
	To        int           // the format it has now
	Steps     []string      // what ran, in order (empty: nothing to do)
	Elapsed   time.Duration // from the first step to the last: how long the namespace was unusable
}

// Migrate converts a namespace's storage to this release's format (dxredis.Format) with its
// runtimes stopped: it refuses (ErrNamespaceBusy) while any of them holds a lock, owns a session
// or waits to fetch, and from its first step on every process of either format refuses the
// namespace (format-1 processes meet hashes where their sequence, gates and orphan index were;
// format-2 ones a migration mark) until it is done. Each step is atomic and Migrate may be run
// again after a crash anywhere: it goes on where it stopped, and on a namespace that is already
// in format 2 it does nothing. The runtimes are then started with this release.
func Migrate(ctx context.Context, client redis.UniversalClient, namespace string, opts MigrateOptions) (*MigrateReport, error) {
	if ctx == nil {
		return nil, errNilContext("migrate")
	}
	if client == nil {
		return nil, provider.NewPermanentError("migrate", "nil Redis client").WithKind(provider.ErrInvalidInput)
	}
	if opts.Partitions == 0 {
		opts.Partitions = 1
	}
	if opts.Partitions != 1 {
		return nil, provider.NewPermanentError("migrate", fmt.Sprintf("%d partitions: this release keeps a namespace in one partition", opts.Partitions)).
			WithKind(provider.ErrInvalidInput)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p, err := NewFromClient(ctx, client, Options{Namespace: namespace, Logger: logger, anyFormat: true})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	found, migrating, err := NamespaceFormat(ctx, client, p.keys, 0)
	if err != nil {
		return nil, p.mapErr("migrate", err)
	}
	rep := &MigrateReport{Namespace: namespace, From: found, To: found}
	if found == dxredis.Format && !migrating || found == 0 {
		return rep, nil // nothing to convert
	}
	if found > dxredis.Format {
		return nil, p.formatErr("migrate", &FormatError{Namespace: namespace, Found: found})
	}
	start := time.Now()
	for _, step := range []string{"begin", "finish"} {
		res, err := p.run(ctx, "migrate", "admin_migrate", 0, step)
		if err != nil {
			if strings.Contains(err.Error(), "DX_BUSY ") {
				_, why, _ := strings.Cut(err.Error(), "DX_BUSY ")
				return nil, fmt.Errorf("%w: %s", ErrNamespaceBusy, why)
			}
			return nil, err
		}
		if n, _ := res.(int64); n == 1 {
			rep.Steps = append(rep.Steps, step)
			logger.Info("dxredis: migrate", "namespace", namespace, "step", step)
		}
	}
	rep.To, rep.Elapsed = dxredis.Format, time.Since(start)
	return rep, nil
}
