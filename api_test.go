package dxredis_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update", false, "rewrite api/*.txt from the code (after a deliberate API change)")

// apiPackages are the packages whose exported API is frozen: a change to any exported name or
// signature must show in api/<name>.txt, in the same commit, so that an API change is always a
// decision a reviewer sees, never an accident.
var apiPackages = map[string]string{
	"dxredis":       ".",
	"provider":      "provider",
	"redisprovider": "redisprovider",
	"dx":            "dx",
	"dxtest":        "dxtest",
	"conformance":   "conformance",
}

// TestAPI compares each frozen package's exported declarations with api/<name>.txt.
// go test -run TestAPI . -update rewrites the files.
func TestAPI(t *testing.T) {
	for name, dir := range apiPackages {
		got, err := exportedAPI(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		file := filepath.Join("api", name+".txt")
		if *updateAPI {
			if err := os.MkdirAll("api", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test -run TestAPI . -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("the exported API of %s differs from %s; if the change is deliberate, run "+
				"go test -run TestAPI . -update and commit the file. Differences:\n%s", dir, file, lineDiff(string(want), got))
		}
	}
}

// exportedAPI lists a package's exported declarations, one per line, sorted: functions and methods
// with their signatures, types with their exported fields or methods, constants and variables.
func exportedAPI(dir string) (string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return "", err
		}
		files = append(files, f)
	}
	var lines []string
	{
		d, err := doc.NewFromFiles(fset, files, "./"+dir)
		if err != nil {
			return "", err
		}
		node := func(n any) string {
			var b bytes.Buffer
			_ = (&printer.Config{Mode: printer.RawFormat}).Fprint(&b, fset, n)
			return strings.Join(strings.Fields(b.String()), " ")
		}
		fn := func(f *doc.Func) {
			decl := *f.Decl
			decl.Body, decl.Doc = nil, nil
			lines = append(lines, node(&decl))
		}
		values := func(vs []*doc.Value, kind string) {
			for _, v := range vs {
				for _, n := range v.Names {
					if ast.IsExported(n) {
						lines = append(lines, kind+" "+n)
					}
				}
			}
		}
		values(d.Consts, "const")
		values(d.Vars, "var")
		for _, f := range d.Funcs {
			fn(f)
		}
		for _, ty := range d.Types {
			for _, s := range ty.Decl.Specs {
				ts := s.(*ast.TypeSpec)
				if !ast.IsExported(ts.Name.Name) {
					continue
				}
				ts2 := *ts
				ts2.Doc, ts2.Comment = nil, nil
				if st, ok := ts.Type.(*ast.StructType); ok {
					// Exported fields only: unexported ones are not API.
					lines = append(lines, "type "+ts.Name.Name+" struct")
					for _, f := range st.Fields.List {
						for _, n := range f.Names {
							if ast.IsExported(n.Name) {
								lines = append(lines, fmt.Sprintf("field %s.%s %s", ts.Name.Name, n.Name, node(f.Type)))
							}
						}
						if len(f.Names) == 0 { // embedded
							lines = append(lines, fmt.Sprintf("embed %s %s", ts.Name.Name, node(f.Type)))
						}
					}
				} else if it, ok := ts.Type.(*ast.InterfaceType); ok {
					lines = append(lines, "type "+ts.Name.Name+" interface")
					for _, m := range it.Methods.List {
						lines = append(lines, fmt.Sprintf("imethod %s %s", ts.Name.Name, node(m)))
					}
				} else {
					lines = append(lines, "type "+node(&ts2))
				}
			}
			values(ty.Consts, "const")
			values(ty.Vars, "var")
			for _, f := range ty.Funcs {
				fn(f)
			}
			for _, m := range ty.Methods {
				fn(m)
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
