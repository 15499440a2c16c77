package dxredis

import (
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
