package redisprovider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

// Version is this provider's version, reported by Provider.Version.
const Version = "0.1.0"

// Provider implements provider.Provider and provider.Admin on Redis.
type Provider struct {
	rdb      redis.UniversalClient
	block    redis.UniversalClient
	ownRDB   bool
	ownBlock bool
	slice    time.Duration // max single BLPOP; 0 = unlimited
	fcall    bool          // scripts run as Redis Functions (FCALL), else as EVALSHA
	flagged  bool          // EVALSHA scripts carry their flags in a "#!lua flags=" shebang (Redis 7+)
	history  *historyCache
	idle     idleState
	keys     dxredis.Keyspace
	opts     Options
	closed   chan struct{}
	once     sync.Once
}

var _ provider.Provider = (*Provider)(nil)

// New connects to Redis, checks that it is usable (reachable, scripts load, maxmemory-policy does
// not evict) and returns a provider for opts.Namespace.
func New(ctx context.Context, opts Options) (*Provider, error) {
	opts = opts.withDefaults()
	keys, err := dxredis.NewKeyspace(opts.Namespace)
	if err != nil {
		return nil, provider.NewPermanentError("new", err.Error()).WithKind(provider.ErrInvalidInput)
	}
	p := &Provider{keys: keys, opts: opts, closed: make(chan struct{}), history: newHistoryCache(opts.HistoryCacheBytes)}
	p.rdb, p.ownRDB = opts.Client, opts.Client == nil
	if p.ownRDB {
		// MaxRetries -1: go-redis would re-send a script whose reply was lost (EOF, timeout) and so
		// run it twice; the provider retries writes itself, with their attempt id (see runOnce).
		p.rdb = redis.NewClient(&redis.Options{Addr: opts.Addr, Password: opts.Password, DB: opts.DB, MaxRetries: -1})
	}
	switch {
	case opts.BlockingClient != nil:
		p.block = opts.BlockingClient
	case opts.Client != nil:
		p.block, p.slice = opts.Client, opts.BlockingSlice
	default:
		// No read deadline on the blocking pool: each wait carries its own context deadline.
		p.block, p.ownBlock = redis.NewClient(&redis.Options{Addr: opts.Addr, Password: opts.Password, DB: opts.DB,
			ReadTimeout: -1, ContextTimeoutEnabled: true, PoolSize: 64}), true
	}
	if err := p.start(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// NewFromClient is New with opts.Client = client.
func NewFromClient(ctx context.Context, client redis.UniversalClient, opts Options) (*Provider, error) {
	opts.Client = client
	return New(ctx, opts)
}

func (p *Provider) start(ctx context.Context) error {
	const op = "new"
	if err := p.rdb.Ping(ctx).Err(); err != nil {
		return provider.NewRetryableError(op, "redis unreachable: "+err.Error()).WithCause(err)
	}
	if err := p.checkEvictionPolicy(ctx); err != nil {
		return err
	}
	if !p.opts.DisableFunctions {
		err := p.loadFunctions(ctx)
		if err == nil {
			p.fcall = true
			return nil
		}
		p.opts.Logger.Info("dxredis: Redis Functions unavailable, using EVALSHA", "err", err)
	}
	// Script flags (read-only scripts, deletes allowed when out of memory) need a shebang, which
	// servers before Redis 7 (and miniredis) do not parse.
	p.flagged = p.rdb.ScriptLoad(ctx, "#!lua flags=no-writes\nreturn 1").Err() == nil
	for _, name := range dxredis.ScriptNames() {
		if err := p.script(name).Load(ctx, p.rdb).Err(); err != nil {
			return p.mapErr(op, fmt.Errorf("loading script %s: %w", name, err))
		}
	}
	return nil
}

// loadFunctions loads the scripts as a Redis Functions library on every primary.
func (p *Provider) loadFunctions(ctx context.Context) error {
	lib := dxredis.FunctionLibrary()
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.FunctionLoadReplace(ctx, lib).Err()
		})
	}
	return p.rdb.FunctionLoadReplace(ctx, lib).Err()
}

