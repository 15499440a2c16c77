package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// kvWrite: a change of the instance's key-value store (SetKV, ClearKV, ClearAllKV, PruneKV).
// Recorded as KeyValueSet, KeyValueCleared or KeyValuesCleared; sends nothing (the provider applies
// the ack's history); positional: a replay matches it by key and value (the timestamp aside) and
// tolerates code that no longer writes it (duroxide).
type kvWrite struct {
	actionBase
	noKindRecords
	op         kvOp
	key, value string
	updatedMs  uint64
}

type kvOp int

const (
	kvSet kvOp = iota
	kvClear
	kvClearAll
)

func (w *kvWrite) event() provider.EventKind {
	switch w.op {
	case kvSet:
		return provider.KeyValueSetEvent{Key: w.key, Value: w.value, LastUpdatedAtMs: w.updatedMs}
	case kvClear:
		return provider.KeyValueClearedEvent{Key: w.key}
	}
	return provider.KeyValuesClearedEvent{}
}

func (w *kvWrite) replays(k provider.EventKind) bool {
	switch c := k.(type) {
	case provider.KeyValueSetEvent:
		return w.op == kvSet && w.key == c.Key && w.value == c.Value
	case provider.KeyValueClearedEvent:
		return w.op == kvClear && w.key == c.Key
	case provider.KeyValuesClearedEvent:
		return w.op == kvClearAll
	}
	return false
}

func (w *kvWrite) describe() string { return describeCode(provider.Event{Kind: w.event()}) }

func (kvWrite) what() string { return "KV writes" }

func (kvWrite) owns(a action) bool { _, ok := a.(*kvWrite); return ok }

func (kvWrite) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch ev.Kind.(type) {
	case provider.KeyValueSetEvent, provider.KeyValueClearedEvent, provider.KeyValuesClearedEvent:
		return true, false, e.replaySchedule(ev, true)
	}
	return false, false, nil
}
