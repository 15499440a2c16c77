package dxredis_test

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestReadmeFirstScreenCompiles builds the README's first Go block as a user would: saved as
// main.go in a module of its own that depends on this repository through a replace directive, as
// the README's "Depend on it today" says. The build runs offline (GOPROXY=off): every dependency
// is already in the module cache after this repository's own build.
func TestReadmeFirstScreenCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program (-short)")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, ok := firstGoBlock(string(readme))
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	if formatted, err := format.Source([]byte(src)); err != nil {
		t.Fatalf("README's first Go block does not parse: %v", err)
	} else if !bytes.Equal(formatted, []byte(src)) {
		t.Errorf("README's first Go block is not gofmt-formatted; gofmt gives:\n%s", formatted)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go [0-9.]+$`).Find(goMod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	goSum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"main.go": src,
		"go.mod": "module readmecheck\n\n" + string(goLine) + "\n\n" +
			"require github.com/duroxide-go/dxredis v0.0.0\n\n" +
			"replace github.com/duroxide-go/dxredis => " + filepath.ToSlash(root) + "\n",
		"go.sum": string(goSum),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	// GOFLAGS in the environment replaces the one `go env -w` set: keep that one's flags.
	goFlags, err := exec.Command(goTool, "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	cmd := exec.Command(goTool, "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(string(goFlags)+" -mod=mod"),
		"GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README's first Go block does not build as main.go of a module that replaces "+
			"github.com/duroxide-go/dxredis with this checkout: %v\n%s\n--- main.go:\n%s", err, out, src)
	}
}

// firstGoBlock returns the body of the first ```go fenced block.
func firstGoBlock(md string) (string, bool) {
	_, rest, ok := strings.Cut(md, "\n```go\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, "\n```\n")
	return body + "\n", ok
}

// TestDocLinksResolve: every relative link in README.md and docs/*.md names a file or folder of
// this repository, and a #fragment names a heading of the Markdown file it points to.
func TestDocLinksResolve(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range append([]string{"README.md"}, docs...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(text)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(link, "#")
			target := doc
			if path != "" {
				target = filepath.Join(filepath.Dir(doc), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %v", doc, link, err)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q: a fragment on a file that is not Markdown", doc, link)
				continue
			}
			body, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(body))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", doc, link, target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the targets of the [text](target) and ![alt](target) links outside fenced
// code blocks and code spans.
func markdownLinks(md string) []string {
	var links []string
	fenced := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			links = append(links, m[1])
		}
	}
	return links
}

var codeSpanRE = regexp.MustCompile("`[^`]*`")

func stripCodeSpans(line string) string { return codeSpanRE.ReplaceAllString(line, "") }

// headingAnchors returns the anchors GitHub gives the file's headings: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}
