package redisprovider_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// The format-1 fixture: testdata/format1gen built from the last format-1 commit (format1Gen) and
// from the working tree (currentGen). Its populate mode leaves a namespace holding every kind of
// state (running instances waiting on a timer, an event, a child, a tagged activity and a session;
// queued, delayed and parked-orphan messages; completed, failed and continued-as-new instances;
// KV, custom status, retention TTLs), finish runs every instance to its end and reports each, and
// calls makes every provider write once. dxctl migrate's test populates with format1Gen, migrates,
// finishes with currentGen and compares with TestFormat1FixtureReference's result.

// format1Commit is the last commit whose code writes storage format 1.
const format1Commit = "563f790"

// Format1Manifest is what the generator's populate prints (testdata/format1gen, Manifest).
type Format1Manifest struct {
	Instances []string          `json:"instances"`
	States    map[string]string `json:"states"`
	Raise     []json.RawMessage `json:"raise"`
	Enqueue   []json.RawMessage `json:"enqueue"`
	Start     []json.RawMessage `json:"start"`
	// Raw is the manifest as printed, which finish reads back.
	Raw []byte `json:"-"`
}

// Format1Result is what the generator's finish prints for one instance.
type Format1Result struct {
	State        string            `json:"state"`
	Output       string            `json:"output,omitempty"`
	Error        string            `json:"error,omitempty"`
	CustomStatus string            `json:"custom_status,omitempty"`
	KV           map[string]string `json:"kv,omitempty"`
	Executions   [][]string        `json:"executions"`
}

// Format1Call is one provider call the generator's calls mode made, and its error ("ok").
type Format1Call struct {
	Name   string `json:"name"`
	Result string `json:"result"`
}

var genBuilds sync.Map // "format1" or "current" -> *genBuild

type genBuild struct {
	once sync.Once
	path string
	err  error
}

// format1Gen returns the generator built from format1Commit's tree (git archive), so that it runs
// that commit's dx runtime and redisprovider. The binary is kept in the user's cache directory under
// a hash of the commit, the generator's source and the Go version: later test runs reuse it.
func format1Gen(t testing.TB) string {
	t.Helper()
	return buildGen(t, "format1", func(src []byte) (string, error) {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		commit, err := exec.Command("git", "-C", root, "rev-parse", format1Commit+"^{commit}").Output()
		if err != nil {
			return "", fmt.Errorf("git rev-parse %s: %w", format1Commit, err)
		}
		sum := sha256.Sum256(append(append(commit, src...), runtime.Version()...))
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		bin := filepath.Join(cache, "dxredis-test", "format1gen-"+hex.EncodeToString(sum[:8]))
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
		dir, err := os.MkdirTemp("", "format1gen-src-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		archive := exec.Command("git", "-C", root, "archive", "--format=tar", format1Commit)
		untar := exec.Command("tar", "-x", "-C", dir)
		if untar.Stdin, err = archive.StdoutPipe(); err != nil {
			return "", err
		}
		if err := untar.Start(); err != nil {
			return "", err
		}
		if err := archive.Run(); err != nil {
			return "", fmt.Errorf("git archive %s: %w", format1Commit, err)
		}
		if err := untar.Wait(); err != nil {
			return "", fmt.Errorf("untar %s: %w", format1Commit, err)
		}
		cmd := filepath.Join(dir, "cmd", "format1gen")
		if err := os.MkdirAll(cmd, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(cmd, "main.go"), src, 0o644); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return "", err
		}
		tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
		if err := goBuild(dir, tmp, "./cmd/format1gen"); err != nil {
			return "", err
		}
		return bin, os.Rename(tmp, bin) // atomic: a concurrent run finds a whole binary or none
	})
}

// currentGen returns the generator built from the working tree (Go's build cache makes later
// builds a link step).
func currentGen(t testing.TB) string {
	t.Helper()
	return buildGen(t, "current", func([]byte) (string, error) {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir, err := os.MkdirTemp("", "format1gen-current-")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, "format1gen")
		return bin, goBuild(root, bin, "./redisprovider/testdata/format1gen")
	})
}

