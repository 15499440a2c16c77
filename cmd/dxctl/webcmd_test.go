package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWebRefusesUnsafeSetups(t *testing.T) {
	f := newFixture(t)
	f.populate()
	t.Setenv("DXCTL_TEST_EMPTY_TOKEN", "")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.fails("not a loopback address: refusing to serve it without a token", "web", "--addr", "0.0.0.0:0")
	f.fails("not a loopback address", "web", "--addr", ":0")
	f.fails("not a loopback address", "web", "--addr", "example.com:8080")
	f.fails("want host:port", "web", "--addr", "8080")
	f.fails("the variable is unset or empty", "web", "--token-env", "DXCTL_TEST_EMPTY_TOKEN")
	f.fails("is empty", "web", "--token-file", empty)
	f.fails("no such file", "web", "--token-file", filepath.Join(t.TempDir(), "missing"))
	f.fails("not both", "web", "--token-env", "X", "--token-file", empty)
	// A namespace holding nothing is refused like by every command (a misspelt --ns).
	var out, errOut bytes.Buffer
	if code := run([]string{"--addr", f.addr, "--ns", "empty", "web", "--addr", "127.0.0.1:0"}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "holds nothing") {
		t.Fatalf("empty namespace: exit %d, %q", code, errOut.String())
	}
}

// TestWebServes runs the command's server on a free port with a token from a file and reads
// the overview through it.
func TestWebServes(t *testing.T) {
	f := newFixture(t)
	f.populate()
	var out, errOut bytes.Buffer
	a := &app{addr: f.addr, ns: testNS, timeout: 10 * time.Second, stdout: &out, stderr: &errOut}
	defer a.close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := readToken("", file)
	if err != nil || tok != "tok-123" {
		t.Fatalf("token %q, %v", tok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		done <- a.web(ctx, webOptions{addr: "127.0.0.1:0", token: tok, readOnly: true}, func(addr string) { ready <- addr })
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("web returned %v (%s)", err, errOut.String())
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/overview", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", code)
	}
	if code, body := get("tok-123"); code != 200 || !strings.Contains(body, `"namespace": "ctl"`) {
		t.Fatalf("with the token: %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dxctl web: namespace \"ctl\" at http://"+addr+"/ (read-only)") {
		t.Fatalf("stdout %q", out.String())
	}
}
