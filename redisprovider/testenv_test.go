package redisprovider_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Where tests run: DXREDIS_TEST_CLUSTER (comma-separated cluster nodes), else DXREDIS_TEST_ADDR
// (one server), else a fresh embedded miniredis per provider.
func backend() string {
	switch {
	case os.Getenv("DXREDIS_TEST_CLUSTER") != "":
		return "cluster"
	case os.Getenv("DXREDIS_TEST_ADDR") != "":
		return "redis"
	}
	return "miniredis"
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// onePartitionOnly skips a test that reads or writes keys of a namespace of one partition by
// name (white-box checks of the layout) when the tests run with several (DXREDIS_TEST_PARTITIONS);
// docs/testing.md lists them.
func onePartitionOnly(t testing.TB, why string) {
	t.Helper()
	if testPartitions() > 1 {
		t.Skip("one partition only: " + why)
	}
}

// testPartitions is the partition count of the tests' namespaces: DXREDIS_TEST_PARTITIONS (make
// test-partitions sets 12), else 0 (a new namespace gets one).
func testPartitions() int {
	n, _ := strconv.Atoi(os.Getenv("DXREDIS_TEST_PARTITIONS"))
	return n
}

// newTestProvider returns a provider on a fresh namespace of the test backend; its keys are
// removed when the test ends.
func newTestProvider(t testing.TB) *redisprovider.Provider {
	t.Helper()
	p, _ := newTestProviderWith(t, redisprovider.Options{})
	return p
}

// newTestProviderWith is newTestProvider with further options (Namespace, Addr and Logger are
// set here), and the embedded miniredis (nil on a server).
func newTestProviderWith(t testing.TB, opts redisprovider.Options) (*redisprovider.Provider, *miniredis.Miniredis) {
	t.Helper()
	ctx := context.Background()
	opts.Namespace = "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	opts.Logger = quietLogger
	if opts.Partitions == 0 {
		opts.Partitions = testPartitions()
	}
	var (
		client redis.UniversalClient
		mr     *miniredis.Miniredis
	)
	switch backend() {
	case "cluster":
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("DXREDIS_TEST_CLUSTER"), ",")})
	case "redis":
		opts.Addr = os.Getenv("DXREDIS_TEST_ADDR")
	default:
		mr = miniredis.RunT(t)
		opts.Addr = mr.Addr()
	}
	p, err := openAgain(ctx, client, opts)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	t.Cleanup(func() {
		// The check runs on a provider of its own: the test may have closed p.
		if _, skip := fsckSkipped.Load(t); skip || t.Failed() {
			// Deliberate damage (which may make the namespace unopenable), or a failure said already.
		} else if checker, err := openAgain(ctx, client, adopt(opts)); err != nil {
			t.Errorf("fsck: open the namespace again: %v", err)
		} else {
			checkFsck(t, checker)
			_ = checker.Close()
		}
		if backend() != "miniredis" {
			dropNamespace(t, p)
		}
		_ = p.Close()
		if client != nil {
			_ = client.Close()
		}
	})
	return p, mr
}

// adopt is opts with the partition count left to the namespace (a test may have moved it).
func adopt(opts redisprovider.Options) redisprovider.Options {
	opts.Partitions = 0
	return opts
}

// openAgain opens a provider on client (a cluster's) or, when it is nil, on opts.Addr.
func openAgain(ctx context.Context, client redis.UniversalClient, opts redisprovider.Options) (*redisprovider.Provider, error) {
	if client != nil {
		return redisprovider.NewFromClient(ctx, client, opts)
	}
	return redisprovider.New(ctx, opts)
}

// fsckSkipped holds the tests that damage their keyspace on purpose (skipFsck).
var fsckSkipped sync.Map

// skipFsck exempts t's providers from the keyspace check at the end of the test: for tests that
// damage the keyspace on purpose.
func skipFsck(t testing.TB) { fsckSkipped.Store(t, true) }

