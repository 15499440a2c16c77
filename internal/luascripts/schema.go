package luascripts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Script arguments: one schema. Each operation's ARGV after the prefix (ARGV[1]) is declared once,
// in args.go, as a Schema; both sides are written from it:
//   - Lua: the library builder (the root package's scripts.go) puts Schema.Lua, the statements that
//     unpack ARGV into locals named as the arguments, before the operation's body, so the
//     unpacking cannot go stale (the body reads token, hist, ... and never ARGV[n]);
//   - Go: call sites fill an Encoder of the schema, which refuses a field out of order, a missing
//     one, an entry of the wrong width, or a field the schema does not have (errors, never a
//     shifted layout).
//
// Each script's header documents its arguments by name, in order ("--   name: ..." lines after the
// "-- ARGV" line, see HeaderArgs); a test checks them against the schema.

// Kind is what an argument is and how Lua reads it.
type Kind uint8

const (
	Str     Kind = iota // a string: local name = ARGV[i]
	Num                 // a number: local name = ARGV[i] + 0 (tonumber(ARGV[i]) when optional)
	Flag                // '1' or '0': local name = ARGV[i] == '1' (Go: Encoder.Flag)
	Section             // a count, then that many entries of len(Entry) values: read in place
	Rest                // every argument left, entries of len(Entry) values (last in a schema)
)

// Arg is one argument of a schema. A Section is read in place: Lua gets two locals, name_at (the
// position of its count in ARGV) and name_n (the count), and entry k's field j (both 1-based) is
// ARGV[name_at + w * (k - 1) + j] for entries of w values; no table is made (an ack passes seven
// sections, mostly empty, and its unpacking into a table per section and per entry was 6% of a
// hello's Lua VM instructions, bench/luaprof). A Rest of one-value entries is a list of strings in Lua; of wider entries, a list of lists
// ({ {id, json}, ... }).
type Arg struct {
	Name     string
	Kind     Kind
	Entry    []string // a Section's or Rest's entry fields
	Optional bool     // a trailing scalar a caller may leave out (Lua: nil, or false for a Flag)
}

// Schema is one operation's arguments after the prefix, in order.
type Schema struct {
	Op   string
	Args []Arg
	// Parts, for an ack-and-fetch operation (lib.lua's ack_then_fetch): the operations whose
	// arguments it carries, the ack's then the fetch's, followed by the count of the ack's. Its
	// own Lua unpacks nothing: each part unpacks its own.
	Parts []*Schema
}

// S is a Str argument.
func S(name string) Arg { return Arg{Name: name, Kind: Str} }

// N is a Num argument.
func N(name string) Arg { return Arg{Name: name, Kind: Num} }

// F is a Flag argument.
func F(name string) Arg { return Arg{Name: name, Kind: Flag} }

// Sec is a count-prefixed section of entries with the given fields.
func Sec(name string, entry ...string) Arg { return Arg{Name: name, Kind: Section, Entry: entry} }

// All is the rest of the arguments, entries with the given fields (last in a schema).
func All(name string, entry ...string) Arg { return Arg{Name: name, Kind: Rest, Entry: entry} }

// Opt marks a trailing scalar optional.
func Opt(a Arg) Arg { a.Optional = true; return a }

// check reports what makes a schema unusable: a name that is not a Lua identifier of its own
// (or is one the unpacking code uses, _p and _i), a repeated name, a section or rest without
// fields, a rest before the end, a required argument after an optional one.
func (s *Schema) check() error {
	seen := map[string]bool{}
	optional := false
	for i, a := range s.Args {
		names := []string{a.Name}
		if a.Kind == Section {
			names = []string{a.Name + "_at", a.Name + "_n"}
		}
		for _, n := range names {
			if !luaName(a.Name) || seen[n] {
				return fmt.Errorf("%s: argument name %q", s.Op, a.Name)
			}
			seen[n] = true
		}
		if (a.Kind == Section || a.Kind == Rest) && len(a.Entry) == 0 {
			return fmt.Errorf("%s: %s has no entry fields", s.Op, a.Name)
		}
		if a.Kind == Rest && i != len(s.Args)-1 {
			return fmt.Errorf("%s: rest %s is not last", s.Op, a.Name)
		}
		if a.Optional && a.Kind > Flag {
			return fmt.Errorf("%s: %s: only scalars are optional", s.Op, a.Name)
		}
		if optional && !a.Optional {
			return fmt.Errorf("%s: required %s after an optional argument", s.Op, a.Name)
		}
		optional = optional || a.Optional
	}
	return nil
}

var luaKeywords = strings.Fields("and break do else elseif end false for function if in local nil not or repeat return then true until while")

