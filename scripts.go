package dxredis

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/internal/luascripts"
)

// Every operation is one Lua file under scripts/, run after the shared helpers of the
// scripts/lib*.lua files (lib.lua, then the others by name: lib_admin.lua, lib_worker.lua). Each operation file starts with a header
// giving KEYS, ARGV, the reply, the errors and the cost. Calling convention: KEYS[1] is the
// partition's Seq key (routes cluster clients to the right slot), KEYS[2] an optional attempt key
// (Keyspace.Attempt: the call runs at most once per attempt, see dx_once in lib.lua) and ARGV[1]
// the partition's key prefix. The arguments after the prefix are declared once, in
// internal/luascripts/args.go: each operation is built as its schema's unpacking code (locals
// named as the arguments) followed by its file, and Go call sites encode from the same schema.
//
// The same sources are served two ways:
//   - as a Redis Functions library (Redis 7+): loaded once per server, the helpers are defined
//     once and each call is FCALL FunctionName(op); this saves re-running ~20 KB of helper
//     definitions on every call, a large part of a small script's cost;
//   - as EVAL scripts (Script(op)), for servers without FUNCTION (miniredis, Redis 6).
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// Release is this dxredis release. The Functions library's name carries it, so that loading a
// newer release's library can delete the libraries of older ones.
const Release = "0.1.0"

// The operations are built once and handed to internal/luascripts, through which this module's
// packages (redisprovider) call them: the root package's API holds only what users call.
func init() { luascripts.Register(loadScripts()) }

// libSource concatenates the shared helpers.
func libSource() string {
	var lib strings.Builder
	libs, _ := fs.Glob(scriptFiles, "scripts/lib*.lua") // sorted: lib.lua first
	for _, path := range libs {
		body, _ := scriptFiles.ReadFile(path)
		lib.Write(body)
		lib.WriteString("\n")
	}
	return lib.String()
}

// checksFormat reports whether an operation checks the namespace's format before it runs: every
// operation that writes, except one whose header says "-- format: any" (the migration).
func checksFormat(flags []string, body string) bool {
	return !slices.Contains(flags, "no-writes") && scriptHeader(body, "format") == nil
}

// setupCall is the Lua statement that begins an operation's call: dx_setup (lib.lua) with the
// call's prefix, and for an operation that writes, the format check, whose error is the reply.
func setupCall(args string, writes bool) string {
	if !writes {
		return "dx_setup(" + args + "[1])\n"
	}
	return "do local ferr = dx_setup(" + args + "[1], true) if ferr then return ferr end end\n"
}

func loadScripts() *luascripts.Set {
	lib := libSource()
	r := &luascripts.Set{Evals: map[string]*redis.Script{}, Flagged: map[string]*redis.Script{}, Flags: map[string][]string{},
		Sources: map[string]string{}, LibSource: lib + setupCall("ARGV", true)}
	entries, _ := fs.Glob(scriptFiles, "scripts/*.lua")
	bodies := map[string]string{}
	for _, path := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "scripts/"), ".lua")
		if strings.HasPrefix(name, "lib") {
			continue
		}
		body, _ := scriptFiles.ReadFile(path)
		// The operation's arguments are unpacked by code written from its schema
		// (internal/luascripts/args.go), before its body: the body reads them by name.
		unpack := ""
		if s := luascripts.Schemas[name]; s != nil {
			unpack = s.Lua()
		}
		bodies[name] = unpack + string(body)
		r.Sources[name] = string(body)
		r.Flags[name] = scriptFlags(string(body))
		r.Names = append(r.Names, name)
	}
	sort.Strings(r.Names)
	for _, name := range r.Names {
		body := bodies[name]
		// Operations a combined one calls (header "-- include: a, b") are defined first, as in
		// the Functions library.
		var ops strings.Builder
		for _, inc := range scriptHeader(body, "include") {
			ops.WriteString("local op_" + inc + "\nop_" + inc + " = function(KEYS, ARGV)\n" + bodies[inc] + "\nend\n")
		}
		ops.WriteString("local function op(KEYS, ARGV)\n" + body + "\nend\n")
		ops.WriteString(wrapOnce(name, "op", "KEYS", "ARGV", body) + "\n")
		// An EVAL script runs its helpers' definitions on every call: it carries only the
		// helpers it uses (the Functions library defines them all, once per server).
		var eval strings.Builder
		setup := setupCall("ARGV", checksFormat(r.Flags[name], body))
		eval.WriteString(libFor(lib, setup+ops.String()) + setup)
		eval.WriteString(ops.String())
		r.Evals[name] = redis.NewScript(eval.String())
		r.Flagged[name] = redis.NewScript("#!lua flags=" + strings.Join(r.Flags[name], ",") + "\n" + eval.String())
	}

	sum := sha1.New()
	sum.Write([]byte(lib))
	for _, n := range r.Names {
		sum.Write([]byte(n + "\x00" + bodies[n]))
	}
	r.Version = hex.EncodeToString(sum.Sum(nil))[:12]

	r.Name = luascripts.LibraryPrefix + strings.ReplaceAll(Release, ".", "_") + "_" + r.Version
	var b strings.Builder
	b.WriteString("#!lua name=" + r.Name + "\n")
	b.WriteString(lib)
	// Each operation body becomes a function of (KEYS, ARGV), so it reads exactly as in EVAL;
	// declared first, so that a combined operation can call the others.
	b.WriteString("local op_" + strings.Join(r.Names, ", op_") + "\n")
	for _, n := range r.Names {
		b.WriteString("op_" + n + " = function(KEYS, ARGV)\n" + bodies[n] + "\nend\n")
	}
	for _, n := range r.Names {
		b.WriteString("redis.register_function{function_name = '" + luascripts.FunctionNameOf(r.Version, n) + "',\n" +
			"  callback = function(keys, args)\n    " + setupCall("args", checksFormat(r.Flags[n], bodies[n])) + "    " + wrapOnce(n, "op_"+n, "keys", "args", bodies[n]) + "\n  end,\n" +
			"  flags = {" + luaStrings(r.Flags[n]) + "}}\n")
	}
	r.Library = b.String()
	return r
}

