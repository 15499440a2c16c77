// Command dxctl inspects and administers a dxredis namespace: list instances (pending starts
// included) and the namespaces of a server, show one instance with its executions and history,
// queue depths and ages, system metrics, and delete, purge, prune or drop the whole namespace. Through the dx client it also starts instances, raises events, enqueues
// messages, cancels instances and waits for them to finish. "dxctl web" serves all of this as a
// browser console (package web).
//
//	dxctl [--addr 127.0.0.1:6379] [--ns dx] [--json] <command> [arguments]
//
// Output is an aligned table by default and JSON with --json. Errors print one line on stderr
// and exit with status 1; so does any command on a namespace that holds nothing at all (most
// likely a misspelt --ns). Run "dxctl --help" for every command, "dxctl help <command>" for one.
// DXCTL_ADDR, DXCTL_NS and DXCTL_PASSWORD set the defaults of --addr, --ns and the Redis password.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs every failed dial on its own; dxctl reports the outcome in one line.
	redis.SetLogger(silent{})
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

const (
	defaultAddr    = "127.0.0.1:6379"
	defaultNS      = "dx"
	defaultTimeout = 30 * time.Second
)

// app is one dxctl invocation: global options, output streams and, once connected, the provider.
type app struct {
	addr     string
	ns       string
	password string
	json     bool
	timeout  time.Duration
	version  bool
	stdin    io.Reader // drop's confirmation
	stdout   io.Writer
	stderr   io.Writer
	p        *redisprovider.Provider
}

// command is one dxctl command. setup registers the command's own flags on fs and returns the
// function that runs it with the positional arguments.
type command struct {
	name    string
	usage   string // arguments after the name
	summary string
	details string
	nargs   int // positional arguments required; -1: the command checks them
	setup   func(fs *flag.FlagSet) func(ctx context.Context, a *app, args []string) error
}

// usageError is a mistake on the command line (reported like any other error, exit status 1).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// globalFlags registers the options every command accepts, before or after its name, except
// those the command defines itself (start's --version is the orchestration's): register the
// command's flags first.
func (a *app) globalFlags(fs *flag.FlagSet) {
	free := func(name string) bool { return fs.Lookup(name) == nil }
	if free("addr") {
		fs.StringVar(&a.addr, "addr", a.addr, "Redis address `host:port` (default from DXCTL_ADDR, else 127.0.0.1:6379)")
	}
	if free("ns") {
		fs.StringVar(&a.ns, "ns", a.ns, "`namespace` to administer (default from DXCTL_NS, else dx)")
	}
	if free("json") {
		fs.BoolVar(&a.json, "json", a.json, "print JSON instead of tables")
	}
	if free("timeout") {
		fs.DurationVar(&a.timeout, "timeout", a.timeout, "give up after this `duration` (wait: how long to wait)")
	}
	if free("version") {
		fs.BoolVar(&a.version, "version", a.version, "print dxctl's version and exit")
	}
}

// run is dxctl: it parses args, runs one command and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{addr: envOr("DXCTL_ADDR", defaultAddr), ns: envOr("DXCTL_NS", defaultNS),
		password: os.Getenv("DXCTL_PASSWORD"), timeout: defaultTimeout, stdin: stdin, stdout: stdout, stderr: stderr}
	fail := func(err error) int {
		var status exitStatus
		if errors.As(err, &status) {
			return int(status) // what it means is on stdout already
		}
		msg := strings.Join(strings.Fields(a.explain(err).Error()), " ") // one line, whatever the error holds
		hint := ""
		var ue usageError
		if errors.As(err, &ue) {
			hint = " (see dxctl --help)"
		}
		fmt.Fprintf(stderr, "dxctl: %s%s\n", msg, hint)
		return 1
	}

	fs := flag.NewFlagSet("dxctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printOverview(stdout)
			return 0
		}
		return fail(usagef("%v", err))
	}
	if a.version {
		printVersion(stdout)
		return 0
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fail(usagef("no command given"))
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return helpCommand(rest, stdout, fail)
	}
	cmd := findCommand(name)
	if cmd == nil {
		return fail(usagef("unknown command %q", name))
	}
	cfs := flag.NewFlagSet("dxctl "+cmd.name, flag.ContinueOnError)
	cfs.SetOutput(io.Discard)
	exec := cmd.setup(cfs)
	a.globalFlags(cfs)
	pos, err := parseInterspersed(cfs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, cmd)
			return 0
		}
		return fail(usagef("%s: %v", cmd.name, err))
	}
	if a.version {
		printVersion(stdout)
		return 0
	}
	if cmd.nargs >= 0 && len(pos) != cmd.nargs {
		return fail(usagef("%s: want %d argument(s), got %d: usage: dxctl %s %s", cmd.name, cmd.nargs, len(pos), cmd.name, cmd.usage))
	}

	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	defer a.close()
	if err := exec(ctx, a, pos); err != nil {
		return fail(err)
	}
	return 0
}

// parseInterspersed parses flags that may come before, between or after positional arguments
// (the flag package stops at the first positional one); "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// open connects to the namespace, which must hold something (see checkNotEmpty). Commands call
// it once their arguments are checked, so that a usage error needs no server.
func (a *app) open(ctx context.Context) error {
	if err := a.connect(ctx); err != nil {
		return err
	}
	return a.checkNotEmpty(ctx)
}

func (a *app) close() {
	if a.p != nil {
		_ = a.p.Close()
	}
}

