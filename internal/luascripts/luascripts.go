// Package luascripts holds the Lua operations of scripts/ for this module's packages. The root
// package embeds the sources, builds them (its scripts.go: the EVAL forms, the Functions library)
// and registers them here at init, so that the root package's API keeps only what users call.
// Every package that imports this one imports the root package too (redisprovider), so the
// operations are registered before any use. Each operation's arguments are declared here too
// (args.go, schema.go), once, for the Lua unpacking the root package builds and for the Go call
// sites that encode them.
package luascripts

import (
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Set is the built operations.
type Set struct {
	Evals     map[string]*redis.Script // EVAL form of each operation (file name under scripts/ without ".lua")
	Flagged   map[string]*redis.Script // the EVAL form with a "#!lua flags=" shebang (Redis 7+)
	Flags     map[string][]string
	Names     []string          // sorted
	Library   string            // the Functions library source, for FUNCTION LOAD
	Name      string            // the library's name
	Version   string            // the hash of the sources in Name and in every function name
	LibSource string            // the shared helpers followed by the per-call setup (tests call helpers with it)
	Sources   map[string]string // each operation file, without the helpers
}

var set *Set

// Register is called once, by the root package's init.
func Register(s *Set) { set = s }

// LibraryPrefix starts the name of every dxredis Functions library:
// "dxredis_v<major>_<minor>_<patch>_<hash>".
const LibraryPrefix = "dxredis_v"

// FunctionNameOf is the FCALL name of an operation in the library of sources version.
func FunctionNameOf(version, op string) string { return "dx_" + version + "_" + op }

// Script returns the EVAL form of the named operation, or nil.
func Script(name string) *redis.Script { return set.Evals[name] }

// FlaggedScript returns the EVAL form of the named operation with its flags in a "#!lua flags="
// shebang, for servers that support it (Redis 7+), or nil.
func FlaggedScript(name string) *redis.Script { return set.Flagged[name] }

// ReadOnly reports whether the named operation never writes (flag no-writes): it may run with
// FCALL_RO or EVALSHA_RO, on replicas, and when Redis is out of memory.
func ReadOnly(name string) bool { return slices.Contains(set.Flags[name], "no-writes") }

// ScriptNames lists every operation, sorted.
func ScriptNames() []string { return append([]string(nil), set.Names...) }

// ScriptSource returns one operation file (without the shared helpers).
func ScriptSource(name string) string { return set.Sources[name] }

// LibSource returns the shared helpers followed by the per-call setup, ready to be followed by an
// EVAL body (tests use it to call helpers directly).
func LibSource() string { return set.LibSource }

// FunctionLibrary returns the Redis Functions library holding every operation, for FUNCTION
// LOAD. Its name carries a hash of the sources, so different dxredis versions can share a server.
func FunctionLibrary() string { return set.Library }

// LibraryName returns the name of FunctionLibrary.
func LibraryName() string { return set.Name }

// FunctionName returns the FCALL name of an operation in FunctionLibrary.
func FunctionName(op string) string { return FunctionNameOf(set.Version, op) }

// OlderLibrary reports whether name is the Functions library of an older dxredis release. Names of
// another form (e.g. "dxredis_<hash>", before releases were named) are never reported: nothing
// tells whether a process still uses them.
func OlderLibrary(name string) bool {
	mine, ok1 := libraryRelease(set.Name)
	theirs, ok2 := libraryRelease(name)
	return ok1 && ok2 && slices.Compare(theirs, mine) < 0
}

// libraryRelease parses the release of a library name.
func libraryRelease(name string) ([]int, bool) {
	rest, ok := strings.CutPrefix(name, LibraryPrefix)
	parts := strings.Split(rest, "_")
	if !ok || len(parts) != 4 {
		return nil, false
	}
	out := make([]int, 3)
	for i := range out {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}