func buildGen(t testing.TB, which string, build func(src []byte) (string, error)) string {
	t.Helper()
	v, _ := genBuilds.LoadOrStore(which, &genBuild{})
	b := v.(*genBuild)
	b.once.Do(func() {
		src, err := os.ReadFile(filepath.Join("testdata", "format1gen", "main.go"))
		if err != nil {
			b.err = err
			return
		}
		b.path, b.err = build(src)
	})
	if b.err != nil {
		t.Fatalf("build the %s generator: %v", which, b.err)
	}
	return b.path
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse --show-toplevel: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goBuild builds pkg in the module at dir, offline: the module cache holds every dependency of
// both trees (they have the same go.sum).
func goBuild(dir, out, pkg string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the format-1 generator is built with go, which is not on PATH: %v", err)
	}
	cmd := exec.Command(goCmd, "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	return nil
}

// genNamespace is a fresh namespace on the test backend for a generator: the address to give it
// (cluster nodes comma-separated), the namespace, and a client on the same server for the test's
// own reads. Its keys are removed when the test ends.
func genNamespace(t *testing.T) (addr, ns string, client redis.UniversalClient) {
	t.Helper()
	ns = fmt.Sprintf("f1-%d-%s", time.Now().UnixNano()%1e9, strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"))
	if len(ns) > 64 {
		ns = ns[:64]
	}
	switch backend() {
	case "cluster":
		addr = os.Getenv("DXREDIS_TEST_CLUSTER")
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addr, ",")})
	case "redis":
		addr = os.Getenv("DXREDIS_TEST_ADDR")
		client = redis.NewClient(&redis.Options{Addr: addr})
	default:
		addr = miniredis.RunT(t).Addr()
		client = redis.NewClient(&redis.Options{Addr: addr})
	}
	t.Cleanup(func() {
		if backend() != "miniredis" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = redisprovider.DropNamespace(ctx, client, ns)
		}
		_ = client.Close()
	})
	return addr, ns, client
}

// runGen runs the generator and returns its standard output; a failure fails t with its stderr.
func runGen(t testing.TB, gen string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gen, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(gen), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// genPopulate fills the namespace with the generator's runtime and returns the manifest. timer is
// the durable timers' duration (0: the generator's 3 s).
func genPopulate(t testing.TB, gen, addr, ns string, timer time.Duration) Format1Manifest {
	t.Helper()
	args := []string{"populate", "-addr", addr, "-ns", ns}
	if timer > 0 {
		args = append(args, "-timer", timer.String())
	}
	out := runGen(t, gen, args...)
	var m Format1Manifest
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("populate's manifest: %v\n%s", err, out)
	}
	m.Raw = out
	return m
}

// genFinish runs every instance of the manifest to its end with the generator's runtime and
// returns each one's result.
func genFinish(t testing.TB, gen, addr, ns string, m Format1Manifest) map[string]Format1Result {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(file, m.Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runGen(t, gen, "finish", "-addr", addr, "-ns", ns, "-manifest", file, "-timeout", "90s")
	var res map[string]Format1Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("finish's results: %v\n%s", err, out)
	}
	return res
}

// genCalls makes the generator's provider calls (only the one named when only is not empty; none,
// listing their names, when only is "-list").
func genCalls(t testing.TB, gen, addr, ns, only string) []Format1Call {
	t.Helper()
	args := []string{"calls", "-addr", addr, "-ns", ns}
	switch only {
	case "":
	case "-list":
		args = append(args, "-list")
	default:
		args = append(args, "-only", only)
	}
	out := runGen(t, gen, args...)
	var calls []Format1Call
	if err := json.Unmarshal(out, &calls); err != nil {
		t.Fatalf("calls' results: %v\n%s", err, out)
	}
	return calls
}

// format1Reference is what finish reports after populate on a fresh namespace, with the working
// tree's runtime (testdata/format1gen/reference.json): the outputs and histories a migrated
// format-1 namespace must reproduce.
func format1Reference(t testing.TB) map[string]Format1Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "format1gen", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]Format1Result
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("reference.json: %v", err)
	}
	return ref
}