// connect opens the provider. The eviction-policy check is the runtime's safeguard: dxctl only
// inspects and deletes, so it also works on a server whose policy the runtime would refuse.
func (a *app) connect(ctx context.Context) error {
	p, err := redisprovider.New(ctx, redisprovider.Options{
		Addr: a.addr, Password: a.password, Namespace: a.ns, AllowEvictingMaxmemoryPolicy: true,
		Logger: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	a.p = p
	return nil
}

// checkNotEmpty refuses a namespace that holds nothing at all: an empty answer there would
// hide a misspelt --ns. The first write to a namespace creates its format record (Meta), so a
// namespace that ever held an instance or a message has it (until dropped).
func (a *app) checkNotEmpty(ctx context.Context) error {
	n, err := a.p.Client().Exists(ctx, a.p.Keyspace().Meta(0)).Result()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("namespace %q holds nothing at %s: check --ns (or DXCTL_NS; dxctl namespaces lists them) and --addr (or DXCTL_ADDR)", a.ns, a.addr)
	}
	return nil
}

// isServerReply reports whether err is an error reply from Redis (e.g. BUSY, LOADING) rather
// than a failure to reach it.
func isServerReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// explain turns a provider error into the user's words: the message without the provider's
// internal operation name, and what to do about it.
func (a *app) explain(err error) error {
	pe, ok := provider.AsProviderError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer from Redis at %s within --timeout %v", a.addr, a.timeout)
		}
		return err
	}
	msg := pe.Message
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("no answer from Redis at %s within --timeout %v", a.addr, a.timeout)
	case pe.Retryable && pe.Cause != nil && !isServerReply(pe.Cause):
		msg = fmt.Sprintf("Redis at %s is unreachable (%v): check --addr (or DXCTL_ADDR) and that the server runs", a.addr, pe.Cause)
	case errors.Is(err, provider.ErrNotFound):
		msg += fmt.Sprintf(" in namespace %q", a.ns)
	case errors.Is(err, provider.ErrInstanceRunning):
		msg = strings.Replace(msg, "delete with force", "rerun with --force", 1)
	case strings.HasPrefix(msg, "bad cursor "):
		if c, _, ok := strings.Cut(strings.TrimPrefix(msg, "bad cursor "), ": "); ok {
			msg = "--cursor " + c + " is not a cursor dxctl printed: copy it from the last line of the previous page"
		}
	}
	return errors.New(msg)
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func helpCommand(args []string, stdout io.Writer, fail func(error) int) int {
	if len(args) == 0 {
		printOverview(stdout)
		return 0
	}
	if len(args) > 1 {
		return fail(usagef("help: want at most one command name"))
	}
	cmd := findCommand(args[0])
	if cmd == nil {
		return fail(usagef("help: unknown command %q", args[0]))
	}
	printCommandHelp(stdout, cmd)
	return 0
}

const overviewHead = `dxctl inspects and administers a dxredis namespace, and starts, signals, cancels and waits
on its instances.

Usage:
  dxctl [global flags] <command> [arguments and flags]
  dxctl --version

Global flags (accepted before or after the command):
`

const overviewTail = `
Errors print one line on stderr and exit with status 1 (unknown instance, Redis unreachable,
bad flag or argument, a namespace that holds nothing at all); "wait" exits with status 2 when
the instance failed. The password comes from $DXCTL_PASSWORD. "dxctl help <command>" shows a
command's details.
`

func printOverview(w io.Writer) {
	fmt.Fprint(w, overviewHead)
	writeFlags(w, globalFlagSet(), "  ")
	fmt.Fprint(w, "\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\n  %s\n      %s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
		writeFlags(w, c.flagSet(), "      ")
	}
	fmt.Fprint(w, overviewTail)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: dxctl %s\n\n%s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
	}
	if fs := c.flagSet(); hasFlags(fs) {
		fmt.Fprintf(w, "\nFlags:\n")
		writeFlags(w, fs, "  ")
	}
	fmt.Fprintf(w, "\nGlobal flags (before or after the command):\n")
	own, globals := c.flagSet(), flag.NewFlagSet("dxctl", flag.ContinueOnError)
	globalFlagSet().VisitAll(func(f *flag.Flag) {
		if own.Lookup(f.Name) == nil { // a command's own flag replaces the global one
			globals.Var(f.Value, f.Name, f.Usage)
		}
	})
	writeFlags(w, globals, "  ")
}

// globalFlagSet holds the global flags with their built-in defaults, for help.
func globalFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("dxctl", flag.ContinueOnError)
	(&app{addr: defaultAddr, ns: defaultNS, timeout: defaultTimeout}).globalFlags(fs)
	return fs
}

func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// writeFlags lists fs's flags in order, one "--name ARG  usage (default D)" line each.
func writeFlags(w io.Writer, fs *flag.FlagSet, indent string) {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	t := newTable(w)
	for _, n := range names {
		f := fs.Lookup(n)
		arg, usage := flag.UnquoteUsage(f)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && !strings.Contains(usage, "(default") &&
			!strings.Contains(usage, "(required)") {
			usage += " (default " + f.DefValue + ")"
		}
		t.row(strings.TrimRight(indent+"--"+n+" "+arg, " ")+" ", usage)
	}
	_ = t.flush()
}

// printVersion prints dxctl's module version (from the build information), the provider
// version and the Go version.
func printVersion(w io.Writer) {
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintf(w, "dxctl %s (provider %s, %s)\n", moduleVersion(info), redisprovider.Version, runtime.Version())
}

// moduleVersion is the main module's version ("v0.3.1" when built by go install ...@version);
// for a build from a checkout, "(devel)" followed by the VCS revision when known.
func moduleVersion(info *debug.BuildInfo) string {
	if info == nil {
		return "(devel)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	return "(devel) " + rev + dirty
}
