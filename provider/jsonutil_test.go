package provider

import (
	"encoding/json"
	"testing"
)

// Marshal writes U+2028 and U+2029 raw, as serde_json does (encoding/json escapes them), and only
// those: an escaped backslash before "u2028" and other escapes stay as they are.
func TestMarshalLineSeparatorsRaw(t *testing.T) {
	for in, want := range map[string]string{
		"a\u2028b\u2029c": "\"a\u2028b\u2029c\"",
		`x\u2028`:         `"x\\u2028"`,
		"<&>\u0001\"\\":   `"<&>\u0001\"\\"`,
		"\\\u2028":        "\"\\\\\u2028\"",
		"plain":           `"plain"`,
	} {
		b, err := Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("Marshal(%q) = %s, want %s", in, b, want)
		}
		var back string
		if err := json.Unmarshal(b, &back); err != nil || back != in {
			t.Errorf("Marshal(%q) decodes to %q (%v)", in, back, err)
		}
	}
}
