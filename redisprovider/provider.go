package redisprovider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

// Version is this provider's version, reported by Provider.Version.
const Version = dxredis.Release

// Provider implements provider.Provider and provider.Admin on Redis.
type Provider struct {
	rdb      redis.UniversalClient
	block    redis.UniversalClient
	ownRDB   bool
	ownBlock bool
	slice    time.Duration // max single BLPOP; 0 = unlimited
	fcall    atomic.Bool   // scripts run as Redis Functions (FCALL), else as EVALSHA
	flagged  bool          // EVALSHA scripts carry their flags in a "#!lua flags=" shebang (Redis 7+)
	history  *historyCache
	idle     idleState
	keys     dxredis.Keyspace
	opts     Options
	closed   chan struct{}
	nudgeMu  sync.Mutex
	nudge    chan struct{} // closed by Nudge: waiting fetches look again
	once     sync.Once
	hub      statusHub // WatchStatus's subscriber
	parts    partHub   // fetches across partitions (namespaces of several, hub.go)
	caps     capsCache // the tags with caps (caps.go)
	closeCtx context.Context
	cancel   context.CancelFunc // ends closeCtx (Close)
}

var _ provider.Provider = (*Provider)(nil)

// New connects to Redis, checks that it is usable (reachable, scripts load, maxmemory-policy does
// not evict) and returns a provider for opts.Namespace.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if ctx == nil {
		return nil, errNilContext("new")
	}
	opts = opts.withDefaults()
	keys, err := dxredis.NewKeyspace(opts.Namespace)
	if err != nil {
		return nil, provider.NewPermanentError("new", err.Error()).WithKind(provider.ErrInvalidInput)
	}
	p := &Provider{keys: keys, opts: opts, closed: make(chan struct{}), nudge: make(chan struct{}), history: newHistoryCache(opts.HistoryCacheBytes)}
	p.parts.p = p
	p.closeCtx, p.cancel = context.WithCancel(context.Background())
	routeGoRedisLog(p) // until Close
	p.rdb, p.ownRDB = opts.Client, opts.Client == nil
	if p.ownRDB {
		// MaxRetries -1 (in clientOptions): go-redis would re-send a script whose reply was lost
		// (EOF, timeout) and so run it twice; the provider retries writes itself, with their
		// attempt id (see runOnce).
		p.rdb = redis.NewClient(opts.clientOptions())
	}
	switch {
	case opts.BlockingClient != nil:
		p.block = opts.BlockingClient
	case opts.Client != nil:
		p.block, p.slice = opts.Client, opts.BlockingSlice
	default:
		// No read deadline on the blocking pool: each wait carries its own context deadline.
		bo := opts.clientOptions()
		bo.ReadTimeout, bo.ContextTimeoutEnabled, bo.PoolSize = -1, true, 64
		p.block, p.ownBlock = redis.NewClient(bo), true
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
	if err := p.setupPartitions(ctx); err != nil && !p.opts.anyFormat {
		return err
	}
	p.blockingForPartitions()
	if err := p.checkFormat(ctx); err != nil && !p.opts.anyFormat {
		return err
	}
	if !p.opts.DisableFunctions {
		err := p.loadFunctions(ctx)
		switch {
		case err == nil:
			p.fcall.Store(true)
			return nil
		case provider.IsRetryable(p.mapErr(op, err)):
			// E.g. one cluster node down: keep Functions; each node gets the library on its first
			// call (run reloads it on "Function not found"), instead of EVALSHA for good.
			p.opts.Logger.Warn("dxredis: could not load the Functions library everywhere; nodes will load it on first use", "err", err)
			p.fcall.Store(true)
			return nil
		}
		p.opts.Logger.Info("dxredis: Redis Functions unavailable, using EVALSHA", "err", err)
	}
	// Script flags (read-only scripts, deletes allowed when out of memory) need a shebang, which
	// servers before Redis 7 (and miniredis) do not parse.
	p.flagged = p.rdb.Eval(ctx, "#!lua flags=no-writes\nreturn 1", nil).Err() == nil
	// Send only the scripts the server does not hold yet (a provider per dxctl call must not
	// re-send every script each time).
	names := luascripts.ScriptNames()
	hashes := make([]string, len(names))
	for i, name := range names {
		hashes[i] = p.script(name).Hash()
	}
	exists, err := p.rdb.ScriptExists(ctx, hashes...).Result()
	if err != nil || len(exists) != len(names) {
		exists = make([]bool, len(names)) // cannot tell: load them all
	}
	for i, name := range names {
		if exists[i] {
			continue
		}
		if err := p.script(name).Load(ctx, p.rdb).Err(); err != nil {
			return p.mapErr(op, fmt.Errorf("loading script %s: %w", name, err))
		}
	}
	return nil
}

