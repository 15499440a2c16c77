package redisprovider

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"
	"github.com/duroxide-go/dxredis/provider"
)

// Go computes everything that needs JSON and passes it to the scripts as plain strings
// (DESIGN.md S1); the helpers here do that and turn script replies back into values.

func invalid(op, format string, args ...any) error {
	return provider.NewPermanentError(op, fmt.Sprintf(format, args...)).WithKind(provider.ErrInvalidInput)
}

func checkID(op, instance string) error {
	if instance == "" {
		return invalid(op, "empty instance id")
	}
	if !utf8.ValidString(instance) {
		return invalid(op, "instance id %q is not valid UTF-8", instance)
	}
	return nil
}

// badUTF8 returns the first string in v (a work item's variant: its fields, nested structs,
// pointers, interfaces and slices) that is not valid UTF-8. JSON encoding would replace its bad
// bytes silently, so an id or name would no longer match what the caller and the store hold.
func badUTF8(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !utf8.ValidString(s) {
			return s, true
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badUTF8(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if s, bad := badUTF8(v.Field(i)); bad {
				return s, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if s, bad := badUTF8(v.Index(i)); bad {
				return s, true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if s, bad := badUTF8(it.Key()); bad {
				return s, true
			}
			if s, bad := badUTF8(it.Value()); bad {
				return s, true
			}
		}
	}
	return "", false
}

// checkToken refuses an empty lock token without a script call.
func checkToken(op, token string) error {
	if token == "" {
		return provider.NewPermanentError(op, "Invalid lock token: empty").WithKind(provider.ErrInvalidLockToken)
	}
	return nil
}

// checkDuration refuses a negative duration argument (0 means none).
func checkDuration(op, name string, d time.Duration) error {
	if d < 0 {
		return invalid(op, "%s must not be negative, got %v", name, d)
	}
	return nil
}

// encodeItem validates and encodes a work item for the orchestrator queue (toWorker false) or
// the worker queue (toWorker true).
func (p *Provider) encodeItem(op string, item provider.WorkItem, toWorker bool) (string, error) {
	switch item.Kind.(type) {
	case nil:
		return "", invalid(op, "work item has no variant")
	case provider.ActivityExecute:
		if !toWorker {
			return "", invalid(op, "ActivityExecute belongs to the worker queue, not the orchestrator queue")
		}
	default:
		if toWorker {
			return "", invalid(op, "%s cannot go to the worker queue: only ActivityExecute can", item.Variant())
		}
	}
	if item.TargetInstance() == "" {
		return "", invalid(op, "%s has an empty instance id", item.Variant())
	}
	b, err := provider.Marshal(item)
	if err != nil {
		return "", invalid(op, "encoding %s: %v", item.Variant(), err)
	}
	// The encoder writes invalid UTF-8 as the escape \ufffd (a real U+FFFD stays raw): only then
	// is the item walked for the culprit, so valid items cost one scan of their bytes.
	if bytes.Contains(b, []byte(`\ufffd`)) {
		if s, bad := badUTF8(reflect.ValueOf(item.Kind)); bad {
			return "", invalid(op, "%s holds text that is not valid UTF-8 (%q)", item.Variant(), s)
		}
	}
	if len(b) > p.opts.MaxPayloadBytes {
		return "", invalid(op, "%s is %d bytes, more than MaxPayloadBytes (%d)", item.Variant(), len(b), p.opts.MaxPayloadBytes)
	}
	return string(b), nil
}

// typeCode is what orch_fetch needs to know about a message without decoding it: 'S' a start
// (StartOrchestration, ContinueAsNew), 'Q' a QueueMessage, 'O' anything else.
func typeCode(item provider.WorkItem) string {
	switch item.Kind.(type) {
	case provider.StartOrchestration:
		return "S"
	case provider.ContinueAsNew:
		return "C"
	case provider.QueueMessage:
		return "Q"
	}
	return "O"
}

// pinKey renders a version so that string order is semver precedence order for releases
// (prereleases sort before their release, and among themselves by their text).
func pinKey(v *semver.Version) string {
	k := fmt.Sprintf("%010d.%010d.%010d", v.Major(), v.Minor(), v.Patch())
	if v.Prerelease() == "" {
		return k + "~"
	}
	return k + "-" + v.Prerelease()
}

// ms renders a duration as whole milliseconds for the scripts (negative as 0).
func ms(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 0), 10)
}

