package dxredis

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/internal/luascripts"
)

func TestLibForKeepsWhatIsUsed(t *testing.T) {
	lib := `-- state
local P
local function a() return b() end
-- b helps a
local function b() return 1 end
local function unused() return c() end
local function c() return 2 end
local T = {}
function T.b() return 3 end
setup = function() end
`
	got := libFor(lib, "return a() -- c is only named in a comment")
	for _, want := range []string{"local P", "local function a", "-- b helps a", "local function b", "function T.b", "setup ="} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	for _, no := range []string{"unused", "local function c"} {
		if strings.Contains(got, no) {
			t.Errorf("kept %q in\n%s", no, got)
		}
	}
}

// TestEvalScriptsAreSmaller: every EVAL script carries less than all the helpers.
func TestEvalScriptsAreSmaller(t *testing.T) {
	lib := libSource()
	for _, n := range luascripts.ScriptNames() {
		body := luascripts.ScriptSource(n)
		if got := libFor(lib, body+" dx_setup dx_once"); len(got) >= len(lib) {
			t.Errorf("%s carries every helper (%d bytes)", n, len(got))
		}
	}
}

// TestScriptHeadersNameTheirSchema: every operation has a schema (internal/luascripts/args.go) and
// documents exactly its arguments, by name and in order, in its header; every schema names an
// operation.
func TestScriptHeadersNameTheirSchema(t *testing.T) {
	names := luascripts.ScriptNames()
	for op := range luascripts.Schemas {
		if !slices.Contains(names, op) {
			t.Errorf("schema of %s: no scripts/%s.lua", op, op)
		}
	}
	for _, n := range names {
		s := luascripts.Schemas[n]
		if s == nil {
			t.Errorf("scripts/%s.lua has no schema in internal/luascripts/args.go", n)
			continue
		}
		got, want := luascripts.HeaderArgs(luascripts.ScriptSource(n)), s.HeaderNames()
		if !slices.Equal(got, want) {
			t.Errorf("scripts/%s.lua: header documents %q, the schema declares %q", n, got, want)
		}
	}
}

// TestSchemaBodiesReadNoPositions: an operation with a schema reads its arguments by name only
// (its unpacking is written from the schema), never ARGV[n] in its own code: ARGV is indexed only
// from a section's position (ARGV[j] with j from name_at, ARGV[name_at + ...]), never by a number
// or the unpacking's running index, and never counted.
var positional = regexp.MustCompile(`ARGV\[\s*([0-9]|_p|_i)`)

func TestSchemaBodiesReadNoPositions(t *testing.T) {
	for n := range luascripts.Schemas {
		for i, line := range strings.Split(luascripts.ScriptSource(n), "\n") {
			code, _, _ := strings.Cut(line, "--")
			if positional.MatchString(code) || strings.Contains(code, "#ARGV") {
				t.Errorf("scripts/%s.lua:%d reads ARGV by position: %s", n, i+1, line)
			}
		}
	}
}

// TestLibraryCarriesTheUnpacking: each operation of the Functions library begins with its schema's
// unpacking code (the EVAL forms are built from the same bodies), and the library's name changes
// with a schema.
func TestLibraryCarriesTheUnpacking(t *testing.T) {
	lib := luascripts.FunctionLibrary()
	for n, s := range luascripts.Schemas {
		if s.Lua() == "" {
			continue
		}
		def := "op_" + n + " = function(KEYS, ARGV)\n" + s.Lua() + luascripts.ScriptSource(n)
		if !strings.Contains(lib, def) {
			t.Errorf("the library's %s does not begin with its unpacking", n)
		}
	}
	before := luascripts.LibraryName()
	luascripts.OrchRenew.Args[1].Name = "extend_by"
	defer func() { luascripts.OrchRenew.Args[1].Name = "extend" }()
	if loadScripts().Name == before {
		t.Error("the library's name does not change with a schema")
	}
}
