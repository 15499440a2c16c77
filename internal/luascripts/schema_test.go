package luascripts

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var testSchema = &Schema{Op: "t", Args: []Arg{
	S("a"), N("b"), F("c"), Sec("pairs", "x", "y"), S("d"), Opt(S("e")),
}}

// TestEncoderWritesTheSchemaOrder: a call written field by field comes out in the schema's order,
// each section preceded by the count of its entries.
func TestEncoderWritesTheSchemaOrder(t *testing.T) {
	e := testSchema.Encoder(0)
	e.Set("a", "A")
	e.Set("b", "2")
	e.Flag("c", true)
	e.Section("pairs")
	e.Entry("x1", "y1")
	e.Entry("x2", "y2")
	e.Set("d", "D")
	got, err := e.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"A", "2", "1", "2", "x1", "y1", "x2", "y2", "D"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// An empty section is its count, 0; the optional trailing field may be given.
	got, err = testSchema.Encode("a", "A", "b", "2", "c", "0", "pairs", "", "d", "D", "e", "E")
	if err == nil {
		t.Fatalf("Encode wrote a section as a scalar: %v", got)
	}
	e = testSchema.Encoder(0)
	e.Set("a", "A")
	e.Set("b", "2")
	e.Flag("c", false)
	e.Section("pairs")
	e.Set("d", "D")
	e.Set("e", "E")
	if got, err = e.Args(); err != nil || !reflect.DeepEqual(got, []any{"A", "2", "0", "0", "D", "E"}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestEncoderRejectsMismatches: every way a call site can disagree with its schema is an
// *ArgsError, never a shifted layout.
func TestEncoderRejectsMismatches(t *testing.T) {
	cases := map[string]func(e *Encoder){
		"missing field": func(e *Encoder) {
			e.Set("a", "A")
			e.Flag("c", true) // b skipped
		},
		"missing at the end": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Flag("c", true)
			e.Section("pairs") // d missing
		},
		"out of order": func(e *Encoder) {
			e.Set("b", "2")
			e.Set("a", "A")
		},
		"unknown field": func(e *Encoder) { e.Set("zz", "") },
		"entry too narrow": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Flag("c", true)
			e.Section("pairs")
			e.Entry("x1")
		},
		"entry too wide": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Flag("c", true)
			e.Section("pairs")
			e.Entry("x1", "y1", "z1")
		},
		"entry outside a section": func(e *Encoder) {
			e.Set("a", "A")
			e.Entry("x1", "y1")
		},
		"section written as a scalar": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Flag("c", true)
			e.Set("pairs", "0")
		},
		"scalar written as a section": func(e *Encoder) { e.Section("a") },
		"flag not 0 or 1": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Set("c", "yes")
		},
		"past the end": func(e *Encoder) {
			e.Set("a", "A")
			e.Set("b", "2")
			e.Flag("c", true)
			e.Section("pairs")
			e.Set("d", "D")
			e.Set("e", "E")
			e.Set("f", "F")
		},
	}
	for name, write := range cases {
		e := testSchema.Encoder(0)
		write(e)
		got, err := e.Args()
		var ae *ArgsError
		if !errors.As(err, &ae) || got != nil {
			t.Errorf("%s: got %v, %v; want an *ArgsError", name, got, err)
		}
	}
	if _, err := testSchema.Encode("a"); err == nil {
		t.Error("Encode took a name without a value")
	}
	if _, err := OrchAck.Compose(nil, nil); err == nil {
		t.Error("Compose on an operation that is not an ack-and-fetch")
	}
}

// TestRest: a rest of wide entries is written flat and may be empty.
func TestRest(t *testing.T) {
	rest := &Schema{Op: "x", Args: []Arg{S("id"), S("exec"), All("hist", "event_id", "json")}}
	e := rest.Encoder(0)
	e.Set("id", "i")
	e.Set("exec", "1")
	e.Section("hist")
	e.Entry("1", "{}")
	got, err := e.Args()
	if err != nil || !reflect.DeepEqual(got, []any{"i", "1", "1", "{}"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := WorkFetch.Encode("token", "n", "lock_ms", "1", "owner", "", "slock_ms", "0", "wait_ms", "0", "mode", "", "caps", "0", "any", "*"); err != nil || len(got) != 8 {
		t.Fatalf("an empty rest: %v, %v", got, err)
	}
}

func TestIndex(t *testing.T) {
	if OrchFetch.Index("token") != 0 || OrchFetch.Index("wait_ms") != -1 || OrchAck.Index("retention") != 14 || OrchAck.Index("nope") != -1 {
		t.Fatal("Index")
	}
}

func TestHeaderArgs(t *testing.T) {
	src := `-- op: does things
-- KEYS[1] meta key
-- ARGV[1] prefix, then:
--   a: first
--     more about a
--   pairs[x, y]: entries
--   rest[v]...: the rest
-- Reply: 1
--   not an argument: 2
`
	got := HeaderArgs(src)
	want := []string{"a", "pairs[x, y]", "rest[v]..."}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	s := &Schema{Op: "x", Args: []Arg{S("a"), Sec("pairs", "x", "y"), All("rest", "v")}}
	if !reflect.DeepEqual(s.HeaderNames(), want) {
		t.Fatalf("HeaderNames %q", s.HeaderNames())
	}
	if got := OrchAckFetch.HeaderNames(); strings.Join(got, ",") != "orch_ack...,orch_fetch...,n" {
		t.Fatalf("composed HeaderNames %q", got)
	}
}

// TestSchemasAreWellFormed: every declared schema can be unpacked and encoded unambiguously, and
// the checks catch what would make one unusable.
func TestSchemasAreWellFormed(t *testing.T) {
	for op, s := range Schemas {
		if s.Op != op {
			t.Errorf("Schemas[%q] is %s", op, s.Op)
		}
		if err := s.check(); err != nil {
			t.Error(err)
		}
		for i, p := range s.Parts {
			if Schemas[p.Op] != p {
				t.Errorf("%s: part %s is not a declared schema", op, p.Op)
			}
			// The ack reads the composed ARGV as it came: a rest would run into the fetch's.
			if i == 0 && slices.ContainsFunc(p.Args, func(a Arg) bool { return a.Kind == Rest }) {
				t.Errorf("%s: its ack %s has a rest", op, p.Op)
			}
		}
	}
	for _, bad := range []*Schema{
		{Op: "x", Args: []Arg{S("end")}},
		{Op: "x", Args: []Arg{S("a"), N("a")}},
		{Op: "x", Args: []Arg{S("_p")}},
		{Op: "x", Args: []Arg{S("a-b")}},
		{Op: "x", Args: []Arg{Sec("s")}},
		{Op: "x", Args: []Arg{All("r", "v"), S("a")}},
		{Op: "x", Args: []Arg{Opt(S("a")), S("b")}},
		{Op: "x", Args: []Arg{Opt(Sec("s", "v"))}},
	} {
		if bad.check() == nil {
			t.Errorf("accepted %+v", bad.Args)
		}
	}
}