// storedVersion is the duroxide_version a stored event leaves out (storedEvent): the version
// duroxide 0.1.30 and the dx runtime stamp on the events they write. An event stamped with
// another version keeps it.
const storedVersion = "0.1.30"

// storedEvent shortens an encoded event (js, provider.Marshal's layout: event_id,
// source_event_id, instance_id, execution_id, timestamp_ms, duroxide_version, ...) for the
// history of (instance, exec): a null source_event_id is left out, and so are instance_id and
// execution_id when they are the history's own, duroxide_version when it is storedVersion, and
// an OrchestrationStarted's null parent_instance and parent_id (decodeHistory puts them back;
// provider.DecodeEventIn; absent options decode as null). About 90 bytes less per event. An
// event of another instance or execution is stored as it is.
func storedEvent(js, quotedInstance string, exec uint64) string {
	const head, sid, sidNull = `{"event_id":`, `"source_event_id":`, `"source_event_id":null,`
	if !strings.HasPrefix(js, head) {
		return js
	}
	i := strings.IndexByte(js, ',')
	if i < 0 {
		return js
	}
	id, rest, keep := js[:i+1], js[i+1:], ""
	if strings.HasPrefix(rest, sidNull) {
		rest = rest[len(sidNull):]
	} else if strings.HasPrefix(rest, sid) {
		j := strings.IndexByte(rest, ',')
		if j < 0 {
			return js
		}
		keep, rest = rest[:j+1], rest[j+1:]
	}
	own := `"instance_id":` + quotedInstance + `,"execution_id":` + strconv.FormatUint(exec, 10) + `,`
	if !strings.HasPrefix(rest, own) {
		return js
	}
	rest = rest[len(own):]
	const ts, dv = `"timestamp_ms":`, `"duroxide_version":"` + storedVersion + `",`
	j := strings.IndexByte(rest, ',')
	if !strings.HasPrefix(rest, ts) || j < 0 {
		return id + keep + rest
	}
	if strings.HasPrefix(rest[j+1:], dv) {
		rest = rest[:j+1] + rest[j+1+len(dv):]
	}
	const started, noParent = `"type":"OrchestrationStarted",`, `,"parent_instance":null,"parent_id":null}`
	if strings.HasPrefix(rest[j+1:], started) && strings.HasSuffix(rest, noParent) {
		rest = rest[:len(rest)-len(noParent)] + "}"
	}
	return id + keep + rest
}

// quoteInstance is an instance id as provider.Marshal writes it in an event.
func quoteInstance(instance string) string {
	b, err := provider.Marshal(instance)
	if err != nil {
		return ""
	}
	return string(b)
}

// tokenInstance is the instance an orchestration lock token names ('<36-character
// nonce>.<instance id>', see orch_fetch), or "" for a malformed token.
func tokenInstance(token string) string {
	if len(token) < 38 || token[36] != '.' {
		return ""
	}
	return token[37:]
}

// decodeHistory turns a stored history of (instance, exec) (event JSON lines in append order, see
// storedEvent) into events ordered by event_id.
func decodeHistory(stored, instance string, exec uint64) ([]provider.Event, error) {
	events := make([]provider.Event, 0, strings.Count(stored, "\n"))
	for n := 1; stored != ""; n++ {
		line, rest, _ := strings.Cut(stored, "\n")
		stored = rest
		e, err := provider.DecodeEventIn([]byte(line), instance, exec, storedVersion)
		if err != nil {
			return nil, fmt.Errorf("stored event #%d: %w", n, err)
		}
		events = append(events, e)
	}
	sort.SliceStable(events, func(a, b int) bool { return events[a].EventID < events[b].EventID })
	return events, nil
}

func str(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case int64:
		return strconv.FormatInt(s, 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func num(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// pairsToMap turns HGETALL pairs into a map.
func pairsToMap(pairs []any) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[str(pairs[i])] = str(pairs[i+1])
	}
	return m
}