// checkEvictionPolicy refuses servers that may evict keys: eviction silently loses state.
func (p *Provider) checkEvictionPolicy(ctx context.Context) error {
	res, err := p.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		// Managed services may forbid CONFIG; say so instead of guessing.
		p.opts.Logger.Warn("dxredis: cannot read maxmemory-policy; make sure it is noeviction", "err", err)
		return nil
	}
	policy := res["maxmemory-policy"]
	if policy == "" || policy == "noeviction" || p.opts.AllowEvictingMaxmemoryPolicy {
		return nil
	}
	return provider.NewPermanentError("new", fmt.Sprintf(
		"redis maxmemory-policy is %q, which can evict orchestration state; set maxmemory-policy noeviction "+
			"(or Options.AllowEvictingMaxmemoryPolicy to accept the risk)", policy)).WithKind(provider.ErrInvalidInput)
}

// Close wakes every waiting fetch and releases the connections New opened.
func (p *Provider) Close() error {
	var errs []error
	p.once.Do(func() {
		close(p.closed)
		if p.ownBlock {
			errs = append(errs, p.block.Close())
		}
		if p.ownRDB {
			errs = append(errs, p.rdb.Close())
		}
	})
	return errors.Join(errs...)
}

// Name returns "redis".
func (p *Provider) Name() string { return "redis" }

// Version returns the provider version.
func (p *Provider) Version() string { return Version }

// Admin returns the management capability (always available).
func (p *Provider) Admin() (provider.Admin, bool) { return p, true }

// Keyspace returns the provider's keyspace (for tools and tests).
func (p *Provider) Keyspace() dxredis.Keyspace { return p.keys }

// Client returns the client scripts run on (for tools and tests).
func (p *Provider) Client() redis.UniversalClient { return p.rdb }

// run executes a script on the partition and maps its error (see mapErr). KEYS[1] is the
// partition's seq key (cluster routing), ARGV[1] the partition prefix, then args. Reads and
// fetches use it; writes that must not apply twice use runOnce.
func (p *Provider) run(ctx context.Context, op, script string, partition int, args ...any) (any, error) {
	res, err := p.call(ctx, op, script, partition, "", args)
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	return res, nil
}

// Ambiguous failures. A call that failed before its command reached Redis (dial failure, pool
// timeout, closed client), or that Redis answered with an error (the script did not run, or
// failed before its first write), changed nothing: its error is reported as it is, retryable when
// transient. A call that failed after it was sent (read timeout, connection lost) may have run:
// its outcome is unknown. Writes that must not apply twice (enqueues, acks, abandons, appends) run
// through runOnce: each call gets an attempt id, its script stores its reply under that id for
// 20 s (dx_once in scripts/lib.lua), and runOnce retries a call whose outcome is unknown with the
// same id for up to attemptWindow, so a retry of a call that ran returns the first run's reply
// (an ack that committed reports success, an enqueue is stored once). When the retries end
// without an answer, the error is retryable with Kind provider.ErrOutcomeUnknown: the caller's
// own retry is a new call and may apply it a second time (or, for an ack, report
// ErrInvalidLockToken although the first attempt committed).
const (
	attemptRetries = 4
	// attemptWindow bounds how long after its first send a call is retried; it stays well under
	// the 20 s the scripts keep an attempt's reply (ATTEMPT_TTL_MS in lib.lua).
	attemptWindow = 8 * time.Second
)

// runOnce is run for a write that must not apply twice: see "Ambiguous failures" above.
// Cost: one GET and, on success, one SET (with expiry) inside the script; no extra round trip.
func (p *Provider) runOnce(ctx context.Context, op, script string, partition int, args ...any) (any, error) {
	attempt := p.keys.Attempt(partition, newAttemptID())
	start := time.Now()
	unknown := false
	for try := 1; ; try++ {
		res, err := p.call(ctx, op, script, partition, attempt, args)
		if err == nil {
			return res, nil
		}
		perr := p.mapErr(op, err)
		if mayHaveRun(err) {
			unknown = true
		}
		if !unknown {
			return nil, perr // nothing ran: retryable or not, the caller decides
		}
		pe, _ := provider.AsProviderError(perr)
		if pe.Kind != nil {
			return nil, perr // a definite answer from the script (e.g. DX_INVALID_TOKEN)
		}
		if !pe.Retryable || try > attemptRetries || time.Since(start) > attemptWindow || ctx.Err() != nil {
			return nil, provider.NewRetryableError(op, "outcome unknown (the call may have been applied): "+pe.Message).
				WithKind(provider.ErrOutcomeUnknown).WithCause(err)
		}
		p.sleep(ctx, time.Duration(try*try)*20*time.Millisecond)
	}
}

