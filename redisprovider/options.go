package redisprovider

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures New. The zero value of every field is a documented default.
type Options struct {
	// Addr is the Redis address used when Client is nil. Default "127.0.0.1:6379".
	Addr string
	// Username and Password authenticate (AUTH) when Client is nil: an ACL user, or Password
	// alone for the default user (requirepass). See docs/operations.md for the permissions the
	// user needs.
	Username string
	Password string
	// TLSConfig, when set, makes the connections New opens use TLS (e.g. managed Redis services).
	TLSConfig *tls.Config
	// DB is the database number when Client is nil.
	DB int
	// Client is an existing client (single node, sentinel or cluster). When set, Addr, Username,
	// Password, TLSConfig and DB are ignored and Close does not close it. Give it MaxRetries: -1
	// (New does so for its own client): go-redis re-sends a command whose reply was lost, which
	// the provider's own retries make harmless only for the writes it runs once per attempt (see
	// ErrOutcomeUnknown).
	Client redis.UniversalClient
	// BlockingClient is used for long-poll waits (BLPOP), so that waiting fetchers never hold the
	// connections scripts need. Default: a second connection pool created by New from Addr; when
	// Client is given and BlockingClient is nil, waits use Client and are cut into slices of
	// BlockingSlice so they stay under the client's read timeout — except in a namespace of
	// several partitions, whose waits (one connection per partition while fetches wait) get a pool
	// of their own, made from Client's options.
	BlockingClient redis.UniversalClient
	// BlockingSlice is the longest single BLPOP on a caller-supplied client. Default 2 s
	// (go-redis's default read timeout is 3 s).
	BlockingSlice time.Duration
	// DisableFunctions runs the scripts with EVALSHA even on servers with Redis Functions
	// (Redis 7+), e.g. where ACLs forbid FUNCTION LOAD. By default New loads them as one
	// Functions library ("dxredis_<hash>", one per dxredis version) and falls back to EVALSHA
	// when the server refuses.
	DisableFunctions bool
	// WaitReplicas, when positive, makes every write (enqueue, ack, abandon, renew, delete...) wait
	// until that many replicas acknowledged it (Redis WAIT, on the same connection), so that a
	// failover to one of them does not lose it. When fewer acknowledge within WaitTimeout the call
	// fails with a permanent error of Kind ErrNotReplicated: the write is on the primary only.
	// Fetches do not wait (a lost fetch is a lost lock; the work is delivered again). Default 0:
	// replication stays asynchronous. See docs/operations.md for what each setting loses.
	WaitReplicas int
	// WaitTimeout bounds the wait for replicas. Default 1 s. It must stay below the client's read
	// timeout (New raises the read timeout of the client it opens to WaitTimeout + 3 s).
	WaitTimeout time.Duration
	// Namespace isolates this provider's keys; 1-64 of A-Z a-z 0-9 . _ -. Default "dx".
	Namespace string
	// Partitions is the namespace's partition count, 1-256 (see docs/operations.md, "Partitions"):
	// a namespace of P partitions spreads its instances over P Redis Cluster slots, so that one
	// namespace can use up to P primaries. It is fixed when the namespace is created (the first New
	// with it set makes the namespace); a provider whose count is not the namespace's is refused by
	// New with a *PartitionError before it writes anything. Default 0: the namespace's count (1 for
	// a new namespace). `dxctl migrate --partitions N` changes a namespace's count offline.
	Partitions int
	// AllowEvictingMaxmemoryPolicy lets New accept a server whose maxmemory-policy can evict keys
	// (anything but noeviction). Eviction silently loses orchestration state: leave it false.
	AllowEvictingMaxmemoryPolicy bool
	// Retention, when positive, makes finished data expire: once a root instance and all its
	// sub-orchestrations are Completed or Failed, all their keys get this TTL, and listings drop
	// them once expired. Running instances never expire. Default 0: keep everything until deleted.
	Retention time.Duration
	// HistoryCacheBytes bounds the per-process cache of decoded histories that lets a turn
	// decode only the events appended since this process last fetched the instance. Default
	// 64 MiB of stored history; negative disables the cache.
	HistoryCacheBytes int
	// MaxPayloadBytes rejects any single event, work item or KV value larger than this with a
	// permanent error before anything is written. Default 16 MiB; Redis itself caps strings at 512 MiB.
	MaxPayloadBytes int
	// Observer, when set, is told about every script call (for metrics and traces); see Observer.
	Observer Observer
	// Logger receives warnings (dropped orphan messages, recovered scripts), and at Debug level
	// go-redis's own lines (a failed dial, ...), which go-redis would print on stderr: go-redis has
	// one logger per process, so they go to the newest provider still open (see redislog.go; call
	// redis.SetLogger after the first New to send them elsewhere). Default slog.Default().
	Logger *slog.Logger

	// anyFormat: New skips the format check (Migrate opens a format-1 namespace).
	anyFormat bool
}

// Observer receives one call per Redis script run by the provider: the provider operation (e.g.
// "ack_orchestration_item"), how long the round trip took and its error (nil on success). Long-poll
// waits are not script calls and are not reported. Implementations must be fast and safe for
// concurrent use; adapters to OpenTelemetry or Prometheus fit in a few lines.
type Observer interface {
	ObserveCall(ctx context.Context, op string, elapsed time.Duration, err error)
}

const (
	defaultAddr            = "127.0.0.1:6379"
	defaultNamespace       = "dx"
	defaultBlockingSlice   = 2 * time.Second
	defaultMaxPayloadBytes = 16 << 20
	defaultWaitTimeout     = time.Second
)

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = defaultAddr
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.BlockingSlice <= 0 {
		o.BlockingSlice = defaultBlockingSlice
	}
	if o.HistoryCacheBytes == 0 {
		o.HistoryCacheBytes = 64 << 20
	}
	if o.MaxPayloadBytes <= 0 {
		o.MaxPayloadBytes = defaultMaxPayloadBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = defaultWaitTimeout
	}
	return o
}

// clientOptions are the options of the clients New opens itself.
func (o Options) clientOptions() *redis.Options {
	ro := &redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		MaxRetries:            -1,   // never re-send a script whose reply was lost: see runOnce
		ContextTimeoutEnabled: true} // a caller's deadline shorter than the read timeout is honoured
	if o.WaitReplicas > 0 {
		ro.ReadTimeout = o.WaitTimeout + 3*time.Second // WAIT blocks the connection up to WaitTimeout
	}
	return ro
}
