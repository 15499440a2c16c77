package dx

// SetSchedulePlanHook sets a function that runs at the start of each schedule plan activity (nil:
// none), for the external tests.
func SetSchedulePlanHook(fn func()) { schedulePlanHook = fn }