// TestFormat1FixtureReference: populate and finish with the working tree's generator on a fresh
// namespace: every instance of the manifest ends, with the outputs and histories the fixture's
// orchestrations make (the reference a migrated namespace's run is compared with), and the
// namespace passes fsck.
func TestFormat1FixtureReference(t *testing.T) {
	t.Parallel()
	gen := currentGen(t)
	addr, ns, client := genNamespace(t)
	m := genPopulate(t, gen, addr, ns, 0)
	if len(m.Instances) < 15 {
		t.Fatalf("manifest lists %d instances, want every kind of state: %s", len(m.Instances), m.Raw)
	}
	res := genFinish(t, gen, addr, ns, m)
	for _, id := range m.Instances {
		r, ok := res[id]
		if !ok {
			t.Errorf("%s: no result", id)
			continue
		}
		want := "Completed"
		if id == "fail-1" {
			want = "Failed"
		}
		if r.State != want {
			t.Errorf("%s: %s (%s), want %s", id, r.State, r.Error, want)
		}
	}
	if d := diffResults(format1Reference(t), res); d != "" {
		t.Errorf("finish's results differ from the reference:\n%s", d)
	}
	p, err := openAgain(context.Background(), clusterOf(client), redisprovider.Options{Addr: addr, Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	checkFsck(t, p)
}

// clusterOf is client when it is a cluster client (openAgain opens from the address otherwise).
func clusterOf(client redis.UniversalClient) redis.UniversalClient {
	if c, ok := client.(*redis.ClusterClient); ok {
		return c
	}
	return nil
}

// diffResults lists the instances whose result differs, each with both versions.
func diffResults(want, got map[string]Format1Result) string {
	ids := map[string]bool{}
	for id := range want {
		ids[id] = true
	}
	for id := range got {
		ids[id] = true
	}
	var sorted []string
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, id := range sorted {
		w, _ := json.Marshal(want[id])
		g, _ := json.Marshal(got[id])
		if !bytes.Equal(w, g) {
			fmt.Fprintf(&b, "%s:\n  want %s\n  got  %s\n", id, w, g)
		}
	}
	return b.String()
}

// format2Gaps are the format-1 calls that a format-2 namespace does not refuse yet, with what they
// changed when this was written: findings for the format-2 work. The test logs them instead of
// failing, and fails once one of them is refused (then delete its entry).
var format2Gaps = map[string]string{
	// Measured on v2-orch fa33d0e and 3893e2d (format 2, steps 1-2) on Redis 7.0.15. P = {ns:0}:
	"RenewSessionLock":        "ok: extends its owners' sessions (here none was live: nothing written)",
	"CleanupOrphanedSessions": "ok: removed P wq:sess:s1, wq:sidle, wq:sowned, wq:owner:<populate's node>",
	"AppendWithExecution":     "ok: appended to P h:1:done-1, added P he:1:done-1 and an att: key, changed P i:done-1 (hb hd hn)",
	"PruneExecutions":         "ok: removed P h:1, h:2, x:1, x:2 of can-done, trimmed P xs:can-done",
	"PruneExecutionsBulk":     "ok: the same for can-1 (a running instance)",
	"DeleteInstance(force)": "WRONGTYPE after writing: admin_delete.lua's delete_all runs wq_delete_instance and oq_unindex " +
		"before its first format-1 key (ZREM oq:orphans): removed timer-1 from P oq:due",
	"DeleteInstance(force, queued activity)": "WRONGTYPE after writing: as DeleteInstance(force), and the instance's queued worker item goes too",
}

// format1Refusal matches the errors a format-1 write must meet on a format-2 namespace: a
// format-2 key of the wrong type, or a lock token the namespace does not know.
var format1Refusal = regexp.MustCompile(`WRONGTYPE|Invalid lock token|DX_FORMAT`)

// TestFormat1CodeRefusedByFormat2Namespace: a namespace written by the working tree, handed to the
// format-1 code: each of its provider writes fails (WRONGTYPE, or an unknown lock token) and
// leaves every key of the namespace as it was (value and expiry), one call at a time.
func TestFormat1CodeRefusedByFormat2Namespace(t *testing.T) {
	t.Parallel()
	old, cur := format1Gen(t), currentGen(t)
	addr, ns, client := genNamespace(t)
	genPopulate(t, cur, addr, ns, time.Hour)
	ctx := context.Background()
	before := snapshot(t, ctx, client, ns)
	var names []string
	for _, c := range genCalls(t, old, addr, ns, "-list") {
		names = append(names, c.Name)
	}
	if len(names) < 25 {
		t.Fatalf("calls lists %d calls: %v", len(names), names)
	}
	for _, name := range names {
		calls := genCalls(t, old, addr, ns, name)
		after := snapshot(t, ctx, client, ns)
		changed := diffSnapshots(before, after)
		before = after
		res := calls[0].Result
		refused := format1Refusal.MatchString(res)
		gap, known := format2Gaps[name]
		switch {
		case refused && changed == "":
			if known {
				t.Errorf("%s is refused now (%s): delete its format2Gaps entry (%s)", name, res, gap)
			}
		case known:
			t.Logf("known gap: format-1 %s on a format-2 namespace: %s; changed: %s", name, res, orNothing(changed))
		default:
			t.Errorf("format-1 %s on a format-2 namespace: %s; changed: %s", name, res, orNothing(changed))
		}
	}
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// snapshot reads every key of the namespace: its type, value and expiry (DUMP is not portable
// to miniredis).
func snapshot(t *testing.T, ctx context.Context, client redis.UniversalClient, ns string) map[string]keyState {
	t.Helper()
	keys := map[string]bool{}
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "{"+ns+":*", 1000).Iterator()
		for iter.Next(ctx) {
			keys[iter.Val()] = true
		}
		return iter.Err()
	}
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, client.(*redis.Client))
	}
	if err != nil {
		t.Fatalf("scan %s: %v", ns, err)
	}
	out := map[string]keyState{}
	for k := range keys {
		var s keyState
		s.Type = client.Type(ctx, k).Val()
		if s.Type == "none" {
			continue // expired since the scan
		}
		var v any
		switch s.Type {
		case "string":
			v = client.Get(ctx, k).Val()
		case "hash":
			v = client.HGetAll(ctx, k).Val()
		case "set":
			m := client.SMembers(ctx, k).Val()
			sort.Strings(m)
			v = m
		case "zset":
			v = client.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = client.LRange(ctx, k, 0, -1).Val()
		}
		b, _ := json.Marshal(v)
		s.Value = string(b)
		// PEXPIRETIME (Redis 7) is exact. miniredis's TTLs stand still (they move only with
		// FastForward; its PEXPIRETIME adds them to the wall clock): there the remaining time is.
		// Read last: -2 (the key is gone) means it expired while it was read, as "none" above.
		if backend() != "miniredis" {
			at, _ := client.Do(ctx, "PEXPIRETIME", k).Int64()
			if at == -2 {
				continue
			}
			s.Expiry = max(at, 0)
		} else if ttl := client.PTTL(ctx, k).Val(); ttl == -2 {
			continue
		} else if ttl > 0 {
			s.Expiry = ttl.Milliseconds()
		}
		out[k] = s
	}
	return out
}