// checkFsck fails t when the provider's namespace breaks an invariant (Provider.Fsck): every test
// that runs on newTestProvider ends with a clean keyspace, whatever faults it injected.
func checkFsck(t testing.TB, p *redisprovider.Provider) {
	t.Helper()
	if _, skip := fsckSkipped.Load(t); skip || t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := p.Fsck(ctx)
	if err != nil {
		t.Errorf("fsck: %v", err)
		return
	}
	for _, v := range rep.Violations {
		t.Errorf("fsck: %s %q: %s", v.Code, v.Subject, v.Detail)
	}
}

// dropNamespace deletes every key of the provider's namespace.
func dropNamespace(t testing.TB, p *redisprovider.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = redisprovider.DropNamespace(ctx, p.Client(), p.Keyspace().Namespace())
}

// redisFactory runs the conformance suite on the test backend. Its categories run in parallel
// beside the rest of the package, on shared 2-core machines: a 2 s lock (the suite acts within
// fractions of it) and a 500 ms short-poll threshold (duroxide's PostgreSQL harness uses 500 ms
// too) keep the timing checks from failing on a busy machine; long polls are seconds.
type redisFactory struct{}

func (redisFactory) CreateProvider(t *testing.T) provider.Provider { return newTestProvider(t) }
func (redisFactory) LockTimeout() time.Duration                    { return 2 * time.Second }
func (redisFactory) ShortPollThreshold() time.Duration             { return 500 * time.Millisecond }

// CorruptInstanceHistory overwrites every stored event of every execution with invalid JSON.
func (redisFactory) CorruptInstanceHistory(t *testing.T, pr provider.Provider, instance string) {
	p := pr.(*redisprovider.Provider)
	ctx := context.Background()
	ks := p.Keyspace()
	execs, err := p.Client().ZRange(ctx, ks.Executions(instance), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := p.Client().HGet(ctx, ks.Instance(instance), "exec").Result(); err == nil {
		execs = append(execs, cur) // an instance with one execution has no execution set
	}
	for _, e := range execs {
		var exec uint64
		for _, c := range e {
			exec = exec*10 + uint64(c-'0')
		}
		if err := p.Client().Set(ctx, ks.History(instance, exec), "NOT_VALID_JSON{{{\n", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// MaxAttemptCount reads the attempt fields of the instance's queued orchestrator messages; a
// message under a lock counts the lock's delivery too (the fetch writes no count, an ack deletes
// the message, an abandon or expiry writes the count).
func (redisFactory) MaxAttemptCount(t *testing.T, pr provider.Provider, instance string) uint32 {
	p := pr.(*redisprovider.Provider)
	ctx := context.Background()
	m, err := p.Client().HGetAll(ctx, p.Keyspace().Messages(instance)).Result()
	if err != nil {
		t.Fatal(err)
	}
	locked := map[string]bool{}
	for _, s := range strings.Fields(p.Client().HGet(ctx, p.Keyspace().Lock(instance), "seqs").Val()) {
		locked[s] = true
	}
	var best uint32
	for k := range m {
		if !strings.HasPrefix(k, "m") {
			continue
		}
		n, _ := strconv.ParseUint(m["a"+k[1:]], 10, 32)
		if locked[k[1:]] {
			n++
		}
		best = max(best, uint32(n))
	}
	return best
}

// waitOrchWaiters waits until n capability filters of orchestration fetchers are registered as
// waiting (wake:filters): an empty fetch registers its filter before it blocks, and a wake-up
// pushed after that reaches it. Fetchers with the same filter share one entry.
func waitOrchWaiters(t *testing.T, p *redisprovider.Provider, n int64) {
	t.Helper()
	key := p.Keyspace().WakeFilters(0)
	waitFor(t, 20*time.Second, "a waiting orchestration fetcher", func() bool {
		live := "(" + strconv.FormatInt(time.Now().UnixMilli(), 10) // (expired entries linger until a new filter registers)
		return p.Client().ZCount(context.Background(), key, live, "+inf").Val() >= n
	})
}
