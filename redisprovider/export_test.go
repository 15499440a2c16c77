package redisprovider

// MigrateStoppingAfter is MigrateOptions that stops Migrate after n atomic steps, as a crash
// there would (the steps are atomic, so a kill leaves exactly such a state).
func MigrateStoppingAfter(n int) MigrateOptions { return MigrateOptions{steps: n} }

// ErrMigrateStopped is what such a Migrate returns.
var ErrMigrateStopped = errMigrateStopped