type keyState struct {
	Type, Value string
	// Expiry is when the key expires (ms since the epoch; on miniredis, the time it has left), 0
	// without expiry.
	Expiry int64
}

// diffSnapshots says which keys were added, removed (but for keys that expired) or changed (value
// or expiry).
func diffSnapshots(before, after map[string]keyState) string {
	var d []string
	for k, a := range after {
		b, ok := before[k]
		switch {
		case !ok:
			d = append(d, "added "+k)
		case a.Type != b.Type || a.Value != b.Value:
			d = append(d, fmt.Sprintf("changed %s (%s %.200s -> %s %.200s)", k, b.Type, b.Value, a.Type, a.Value))
		case a.Expiry != b.Expiry:
			d = append(d, fmt.Sprintf("expiry of %s %d -> %d", k, b.Expiry, a.Expiry))
		}
	}
	for k, b := range before {
		// A key whose expiry came (the wake-up lists live seconds) is not a change.
		if _, ok := after[k]; !ok && (b.Expiry == 0 || b.Expiry > time.Now().Add(time.Second).UnixMilli()) {
			d = append(d, "removed "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}

// TestFormat1FixtureOnFormat1Code: the fixture as dxctl migrate's test uses it. Populated by the
// format-1 code, the namespace is in format 1 and this release refuses it (*FormatError naming
// dxctl migrate); finished by the format-1 code, its results are the reference, so the reference
// holds the histories the instances would have had without a migration.
func TestFormat1FixtureOnFormat1Code(t *testing.T) {
	t.Parallel()
	old := format1Gen(t)
	addr, ns, client := genNamespace(t)
	m := genPopulate(t, old, addr, ns, 0)
	ctx := context.Background()
	p, err := redisprovider.NewFromClient(ctx, client, redisprovider.Options{Namespace: ns, Logger: quietLogger})
	var fe *redisprovider.FormatError
	if !errors.As(err, &fe) || fe.Found != 1 || !strings.Contains(err.Error(), "dxctl migrate") {
		if p != nil {
			_ = p.Close()
		}
		t.Fatalf("New on the format-1 namespace: %v, want a *FormatError (format 1) naming dxctl migrate", err)
	}
	keys, err := dxredis.NewKeyspace(ns)
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := redisprovider.NamespaceFormat(ctx, client, keys, 0); err != nil || f != 1 {
		t.Fatalf("NamespaceFormat: %d %v, want 1", f, err)
	}
	if d := diffResults(format1Reference(t), genFinish(t, old, addr, ns, m)); d != "" {
		t.Errorf("the format-1 code's results differ from the reference:\n%s", d)
	}
}
