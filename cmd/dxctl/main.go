// Command dxctl inspects and administers a dxredis namespace: list instances, show one with its
// executions and history, queue depths and ages, system metrics, and delete, purge or prune.
//
//	dxctl [--addr 127.0.0.1:6379] [--ns dx] [--json] <command> [arguments]
//
// Output is an aligned table by default and JSON with --json. Errors print one line on stderr
// and exit with status 1. Run "dxctl --help" for every command, "dxctl help <command>" for one.
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
	"sort"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs every failed dial on its own; dxctl reports the outcome in one line.
	redis.SetLogger(silent{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

// app is one dxctl invocation: global options, output streams and, once connected, the provider.
type app struct {
	addr     string
	ns       string
	password string
	json     bool
	timeout  time.Duration
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
	nargs   int // positional arguments required
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

// globalFlags registers the options every command accepts, before or after its name.
func (a *app) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "addr", a.addr, "Redis address host:port (default from DXCTL_ADDR, else 127.0.0.1:6379)")
	fs.StringVar(&a.ns, "ns", a.ns, "namespace to administer (default from DXCTL_NS, else dx)")
	fs.BoolVar(&a.json, "json", a.json, "print JSON instead of tables")
	fs.DurationVar(&a.timeout, "timeout", a.timeout, "give up after this long")
}

// run is dxctl: it parses args, runs one command and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{addr: envOr("DXCTL_ADDR", "127.0.0.1:6379"), ns: envOr("DXCTL_NS", "dx"),
		password: os.Getenv("DXCTL_PASSWORD"), timeout: 30 * time.Second, stdout: stdout, stderr: stderr}
	fail := func(err error) int {
		msg := strings.Join(strings.Fields(err.Error()), " ") // one line, whatever the error holds
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
	a.globalFlags(cfs)
	exec := cmd.setup(cfs)
	pos, err := parseInterspersed(cfs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, cmd)
			return 0
		}
		return fail(usagef("%s: %v", cmd.name, err))
	}
	if len(pos) != cmd.nargs {
		return fail(usagef("%s: want %d argument(s), got %d: usage: dxctl %s %s", cmd.name, cmd.nargs, len(pos), cmd.name, cmd.usage))
	}

	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	if err := a.connect(ctx); err != nil {
		return fail(err)
	}
	defer a.p.Close()
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

// connect opens the provider. The eviction-policy check is the runtime's safeguard: dxctl only
// inspects and deletes, so it also works on a server whose policy the runtime would refuse.
func (a *app) connect(ctx context.Context) error {
	p, err := redisprovider.New(ctx, redisprovider.Options{
		Addr: a.addr, Password: a.password, Namespace: a.ns, AllowEvictingMaxmemoryPolicy: true,
		Logger: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return fmt.Errorf("connecting to %s (namespace %q): %w", a.addr, a.ns, err)
	}
	a.p = p
	return nil
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

const overviewHead = `dxctl inspects and administers a dxredis namespace.

Usage:
  dxctl [--addr host:port] [--ns namespace] [--json] [--timeout d] <command> [arguments]

Global flags (accepted before or after the command):
  --addr     Redis address (default $DXCTL_ADDR, else 127.0.0.1:6379); password from $DXCTL_PASSWORD
  --ns       namespace (default $DXCTL_NS, else dx)
  --json     print JSON instead of aligned tables
  --timeout  give up after this long (default 30s)

Commands:
`

const overviewTail = `
Errors print one line on stderr and exit with status 1 (unknown instance, Redis unreachable,
bad flag or argument). "dxctl help <command>" shows a command's details and flags.
`

func printOverview(w io.Writer) {
	fmt.Fprint(w, overviewHead)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
	}
	fmt.Fprint(w, overviewTail)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: dxctl %s\n\n%s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if len(names) > 0 {
		sort.Strings(names)
		fmt.Fprintf(w, "\nFlags:\n")
		for _, n := range names {
			f := fs.Lookup(n)
			arg, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s %s\n      %s", n, arg, usage)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\nGlobal flags --addr, --ns, --json and --timeout apply too (see dxctl --help).\n")
}