// blockingForPartitions gives the waits of a namespace of several partitions a pool of their own
// when the caller gave Client and no BlockingClient: while fetches wait, the partition watchers
// hold one connection per partition (hub.go), which would otherwise come out of the caller's pool,
// sliced as BlockingSlice. The pool copies the caller's options, without a read deadline (each
// wait carries its own), and Close closes it.
func (p *Provider) blockingForPartitions() {
	if p.keys.Partitions() == 1 || p.ownBlock || p.opts.BlockingClient != nil || p.opts.Client == nil {
		return
	}
	switch c := p.opts.Client.(type) {
	case *redis.ClusterClient:
		o := *c.Options()
		o.ReadTimeout, o.ContextTimeoutEnabled, o.MaxRetries = -1, true, -1
		o.PoolSize = max(o.PoolSize, p.keys.Partitions()+8)
		p.block, p.slice, p.ownBlock = redis.NewClusterClient(&o), 0, true
	case *redis.Client:
		o := *c.Options()
		o.ReadTimeout, o.ContextTimeoutEnabled, o.MaxRetries = -1, true, -1
		o.PoolSize = max(o.PoolSize, p.keys.Partitions()+8)
		p.block, p.slice, p.ownBlock = redis.NewClient(&o), 0, true
	}
}

// loadFunctions loads the scripts as a Redis Functions library on every primary that does not
// hold this version of the library yet (its name carries a hash of the sources).
func (p *Provider) loadFunctions(ctx context.Context) error {
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return p.loadLibrary(ctx, c)
		})
	}
	return p.loadLibrary(ctx, p.rdb)
}

// loadLibrary loads the Functions library on one server (c is a node of a cluster) unless the
// server holds it already (a provider per dxctl call must not re-send ~20 KB of Lua each time), and
// deletes the libraries of older dxredis releases there. That is safe while processes of an older
// release still run: their next call finds its function missing and loads their library again
// (see run), which deletes nothing newer.
func (p *Provider) loadLibrary(ctx context.Context, c redis.Cmdable) error {
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "dxredis_*"}).Result()
	if err != nil {
		return err // no Functions here, or the server is unreachable: New decides
	}
	if !slices.ContainsFunc(libs, func(l redis.Library) bool { return l.Name == luascripts.LibraryName() }) {
		// REPLACE: another process may load the same library between the list and the load.
		if err := c.FunctionLoadReplace(ctx, luascripts.FunctionLibrary()).Err(); err != nil {
			return err
		}
	}
	for _, l := range libs {
		if luascripts.OlderLibrary(l.Name) {
			if err := c.FunctionDelete(ctx, l.Name).Err(); err == nil {
				p.opts.Logger.Info("dxredis: deleted the Functions library of an older release", "library", l.Name)
			}
		}
	}
	return nil
}

// reloadFunctions loads the library on the node that serves key, after it answered "Function not
// found" (restart, FUNCTION FLUSH, or a node that was down when New loaded it).
func (p *Provider) reloadFunctions(ctx context.Context, key string) error {
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return p.loadLibrary(ctx, node)
	}
	return p.loadLibrary(ctx, p.rdb)
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
		p.cancel()
		unrouteGoRedisLog(p)
		if err := p.hub.close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
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

// errNilContext refuses a nil context (go-redis would panic on it).
func errNilContext(op string) error {
	return provider.NewPermanentError(op, "nil context.Context: pass context.Background() or a request's context").
		WithKind(provider.ErrInvalidInput)
}

