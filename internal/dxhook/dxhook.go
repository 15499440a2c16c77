// Package dxhook lets dxtest reach into dx without widening dx's API: package dx sets the hooks
// when it is initialised.
package dxhook

import "context"

// MockActivity makes rt, a *dx.Runtime, run fn for the activity name instead of the activity
// registered under that name (if any), registered before or after. It fails (dx.ErrInvalidInput)
// for a nil runtime, an empty name or a nil fn.
var MockActivity func(rt any, name string, fn func(ctx context.Context, input string) (string, error)) error
