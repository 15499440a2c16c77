package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Marshal encodes v the way serde_json does for duroxide's types: like json.Marshal but without
// escaping '<', '>' and '&'. Use it (not json.Marshal) when the bytes must equal what duroxide
// writes; json.Marshal output decodes to the same value but escapes those three characters.
func Marshal(v any) ([]byte, error) {
	// This package's Marshalers (Event, WorkItem, ...) write compact, valid JSON through Marshal
	// itself: calling them directly spares encoding/json's second pass, which re-validates and
	// re-compacts a Marshaler's output (about 4% of a runtime's CPU per turn).
	if m, ok := v.(ownMarshaler); ok {
		return m.MarshalJSON()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})), nil
}

// unescapeLineSeparators writes U+2028 and U+2029 as they are, as serde_json does: encoding/json
// escapes them (for JavaScript) even without HTML escaping. Other escapes are copied as pairs, so
// an escaped backslash followed by "u2028" stays what it is.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if rest := b[i+1:]; len(rest) >= 5 && string(rest[:4]) == "u202" && (rest[4] == '8' || rest[4] == '9') {
			if rest[4] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// ownMarshaler is a json.Marshaler of this package: its output is compact and valid.
type ownMarshaler interface {
	json.Marshaler
	ownJSON()
}

func (Event) ownJSON()             {}
func (WorkItem) ownJSON()          {}
func (CarriedEvent) ownJSON()      {}
func (ErrorDetails) ownJSON()      {}
func (AppErrorKind) ownJSON()      {}
func (PoisonMessageType) ownJSON() {}

// marshalTagged writes serde's externally tagged form {"tag":body}.
func marshalTagged(tag string, body any) ([]byte, error) {
	b, err := Marshal(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(tag)+len(b)+5)
	out = append(out, '{', '"')
	out = append(out, tag...)
	out = append(out, '"', ':')
	out = append(out, b...)
	return append(out, '}'), nil
}

// unmarshalTagged reads serde's externally tagged form: an object with exactly one key.
func unmarshalTagged(what string, data []byte) (string, json.RawMessage, error) {
	if tag, body, ok := compactTagged(data); ok {
		return tag, body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return "", nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(m) != 1 {
		return "", nil, fmt.Errorf("%s: want an object with exactly one variant key, got %d keys", what, len(m))
	}
	for k, v := range m {
		return k, v, nil
	}
	panic("unreachable")
}

// compactTagged reads the compact form serde and Marshal write, {"Tag":body} with a plain tag
// (letters, digits, '_') and no white space, without decoding the object into a map: ok only when
// body is one valid JSON value, so it accepts exactly what the general path would, with the same
// result.
func compactTagged(data []byte) (string, json.RawMessage, bool) {
	if len(data) < 6 || data[0] != '{' || data[1] != '"' || data[len(data)-1] != '}' {
		return "", nil, false
	}
	i := 2
	for i < len(data) && (data[i] == '_' || data[i] >= 'a' && data[i] <= 'z' || data[i] >= 'A' && data[i] <= 'Z' || data[i] >= '0' && data[i] <= '9') {
		i++
	}
	if i == 2 || i+1 >= len(data) || data[i] != '"' || data[i+1] != ':' {
		return "", nil, false
	}
	body := data[i+2 : len(data)-1]
	if len(body) == 0 || isSpace(body[0]) || isSpace(body[len(body)-1]) || !json.Valid(body) {
		return "", nil, false
	}
	return string(data[2:i]), json.RawMessage(body), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// decodeBody decodes an enum variant's body into T.
func decodeBody[T any](what, variant string, body []byte) (T, error) {
	var v T
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return v, fmt.Errorf("%s %s: body is null", what, variant)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%s %s: %w", what, variant, err)
	}
	return v, nil
}