// run executes a script on the partition and maps its error (see mapErr). KEYS[1] is the
// partition's seq key (cluster routing), ARGV[1] the partition prefix, then args. Reads and
// fetches use it; writes that must not apply twice use runOnce. With Options.WaitReplicas, a
// write script is followed by WAIT on the same connection.
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
// 20 s (an ack: 20 s beyond the end of its lock; dx_once in scripts/lib.lua), and runOnce retries a call whose outcome is unknown with the
// same id for up to attemptWindow, so a retry of a call that ran returns the first run's reply
// (an ack that committed reports success, an enqueue is stored once). When the retries end
// without an answer, the error is retryable with Kind provider.ErrOutcomeUnknown: the caller's
// own retry is a new call and may apply it a second time (or, for an ack, report
// ErrInvalidLockToken although the first attempt committed), unless the caller gives the
// attempt id itself (provider.WithAttemptID) and retries with the same one.
const (
	attemptRetries = 4
	// attemptWindow bounds how long after its first send a call is retried; it stays well under
	// the 20 s the scripts keep an attempt's reply (ATTEMPT_TTL_MS in lib.lua).
	attemptWindow = 8 * time.Second
	// maxAttemptID bounds a caller's attempt id (provider.WithAttemptID).
	maxAttemptID = 128
)

// runOnce is run for a write that must not apply twice: see "Ambiguous failures" above.
// Cost: on success one SET (with expiry) inside the script, and one GET on a retry or for a caller's
// id not marked as its first send; no extra round trip.
func (p *Provider) runOnce(ctx context.Context, op, script string, partition int, args ...any) (any, error) {
	id, given, first := "", false, false
	if ctx != nil {
		id, first = provider.AttemptID(ctx)
		given = id != ""
	}
	if len(id) > maxAttemptID {
		return nil, invalid(op, "attempt id (provider.WithAttemptID) is %d bytes, at most %d", len(id), maxAttemptID)
	}
	if !given {
		id = newAttemptID()
	}
	attempt := p.keys.Attempt(partition, id)
	return p.retryOnce(ctx, op, func(try int) (any, error) {
		key := attempt
		if try == 1 && (!given || first) {
			// The first try of a fresh id: no earlier run to look up (dx_once in lib.lua). A
			// caller's id may name a call it sent before, whose reply it lost, unless the caller
			// marked it as its first send (provider.WithFirstAttemptID).
			key += "!"
		}
		return p.call(ctx, op, script, partition, key, args)
	})
}

