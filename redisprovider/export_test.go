package redisprovider

import (
	"context"
	"time"
)

// MigrateStoppingAfter is MigrateOptions that stops Migrate after n atomic steps, as a crash
// there would (the steps are atomic, so a kill leaves exactly such a state).
func MigrateStoppingAfter(n int) MigrateOptions { return MigrateOptions{steps: n} }

// ErrMigrateStopped is what such a Migrate returns.
var ErrMigrateStopped = errMigrateStopped

// SetForwardHooks sets the hooks that stop a forward before it reads the outboxes (before) or
// between its applies and its trim (beforeTrim), as a crash there would: returning false stops
// it. nil clears a hook. Safe while providers forward (atomic).
func SetForwardHooks(before, beforeTrim func(source int) bool) {
	testHookBeforeForward.Store(nil)
	if before != nil {
		testHookBeforeForward.Store(&before)
	}
	testHookBeforeTrim.Store(nil)
	if beforeTrim != nil {
		testHookBeforeTrim.Store(&beforeTrim)
	}
}

// SetApplyHook sets a hook run before each apply of a forward (nil clears it). Safe while
// providers forward (atomic).
func SetApplyHook(h func(source, dest int)) {
	testHookBeforeApply.Store(nil)
	if h != nil {
		testHookBeforeApply.Store(&h)
	}
}

// SetSweep sets how often fetching providers sweep the outboxes and how old an entry must be.
func SetSweep(period, grace time.Duration) {
	sweepPeriod.Store(int64(period))
	forwardGrace.Store(int64(grace))
}

// ForwardAll forwards every partition's outboxes now (what a sweep does, without the grace).
func (p *Provider) ForwardAll(ctx context.Context) error {
	for part := range p.keys.Partitions() {
		if err := p.forwardOlder(ctx, part, 0); err != nil {
			return err
		}
	}
	return nil
}