// newAttemptID returns a random id for one write call (22 characters).
func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// mayHaveRun reports whether a failed call may have been executed by Redis: false when Redis
// answered (an error reply) or the command was never sent.
func mayHaveRun(err error) bool {
	var rerr redis.Error
	var nerr *net.OpError
	switch {
	case errors.As(err, &rerr):
		return false
	case errors.As(err, &nerr) && nerr.Op == "dial":
		return false
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		return false
	}
	return true
}

// call executes a script once, with attempt ("" none) as KEYS[2], and returns the raw error. A
// restarted or flushed server recovers by itself: FCALL reloads the library when the function is
// missing; go-redis's Script.Run falls back to EVAL on NOSCRIPT.
func (p *Provider) call(ctx context.Context, op, script string, partition int, attempt string, args []any) (any, error) {
	if p.isClosed() { // also when the client is the caller's and stays open
		return nil, provider.NewPermanentError(op, "provider closed").WithCause(redis.ErrClosed)
	}
	argv := make([]any, 0, len(args)+1)
	argv = append(argv, p.keys.Prefix(partition))
	argv = append(argv, args...)
	keys := []string{p.keys.Seq(partition)}
	if attempt != "" {
		keys = append(keys, attempt)
	}
	var res any
	var err error
	if obs := p.opts.Observer; obs != nil {
		start := time.Now()
		defer func() { obs.ObserveCall(ctx, op, time.Since(start), err) }()
	}
	// Read-only scripts go as FCALL_RO / EVALSHA_RO: Redis then runs them on replicas and when
	// it is out of memory.
	ro := dxredis.ReadOnly(script)
	switch {
	case p.fcall:
		fcall := p.rdb.FCall
		if ro {
			fcall = p.rdb.FCallRO
		}
		res, err = fcall(ctx, dxredis.FunctionName(script), keys, argv...).Result()
		if err != nil && strings.Contains(err.Error(), "Function not found") {
			if err = p.loadFunctions(ctx); err == nil {
				res, err = fcall(ctx, dxredis.FunctionName(script), keys, argv...).Result()
			}
		}
	case p.flagged && ro:
		res, err = p.script(script).RunRO(ctx, p.rdb, keys, argv...).Result()
	default:
		res, err = p.script(script).Run(ctx, p.rdb, keys, argv...).Result()
	}
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return res, err
}

// script returns the EVAL form of an operation: with its flags where the server parses them.
func (p *Provider) script(name string) *redis.Script {
	if p.flagged {
		return dxredis.FlaggedScript(name)
	}
	return dxredis.Script(name)
}

// Script error replies are "DX_<CODE> message"; the code decides the sentinel. Scripts fail
// before their first write, so every DX_ error leaves the store unchanged.
var scriptErrKinds = map[string]error{
	"DX_INVALID_TOKEN": provider.ErrInvalidLockToken,
	"DX_DUPLICATE":     provider.ErrDuplicateEvent,
	"DX_NOT_FOUND":     provider.ErrNotFound,
	"DX_RUNNING":       provider.ErrInstanceRunning,
	"DX_INVALID":       provider.ErrInvalidInput,
}

// mapErr turns a Redis or script error into a *provider.ProviderError: DX_ script errors are
// permanent; connection errors, timeouts, LOADING, BUSY, TRYAGAIN, CLUSTERDOWN and OOM (Redis
// over maxmemory refuses a script that may write before it runs) are retryable; other server
// errors (e.g. a Lua runtime error) are permanent.
func (p *Provider) mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pe, ok := provider.AsProviderError(err); ok {
		return pe
	}
	msg := err.Error()
	code, rest, _ := strings.Cut(msg, " ")
	if kind, ok := scriptErrKinds[code]; ok {
		return provider.NewPermanentError(op, rest).WithKind(kind)
	}
	if errors.Is(err, context.Canceled) {
		return provider.NewPermanentError(op, "cancelled: "+msg).WithCause(err)
	}
	if errors.Is(err, redis.ErrClosed) {
		return provider.NewPermanentError(op, "provider closed: "+msg).WithCause(err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		for _, transient := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM"} {
			if strings.HasPrefix(msg, transient) {
				return provider.NewRetryableError(op, msg).WithCause(err)
			}
		}
		return provider.NewPermanentError(op, msg).WithCause(err)
	}
	return provider.NewRetryableError(op, msg).WithCause(err)
}