// retryOnce sends a call under attempt keys (call(try) sends try number try) and retries it while
// its outcome is unknown, as runOnce describes.
func (p *Provider) retryOnce(ctx context.Context, op string, call func(try int) (any, error)) (any, error) {
	start := time.Now()
	unknown := false
	for try := 1; ; try++ {
		res, err := call(try)
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
	argv := make([]any, 0, len(args)+1)
	argv = append(argv, p.keys.Prefix(partition))
	argv = append(argv, args...)
	keys := []string{p.keys.Meta(partition)}
	if attempt != "" {
		keys = append(keys, attempt)
	}
	return p.callKeys(ctx, op, script, keys, argv)
}

// callKeys is call with the keys and arguments built (KEYS[1] the meta key of the partition whose
// prefix is argv[0]).
func (p *Provider) callKeys(ctx context.Context, op, script string, keys []string, argv []any) (any, error) {
	if p.isClosed() { // also when the client is the caller's and stays open
		return nil, provider.NewPermanentError(op, "provider closed").WithCause(redis.ErrClosed)
	}
	if ctx == nil {
		return nil, errNilContext(op)
	}
	var res any
	var err error
	if obs := p.opts.Observer; obs != nil {
		start := time.Now()
		defer func() { obs.ObserveCall(ctx, op, time.Since(start), err) }()
	}
	waits := waitNone
	if p.opts.WaitReplicas > 0 {
		waits = replicaWait(script)
	}
	res, err = p.callMoving(ctx, op, script, keys, argv, waits)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return res, err
}

// Slot migrations (resharding, keys.go "Slot migrations"). While a Redis Cluster moves a
// partition's slot, every script on it fails before its first write (the slot probe in lib.lua,
// dx_setup: "Script attempted to access a non local key", or TRYAGAIN for the call's own keys), and
// a call sent to a node that no longer serves the slot gets MOVED or ASK (the cluster client
// follows those itself, except in the pipelines of callAndWait, which go to one node). callMoving
// retries such a call, with a backoff from 5 ms to 200 ms and a fresh slot map, for up to
// slotMoveWindow: a slot's move takes milliseconds to a few seconds (its keys, 10 per MIGRATE with
// redis-cli's default --cluster-pipeline), during which its partition waits. After the window the
// error is returned, retryable.
const slotMoveWindow = 10 * time.Second

// slotMoving reports whether err says that the call's slot is being migrated, or served elsewhere:
// nothing ran.
func slotMoving(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "attempted to access a non local key") || strings.HasPrefix(msg, "TRYAGAIN") ||
		strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// callMoving is callScript, retried while the partition's slot moves (see slotMoveWindow).
func (p *Provider) callMoving(ctx context.Context, op, script string, keys []string, argv []any, waits int) (any, error) {
	var start time.Time
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		res, err := p.callScript(ctx, op, script, keys, argv, waits)
		if err == nil || !slotMoving(err) || ctx.Err() != nil || p.isClosed() {
			if !start.IsZero() {
				p.opts.Logger.Debug("dxredis: call retried while its slot moved", "op", op, "took", time.Since(start), "err", err)
			}
			return res, err
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > slotMoveWindow {
			return res, err
		}
		if cc, ok := p.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		p.sleep(ctx, backoff)
	}
}

// callScript sends a script once, again after NOSCRIPT or a missing Functions library, and WAITs
// for replicas as waits says (replicaWait).
func (p *Provider) callScript(ctx context.Context, op, script string, keys []string, argv []any, waits int) (res any, err error) {
	for try := 0; ; try++ {
		full := try > 0 && !p.fcall.Load() // EVAL after NOSCRIPT
		if waits != waitNone {
			res, err = p.callAndWait(ctx, op, script, keys, argv, full, waits == waitAll)
		} else {
			res, err = p.send(ctx, p.rdb, script, keys, argv, full).Result()
		}
		if err == nil || try > 0 {
			break
		}
		msg := err.Error()
		switch {
		case p.fcall.Load() && strings.Contains(msg, "Function not found"):
			if lerr := p.reloadFunctions(ctx, keys[0]); lerr != nil {
				err = lerr
			} else {
				continue
			}
		case p.fcall.Load() && strings.HasPrefix(msg, "ERR unknown command") && !p.opts.DisableFunctions:
			// New could not tell (a node down) and the server has no Functions: EVALSHA from now on.
			p.fcall.Store(false)
			continue
		case strings.HasPrefix(msg, "NOSCRIPT"):
			continue
		}
		break
	}
	return res, err
}

// script returns the EVAL form of an operation: with its flags where the server parses them.
func (p *Provider) script(name string) *redis.Script {
	if p.flagged {
		return luascripts.FlaggedScript(name)
	}
	return luascripts.Script(name)
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
	if code == "DX_FORMAT" {
		return p.scriptFormatErr(op, rest)
	}
	if code == "DX_PARTITIONS" {
		found, _, _ := strings.Cut(rest, " ")
		n, _ := strconv.Atoi(found)
		return p.partitionErr(op, &PartitionError{Namespace: p.keys.Namespace(), Found: n})
	}
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
	if errors.As(err, &rerr) && strings.Contains(msg, "Function not found") {
		// Another process deleted or flushed the library between our reload and the retry:
		// nothing ran.
		return provider.NewRetryableError(op, msg).WithCause(err)
	}
	if errors.As(err, &rerr) {
		if slotMoving(err) {
			return provider.NewRetryableError(op, "the partition's slot moved or is moving (resharding, failover): "+msg).WithCause(err)
		}
		for _, transient := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM"} {
			if strings.HasPrefix(msg, transient) {
				return provider.NewRetryableError(op, msg).WithCause(err)
			}
		}
		return provider.NewPermanentError(op, msg).WithCause(err)
	}
	return provider.NewRetryableError(op, msg).WithCause(err)
}