func luaName(n string) bool {
	if n == "" || n == "_p" || n == "_i" || slices.Contains(luaKeywords, n) || n[0] >= '0' && n[0] <= '9' {
		return false
	}
	for _, r := range n {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Lua is the unpacking code of the schema: locals named as its arguments, read from ARGV. Scalars
// at fixed positions are read in one statement (local a, b = ARGV[2], ARGV[3] + 0); after a
// Section, positions follow a running index (_p); a section is its position and count.
func (s *Schema) Lua() string {
	if len(s.Parts) > 0 {
		return ""
	}
	var b strings.Builder
	fixed := true // positions are still constants
	pos := 2
	at := func(off int) string { // the Lua expression of the argument off places after the current one
		if fixed {
			return strconv.Itoa(pos + off)
		}
		if off == 0 {
			return "_p"
		}
		return "_p + " + strconv.Itoa(off)
	}
	read := func(a Arg, where string) string {
		switch a.Kind {
		case Num:
			if !a.Optional { // + 0 converts once (strtod), tonumber twice; an absent optional one is nil
				return "ARGV[" + where + "] + 0"
			}
			return "tonumber(ARGV[" + where + "])"
		case Flag:
			return "ARGV[" + where + "] == '1'"
		}
		return "ARGV[" + where + "]"
	}
	entry := func(a Arg, base string, i string) string { // one entry read at base + (i-1)*w
		w := len(a.Entry)
		if w == 1 {
			return "ARGV[" + base + " + " + i + "]"
		}
		vals := make([]string, w)
		for j := range vals {
			vals[j] = "ARGV[" + base + " + " + strconv.Itoa(w) + " * " + i + "]"
			if j < w-1 {
				vals[j] = strings.TrimSuffix(vals[j], "]") + " - " + strconv.Itoa(w-1-j) + "]"
			}
		}
		return "{ " + strings.Join(vals, ", ") + " }"
	}
	for i := 0; i < len(s.Args); {
		a := s.Args[i]
		switch a.Kind {
		case Str, Num, Flag:
			j := i
			var names, vals []string
			for ; j < len(s.Args) && s.Args[j].Kind <= Flag; j++ {
				names = append(names, s.Args[j].Name)
				vals = append(vals, read(s.Args[j], at(j-i)))
			}
			b.WriteString("local " + strings.Join(names, ", ") + " = " + strings.Join(vals, ", ") + "\n")
			if fixed {
				pos += j - i
			} else if j < len(s.Args) {
				b.WriteString("_p = _p + " + strconv.Itoa(j-i) + "\n")
			}
			i = j
			continue
		case Section:
			if fixed {
				b.WriteString("local _p = " + strconv.Itoa(pos) + "\n")
				fixed = false
			}
			// entry k (1-based) of width w starts at _p + 1 + w*(k-1)
			// (most sections are empty: their count '0' is compared, not converted)
			b.WriteString("local " + a.Name + "_at, " + a.Name + "_n = _p, ARGV[_p] == '0' and 0 or ARGV[_p] + 0\n")
			if i+1 < len(s.Args) {
				b.WriteString("_p = _p + 1 + " + strconv.Itoa(len(a.Entry)) + " * " + a.Name + "_n\n")
			}
		case Rest:
			// entry k starts at base + 1 + w*(k-1)
			base := "(_p - 1)"
			if fixed {
				base = strconv.Itoa(pos - 1)
			}
			n := "#ARGV - " + base
			if w := len(a.Entry); w > 1 {
				n = "(" + n + ") / " + strconv.Itoa(w)
			}
			b.WriteString("local " + a.Name + " = {}\n")
			b.WriteString("for _i = 1, " + n + " do " + a.Name + "[_i] = " + entry(a, base, "_i") + " end\n")
		}
		i++
	}
	return b.String()
}

// ArgsError is a call site's encoding that does not match its schema (a bug in the caller).
type ArgsError struct {
	Op  string
	Msg string
}

func (e *ArgsError) Error() string { return "arguments of " + e.Op + ": " + e.Msg }

// Encoder writes one call's arguments (after the prefix) in the schema's order. Each method names
// the argument it writes, which must be the schema's next (or, for Entry, the open section's or
// rest's entry); the first mismatch is kept and returned by Args, and later calls do nothing.
type Encoder struct {
	s     *Schema
	next  int // index in s.Args of the next argument
	args  []any
	count int // index in args of the open section's count, -1 when none
	n     int // entries written to the open section or rest
	open  *Arg
	err   error
}

// Encoder starts a call's arguments; size is a capacity hint (arguments expected).
func (s *Schema) Encoder(size int) *Encoder {
	return &Encoder{s: s, args: make([]any, 0, size), count: -1}
}

func (e *Encoder) fail(format string, a ...any) {
	if e.err == nil {
		e.err = &ArgsError{Op: e.s.Op, Msg: fmt.Sprintf(format, a...)}
	}
}

// take moves to the argument name, which must be the next one and of one of the kinds.
func (e *Encoder) take(name string, kinds ...Kind) *Arg {
	if e.err != nil {
		return nil
	}
	e.close()
	if e.next >= len(e.s.Args) {
		e.fail("%s: no argument is left", name)
		return nil
	}
	a := &e.s.Args[e.next]
	if a.Name != name {
		e.fail("%s given where %s is expected", name, a.Name)
		return nil
	}
	for _, k := range kinds {
		if a.Kind == k {
			e.next++
			return a
		}
	}
	e.fail("%s is not written that way (kind %d)", name, a.Kind)
	return nil
}

// close ends the open section: its count is the entries written.
func (e *Encoder) close() {
	if e.count >= 0 {
		e.args[e.count] = strconv.Itoa(e.n)
		e.count = -1
	}
}

// Set writes a Str or Num argument, or a Flag given as "1" or "0".
func (e *Encoder) Set(name, v string) {
	a := e.take(name, Str, Num, Flag)
	if a == nil {
		return
	}
	if a.Kind == Flag && v != "1" && v != "0" {
		e.fail("%s is a flag, given %q", name, v)
		return
	}
	e.args = append(e.args, v)
}

// Encode writes a call of scalars given as name, value pairs, in the schema's order.
func (s *Schema) Encode(pairs ...string) ([]any, error) {
	e := s.Encoder(len(pairs) / 2)
	if len(pairs)%2 != 0 {
		e.fail("a name without a value")
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		e.Set(pairs[i], pairs[i+1])
	}
	return e.Args()
}

// Flag writes a Flag argument: '1' or '0'.
func (e *Encoder) Flag(name string, v bool) {
	if e.take(name, Flag) != nil {
		e.args = append(e.args, flag(v))
	}
}

func flag(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// Section opens a Section (its entries follow with Entry; its count is written when the next
// argument starts, or by Args) or the Rest.
func (e *Encoder) Section(name string) {
	a := e.take(name, Section, Rest)
	if a == nil {
		return
	}
	e.open, e.n = a, 0
	if a.Kind == Section {
		e.count = len(e.args)
		e.args = append(e.args, "")
	}
}

// Entry writes one entry of the open section: exactly its width of values.
func (e *Encoder) Entry(vals ...string) {
	if e.err != nil {
		return
	}
	if e.open == nil {
		e.fail("an entry with no section open")
		return
	}
	if len(vals) != len(e.open.Entry) {
		e.fail("%s: an entry of %d values, not %d (%s)", e.open.Name, len(vals), len(e.open.Entry), strings.Join(e.open.Entry, ", "))
		return
	}
	for _, v := range vals {
		e.args = append(e.args, v)
	}
	e.n++
}

// Args ends the call: every argument must be written, except trailing optional ones and an empty
// Rest. It returns the arguments, or the first mismatch as an *ArgsError.
func (e *Encoder) Args() ([]any, error) {
	if e.err == nil {
		e.close()
		for _, a := range e.s.Args[e.next:] {
			if !a.Optional && a.Kind != Rest {
				e.fail("%s is missing", a.Name)
				break
			}
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.args, nil
}

// Compose writes an ack-and-fetch call (Schema.Parts): the ack's arguments, the fetch's, then the
// count of the ack's (lib.lua, ack_then_fetch).
func (s *Schema) Compose(ack, fetch []any) ([]any, error) {
	if len(s.Parts) != 2 {
		return nil, &ArgsError{Op: s.Op, Msg: "not an ack-and-fetch operation"}
	}
	all := make([]any, 0, len(ack)+len(fetch)+1)
	all = append(append(all, ack...), fetch...)
	return append(all, strconv.Itoa(len(ack))), nil
}

// Index is the position, in an Encoder's arguments, of the scalar name when it comes before every
// section and rest (a fixed position), else -1. A caller may rewrite that value between tries of
// one call (a fetch's lock nonce).
func (s *Schema) Index(name string) int {
	for i, a := range s.Args {
		if a.Kind == Section || a.Kind == Rest {
			break
		}
		if a.Name == name {
			return i
		}
	}
	return -1
}

// HeaderArgs reads the argument names a script's header documents, in order: after the line that
// starts with "-- ARGV", each line "--   name: text" (a scalar), "--   name[a, b]: text" (a
// section of entries a, b) or "--   name[a, b]...: text" (the rest); lines indented further
// continue the text. The block ends at the first other line. Sections and rests come back as
// "name[a, b]" and "name[a, b]...".
func HeaderArgs(src string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(src, "\n") {
		if !in {
			in = strings.HasPrefix(line, "-- ARGV")
			continue
		}
		rest, ok := strings.CutPrefix(line, "--   ")
		if !ok {
			break
		}
		if strings.HasPrefix(rest, " ") {
			continue // text continued
		}
		name, _, ok := strings.Cut(rest, ": ")
		if !ok {
			name = strings.TrimSuffix(rest, ":")
		}
		out = append(out, name)
	}
	return out
}

// HeaderNames is what HeaderArgs reads for a header that documents the schema.
func (s *Schema) HeaderNames() []string {
	var out []string
	if len(s.Parts) > 0 {
		for _, p := range s.Parts {
			out = append(out, p.Op+"...")
		}
		return append(out, "n")
	}
	for _, a := range s.Args {
		switch a.Kind {
		case Section:
			out = append(out, a.Name+"["+strings.Join(a.Entry, ", ")+"]")
		case Rest:
			out = append(out, a.Name+"["+strings.Join(a.Entry, ", ")+"]...")
		default:
			out = append(out, a.Name)
		}
	}
	return out
}
