// Package exenv is the examples' plumbing: connect to Redis (or an embedded miniredis when none
// answers), run a runtime on a fresh namespace, and drop that namespace at the end.
package exenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Addr is the Redis the examples use: $DXREDIS_ADDR, else 127.0.0.1:6379.
func Addr() string {
	if a := os.Getenv("DXREDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// Connect returns a provider on a fresh namespace "example-<name>-<random>" of the Redis at Addr,
// or of an embedded miniredis when that Redis does not answer (said on stderr). close drops the
// namespace and closes everything.
func Connect(ctx context.Context, name string) (p *redisprovider.Provider, close func(), err error) {
	p, _, close, err = ConnectAddr(ctx, name)
	return p, close, err
}

// ConnectAddr is Connect that also returns the address of the server used (for other processes).
func ConnectAddr(ctx context.Context, name string) (p *redisprovider.Provider, addr string, close func(), err error) {
	addr = Addr()
	var mr *miniredis.Miniredis
	redis.SetLogger(silent{}) // go-redis logs every failed dial; the probe's failure is said below
	probe := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond, MaxRetries: -1})
	perr := probe.Ping(ctx).Err()
	_ = probe.Close()
	if perr != nil {
		mr, err = miniredis.Run()
		if err != nil {
			return nil, "", nil, err
		}
		fmt.Fprintf(os.Stderr, "no Redis answers at %s (%v): using an embedded miniredis (set DXREDIS_ADDR to use another server)\n", addr, perr)
		addr = mr.Addr()
	}
	ns := "example-" + name + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	p, err = redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Logger: Logger()})
	if err != nil {
		if mr != nil {
			mr.Close()
		}
		return nil, "", nil, err
	}
	return p, addr, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := redisprovider.DropNamespace(dctx, p.Client(), ns); err != nil {
			fmt.Fprintf(os.Stderr, "drop namespace %s: %v\n", ns, err)
		}
		_ = p.Close()
		if mr != nil {
			mr.Close()
		}
	}, nil
}

// Logger logs errors to stderr (the runtime's info lines and warnings about failed instances would drown the output).
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// Main connects, starts a runtime with opts on which register registered the example's
// orchestrations and activities, runs drive with a client, then shuts down and cleans up. It
// exits with status 1 when anything fails.
func Main(name string, opts dx.Options, register func(*dx.Runtime) error, drive func(ctx context.Context, c *dx.Client) error) {
	if err := run(name, opts, register, drive); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name string, opts dx.Options, register func(*dx.Runtime) error, drive func(ctx context.Context, c *dx.Client) error) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, closeAll, err := Connect(ctx, name)
	if err != nil {
		return err
	}
	defer closeAll()
	if opts.Logger == nil {
		opts.Logger = Logger()
	}
	rt := dx.NewRuntime(p, opts)
	if err := register(rt); err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		err = errors.Join(err, rt.Shutdown(sctx))
	}()
	return drive(ctx, dx.NewClient(p))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