// send issues one script call on c (the client, or a pipeline): FCALL, EVALSHA, or with full EVAL
// of the whole source. Read-only scripts go as FCALL_RO / EVALSHA_RO: Redis then runs them on
// replicas and when it is out of memory.
func (p *Provider) send(ctx context.Context, c redis.Cmdable, script string, keys []string, argv []any, full bool) *redis.Cmd {
	ro := luascripts.ReadOnly(script)
	s := p.script(script)
	switch {
	case p.fcall.Load() && ro:
		return c.FCallRO(ctx, luascripts.FunctionName(script), keys, argv...)
	case p.fcall.Load():
		return c.FCall(ctx, luascripts.FunctionName(script), keys, argv...)
	case full && ro && p.flagged:
		return s.EvalRO(ctx, c, keys, argv...)
	case full:
		return s.Eval(ctx, c, keys, argv...)
	case ro && p.flagged:
		return s.EvalShaRO(ctx, c, keys, argv...)
	}
	return s.EvalSha(ctx, c, keys, argv...)
}

// ErrNotReplicated is the Kind of the permanent error a write returns when fewer than
// Options.WaitReplicas replicas acknowledged it within Options.WaitTimeout. The write was applied
// on the primary and is not undone (calling again may apply it twice); it is lost if the primary
// fails before a replica receives it.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// replicaWait says how a script is followed by WAIT when Options.WaitReplicas is set: not at all
// (waitNone), for the call's own writes (waitOwn: every write that a caller is told succeeded;
// fetches are not, as a lost fetch is a lost lock and its work is delivered again), or for every
// write the node made before the script ran, whoever made it (waitAll: a write of the partition's
// repl:mark key between the script and WAIT moves the connection's replication offset to the
// node's). Forwarding (outbox.go) needs waitAll: ob_take reads entries other connections wrote, and
// a message is forwarded only once a replica has the commit that wrote it; ob_apply may find its
// entries applied by another forwarder, and the trim follows only once a replica has the apply.
// ob_trim does not wait: a trim a failover loses makes its entries forwarded again, and the
// destination's high-water mark, replicated before the trim, drops them.
func replicaWait(script string) int {
	switch {
	case script == luascripts.ObTake.Op || script == luascripts.ObApply.Op:
		return waitAll
	case luascripts.ReadOnly(script) || script == "orch_fetch" || script == "work_fetch" || script == luascripts.ObTrim.Op:
		return waitNone
	}
	return waitOwn
}

const (
	waitNone = iota
	waitOwn
	waitAll
)

// replMarkTTL is how long the repl:mark key written before a waitAll WAIT lives.
const replMarkTTL = 10 * time.Second

// callAndWait runs a script and WAIT in one pipeline, so that both use one connection (WAIT
// counts the replicas that acknowledged the connection's writes); with all, a write of the
// partition's repl:mark key goes between them (replicaWait). On a cluster the pipeline goes to the
// primary of the partition's slot.
func (p *Provider) callAndWait(ctx context.Context, op, script string, keys []string, argv []any, full, all bool) (any, error) {
	var c redis.Cmdable = p.rdb
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		c = node
	}
	var call, wait *redis.Cmd
	var mark *redis.StatusCmd
	_, _ = c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		call = p.send(ctx, pipe, script, keys, argv, full)
		if all {
			mark = pipe.Set(ctx, strings.TrimSuffix(keys[0], "meta")+"repl:mark", "1", replMarkTTL)
		}
		wait = pipe.Do(ctx, "WAIT", p.opts.WaitReplicas, p.opts.WaitTimeout.Milliseconds())
		return nil
	})
	res, err := call.Result()
	if err != nil {
		return nil, err // a script error wrote nothing; a connection error is mapped by run
	}
	n, werr := wait.Int64()
	if werr == nil && mark != nil {
		werr = mark.Err() // without the mark, WAIT covers the connection's writes only
	}
	if werr != nil || n < int64(p.opts.WaitReplicas) {
		msg := fmt.Sprintf("written on the primary, but %d of %d replicas acknowledged it within %v", n, p.opts.WaitReplicas, p.opts.WaitTimeout)
		if werr != nil {
			msg = "written on the primary, but WAIT failed: " + werr.Error()
		}
		return nil, provider.NewPermanentError(op, msg).WithKind(ErrNotReplicated).WithCause(werr)
	}
	return res, nil
}
