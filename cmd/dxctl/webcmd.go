package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/duroxide-go/dxredis/cmd/dxctl/web"
)

var webCommand = command{
	name:    "web",
	usage:   "[--addr 127.0.0.1:8080] [--read-only] [--token-env NAME | --token-file PATH] [--allow-host H]",
	summary: "Serve a browser console for the namespace (overview, instances, histories as timelines, actions).",
	details: `Here --addr is the console's listening address; give Redis's before the command name
("dxctl --addr redis:6379 web") or in DXCTL_ADDR. The console binds to 127.0.0.1 by default and
refuses any other address without a token. The token is read from an environment variable
(--token-env) or a file (--token-file), never from the command line (argv shows in ps); when set,
every request needs it ("Authorization: Bearer <token>", or the cookie the login page sets).
Requests whose Host header is not the listening address (or localhost, for a loopback address)
are refused: add other names with --allow-host. --read-only removes the actions (cancel, raise,
enqueue, delete). The JSON API is under /api/ (see docs/web-console.md). Stops on Ctrl-C.`,
	setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		addr := fs.String("addr", "127.0.0.1:8080", "listen on `host:port`")
		readOnly := fs.Bool("read-only", false, "no actions: the console only shows")
		tokenEnv := fs.String("token-env", "", "read the access token from the environment variable `NAME`")
		tokenFile := fs.String("token-file", "", "read the access token from the file `PATH`")
		allow := fs.String("allow-host", "", "also accept these Host header values (`host:port,...`)")
		return func(_ context.Context, a *app, _ []string) error {
			opts := webOptions{addr: *addr, readOnly: *readOnly}
			var err error
			if opts.token, err = readToken(*tokenEnv, *tokenFile); err != nil {
				return err
			}
			if *allow != "" {
				opts.allow = strings.Split(*allow, ",")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.web(ctx, opts, nil)
		}
	},
}

func init() { commands = append(commands, webCommand) }

type webOptions struct {
	addr     string
	readOnly bool
	token    string
	allow    []string
}

// readToken reads the token from the environment variable or the file (at most one of them).
func readToken(env, file string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", usagef("web: give --token-env or --token-file, not both")
	case env != "":
		t := strings.TrimSpace(os.Getenv(env))
		if t == "" {
			return "", usagef("web: --token-env %s: the variable is unset or empty", env)
		}
		return t, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usagef("web: --token-file: %v", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", usagef("web: --token-file %s is empty", file)
		}
		return t, nil
	}
	return "", nil
}

// loopback reports whether host (from --addr) only listens on the loopback interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// web serves the console until ctx ends; ready, when not nil, receives the listening address.
func (a *app) web(ctx context.Context, o webOptions, ready func(addr string)) error {
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return usagef("web: --addr %q: want host:port, e.g. 127.0.0.1:8080", o.addr)
	}
	if !loopback(host) && o.token == "" {
		return usagef("web: --addr %q is not a loopback address: refusing to serve it without a token (--token-env or --token-file)", o.addr)
	}
	octx, cancel := context.WithTimeout(ctx, a.timeout)
	err = a.open(octx)
	cancel()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	bound := ln.Addr().String()
	hosts := append(web.AllowedHostsFor(bound), o.allow...)
	if h, p, _ := net.SplitHostPort(o.addr); h != "" && p != "0" {
		hosts = append(hosts, o.addr) // the name given (e.g. localhost:8080)
	}
	unspecified := host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()
	s, err := web.New(web.Config{Provider: a.p, ReadOnly: o.readOnly, Token: o.token, AllowedHosts: hosts,
		AnyHost: unspecified && len(o.allow) == 0, RequestTimeout: a.timeout,
		Logger: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		_ = ln.Close()
		return err
	}
	mode := ""
	if o.readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(a.stdout, "dxctl web: namespace %q at http://%s/%s; Ctrl-C stops\n", a.ns, bound, mode)
	if ready != nil {
		ready(bound)
	}
	return s.Serve(ctx, ln)
}
