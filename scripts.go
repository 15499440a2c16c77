package dxredis

import (
	"embed"
	"io/fs"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every script is the scripts/lib*.lua files (shared helpers and key builders: lib.lua, then
// lib_worker.lua) followed by one operation file. Each operation file starts with a header giving KEYS, ARGV, the reply, the errors and the
// cost. Calling convention: KEYS[1] is the partition's Seq key (routes cluster clients to the
// right slot) and ARGV[1] the partition's key prefix.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

var scripts = loadScripts()

// LibSource returns the shared Lua helpers every script starts with.
func LibSource() (string, error) {
	var lib strings.Builder
	libs, err := fs.Glob(scriptFiles, "scripts/lib*.lua") // sorted: lib.lua first
	if err != nil {
		return "", err
	}
	for _, path := range libs {
		body, err := scriptFiles.ReadFile(path)
		if err != nil {
			return "", err
		}
		lib.Write(body)
		lib.WriteString("\n")
	}
	return lib.String(), nil
}

// ScriptSource returns one operation file (without the shared helpers).
func ScriptSource(name string) (string, error) {
	b, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	return string(b), err
}

func loadScripts() map[string]*redis.Script {
	lib, _ := LibSource()
	out := map[string]*redis.Script{}
	entries, _ := fs.Glob(scriptFiles, "scripts/*.lua")
	for _, path := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "scripts/"), ".lua")
		if strings.HasPrefix(name, "lib") {
			continue
		}
		body, _ := scriptFiles.ReadFile(path)
		out[name] = redis.NewScript(lib + string(body))
	}
	return out
}

// Script returns the named script (the file name under scripts/ without ".lua"), or nil.
func Script(name string) *redis.Script { return scripts[name] }

// ScriptNames lists every script, sorted.
func ScriptNames() []string {
	names := make([]string, 0, len(scripts))
	for n := range scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