// libFor returns the parts of the shared helpers that code needs: every top-level statement that
// is not a function definition (state, setup hooks), and the functions code uses, directly or
// through other helpers, in their original order. Names are matched as words outside comments, so
// it may keep a helper that is only mentioned in a string, never drop one that is used.
func libFor(lib, uses string) string {
	type chunk struct {
		text string
		fn   string // the function it defines, "" for other statements
	}
	var chunks []chunk
	var cur []string
	flush := func() {
		if len(cur) == 0 {
			return
		}
		text := strings.Join(cur, "\n") + "\n"
		fn := ""
		for _, l := range cur {
			// "local function name(" or "function WQ.name(" (lib_worker.lua's table of helpers)
			rest, ok := strings.CutPrefix(l, "local function ")
			if !ok {
				rest, ok = strings.CutPrefix(l, "function ")
			}
			if ok {
				fn, _, _ = strings.Cut(rest, "(")
				_, fn, _ = strings.Cut("."+fn, ".") // the name after a table prefix
				if i := strings.LastIndex(fn, "."); i >= 0 {
					fn = fn[i+1:]
				}
				break
			}
		}
		chunks = append(chunks, chunk{text, fn})
		cur = nil
	}
	code := false // cur holds more than comments: a top-level line starts the next chunk
	for _, l := range strings.Split(lib, "\n") {
		top := l != "" && l[0] != ' ' && l[0] != '\t' && !strings.HasPrefix(l, "end") &&
			!strings.HasPrefix(l, "}") && !strings.HasPrefix(l, ")") && !strings.HasPrefix(l, "else")
		if top && code {
			flush()
			code = false
		}
		cur = append(cur, l)
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "--") {
			code = true
		}
	}
	flush()
	words := func(s string) []string {
		var code strings.Builder // without comments: a helper named in a comment is not used
		for _, l := range strings.Split(s, "\n") {
			l, _, _ = strings.Cut(l, "--")
			code.WriteString(l + "\n")
		}
		return strings.FieldsFunc(code.String(), func(r rune) bool {
			return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		})
	}
	defined := map[string][]int{} // a name may be defined twice (k_inst and WQ.k_inst): keep both
	for i, c := range chunks {
		if c.fn != "" {
			defined[c.fn] = append(defined[c.fn], i)
		}
	}
	need := make([]bool, len(chunks))
	var visit func(text string)
	visit = func(text string) {
		for _, w := range words(text) {
			for _, i := range defined[w] {
				if !need[i] {
					need[i] = true
					visit(chunks[i].text)
				}
			}
		}
	}
	for i, c := range chunks {
		if c.fn == "" {
			need[i] = true
			visit(c.text)
		}
	}
	visit(uses)
	var b strings.Builder
	for i, c := range chunks {
		if need[i] {
			b.WriteString(c.text)
		}
	}
	return b.String()
}

// scriptFlags reads an operation's Redis script flags from its header line "-- flags: f1, f2 (why)":
// no-writes for reads (FCALL_RO, allowed on replicas and when Redis is out of memory), allow-oom
// for deletes that only free memory. Without the line a script has no flags: Redis refuses it
// with OOM once used memory exceeds maxmemory, before it runs.
func scriptFlags(body string) []string {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- flags:"); ok {
			rest, _, _ = strings.Cut(rest, "(") // a comment may follow
			var out []string
			for _, f := range strings.Split(rest, ",") {
				out = append(out, strings.TrimSpace(f))
			}
			return out
		}
	}
	return nil
}

// scriptHeader returns the comma-separated values of an operation's header line "-- <name>: a, b".
func scriptHeader(body, name string) []string {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- "+name+":"); ok {
			rest, _, _ = strings.Cut(rest, "(")
			var out []string
			for _, f := range strings.Split(rest, ",") {
				out = append(out, strings.TrimSpace(f))
			}
			return out
		}
	}
	return nil
}

// wrapOnce is the Lua statement that runs an operation: through dx_once (at most once per
// attempt), unless its header says "-- attempt: ack only" (a combined operation that applies
// dx_once to its ack part itself).
func wrapOnce(name, fn, keys, args, body string) string {
	if scriptHeader(body, "attempt") != nil {
		return "return " + fn + "(" + keys + ", " + args + ")"
	}
	return "return dx_once(" + fn + ", " + keys + ", " + args + ")"
}

func luaStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	return strings.Join(q, ", ")
}
