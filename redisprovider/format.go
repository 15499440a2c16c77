package redisprovider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// FormatError says that a namespace's storage format is not the one this release reads and
// writes (dxredis.Format), or that `dxctl migrate` is converting it. New returns it before
// writing anything; a write script that meets such a namespace later (another process migrated
// or replaced it) fails with it too, wrapped in a *provider.ProviderError (errors.As finds it).
type FormatError struct {
	Namespace string
	Found     int  // the namespace's format (1: the layout of the releases before format 2)
	Migrating bool // dxctl migrate is converting it (Found is the format it comes from) or re-partitioning it (Found is 2)
}

func (e *FormatError) Error() string {
	switch {
	case e.Migrating && e.Found == dxredis.Format:
		return fmt.Sprintf("dxredis: namespace %q is being re-partitioned (dxctl migrate --partitions): wait for it to finish, or run it again if it stopped",
			e.Namespace)
	case e.Migrating:
		return fmt.Sprintf("dxredis: namespace %q is being migrated from format %d to format %d: wait for `dxctl migrate` to finish, or run it again if it stopped",
			e.Namespace, e.Found, dxredis.Format)
	case e.Found < dxredis.Format:
		return fmt.Sprintf("dxredis: namespace %q is in storage format %d, this release reads and writes format %d: stop the runtimes that use it and run `dxctl migrate --ns %s`",
			e.Namespace, e.Found, dxredis.Format, e.Namespace)
	default:
		return fmt.Sprintf("dxredis: namespace %q is in storage format %d, newer than this release's %d: upgrade dxredis",
			e.Namespace, e.Found, dxredis.Format)
	}
}

// NamespaceFormat reads a namespace partition's format without writing: 0 for a namespace with
// no data yet (its first write makes it format 2), 1 for format-1 data (no format record, the
// STRING sequence key), else the record's format; migrating while dxctl migrate converts it.
// Scripts decide the same way (lib.lua, format_check).
func NamespaceFormat(ctx context.Context, c redis.Cmdable, keys dxredis.Keyspace, partition int) (format int, migrating bool, err error) {
	pipe := c.Pipeline()
	meta := pipe.HMGet(ctx, keys.Meta(partition), "format", "migrating")
	seq := pipe.Exists(ctx, keys.Prefix(partition)+"seq")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, err
	}
	v := meta.Val()
	migrating = len(v) == 2 && v[1] != nil
	if s, ok := v[0].(string); ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, migrating, fmt.Errorf("dxredis: namespace %q: format record %s holds format %q", keys.Namespace(), keys.Meta(partition), s)
		}
		return n, migrating, nil
	}
	if migrating || seq.Val() > 0 {
		return 1, migrating, nil
	}
	return 0, false, nil
}

// checkFormat refuses a namespace this release cannot use (New).
func (p *Provider) checkFormat(ctx context.Context) error {
	found, migrating, err := NamespaceFormat(ctx, p.rdb, p.keys, 0)
	if err == nil && p.keys.Partitions() > 1 {
		// Partition 0's record is created with the root one; the root says what the namespace is.
		found, migrating, err = rootFormat(ctx, p.rdb, p.keys)
	}
	if err != nil {
		return p.mapErr("new", err)
	}
	if migrating || (found != 0 && found != dxredis.Format) {
		return p.formatErr("new", &FormatError{Namespace: p.keys.Namespace(), Found: found, Migrating: migrating})
	}
	return nil
}

func (p *Provider) formatErr(op string, fe *FormatError) error {
	return provider.NewPermanentError(op, fe.Error()).WithKind(provider.ErrInvalidInput).WithCause(fe)
}

// scriptFormatErr maps a script's "DX_FORMAT <found> <text>" reply (lib.lua, format_check).
func (p *Provider) scriptFormatErr(op, rest string) error {
	found, text, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(found)
	return p.formatErr(op, &FormatError{Namespace: p.keys.Namespace(), Found: n, Migrating: strings.Contains(text, "being migrated")})
}

// PartitionError says that a provider was configured with another partition count
// (Options.Partitions) than its namespace was created with. New returns it before writing
// anything; a write script that meets a partition of another count fails with it too, wrapped in
// a *provider.ProviderError with Kind provider.ErrInvalidInput (errors.As finds it).
type PartitionError struct {
	Namespace string
	Want      int // the provider's count; 0 where a script found the mismatch
	Found     int // the namespace's count; 0 where a partition has no record
}

func (e *PartitionError) Error() string {
	switch {
	case e.Want > 0 && e.Found > 0:
		return fmt.Sprintf("dxredis: namespace %q has %d partitions, not the %d of Options.Partitions: set Options.Partitions to %d (or 0 to use the namespace's count), or move the namespace with dxctl migrate --partitions",
			e.Namespace, e.Found, e.Want, e.Found)
	case e.Found > 0:
		return fmt.Sprintf("dxredis: namespace %q has %d partitions, not the count this provider was configured with", e.Namespace, e.Found)
	}
	return fmt.Sprintf("dxredis: namespace %q has no record for a partition this provider uses: its partition count is not the namespace's, or the record was lost (dxctl fsck)", e.Namespace)
}

func (p *Provider) partitionErr(op string, pe *PartitionError) error {
	return provider.NewPermanentError(op, pe.Error()).WithKind(provider.ErrInvalidInput).WithCause(pe)
}

// rootRecord is a namespace's root format record (keys.go, RootMeta).
type rootRecord struct {
	format     string // "" none
	partitions int
	tags       []string
	migrating  bool
	format1    bool // no record, format-1 data
}

// readRoot reads the root record without writing.
func readRoot(ctx context.Context, c redis.Cmdable, keys dxredis.Keyspace) (rootRecord, error) {
	pipe := c.Pipeline()
	meta := pipe.HMGet(ctx, keys.RootMeta(), "format", "partitions", "tags", "migrating")
	seq := pipe.Exists(ctx, keys.Prefix(0)+"seq")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return rootRecord{}, err
	}
	v := meta.Val()
	s := func(i int) string { x, _ := v[i].(string); return x }
	return parseRoot(keys, s(0), s(1), s(2), s(3), seq.Val() > 0)
}

func parseRoot(keys dxredis.Keyspace, format, partitions, tags, migrating string, seq bool) (rootRecord, error) {
	r := rootRecord{format: format, partitions: 1, migrating: migrating != ""}
	if format == "" {
		r.format1 = seq || r.migrating
		return r, nil
	}
	if partitions != "" {
		n, err := strconv.Atoi(partitions)
		if err != nil || n < 1 || n > dxredis.MaxPartitions {
			return r, fmt.Errorf("dxredis: namespace %q: root record %s holds partitions %q", keys.Namespace(), keys.RootMeta(), partitions)
		}
		r.partitions = n
	}
	if r.partitions > 1 {
		for _, t := range strings.Fields(tags) {
			r.tags = append(r.tags, strings.TrimSuffix(strings.TrimPrefix(t, "{"), "}"))
		}
		if _, err := keys.WithTags(r.tags); err != nil || len(r.tags) != r.partitions {
			return r, fmt.Errorf("dxredis: namespace %q: root record %s holds %d partitions with tags %q", keys.Namespace(), keys.RootMeta(), r.partitions, tags)
		}
	}
	return r, nil
}

// rootFormat is NamespaceFormat's reading of a namespace of several partitions' root record.
func rootFormat(ctx context.Context, c redis.Cmdable, keys dxredis.Keyspace) (int, bool, error) {
	r, err := readRoot(ctx, c, keys)
	if err != nil || r.format == "" {
		return 0, r.migrating, err
	}
	n, err := strconv.Atoi(r.format)
	return n, r.migrating, err
}

// setupPartitions makes the provider's keyspace the namespace's (New): it reads the root record;
// a namespace of another count than Options.Partitions (when set) is refused with a
// PartitionError and nothing is written. A new namespace gets Options.Partitions (default 1): for
// more than one, its root record (created atomically, so that of two processes creating it with
// different counts one wins and the other is refused) and then every partition's record (created
// again by the next New if a process stops between the two).
func (p *Provider) setupPartitions(ctx context.Context) error {
	const op = "new"
	want := p.opts.Partitions
	if want < 0 || want > dxredis.MaxPartitions {
		return invalid(op, "Options.Partitions is %d: want 1-%d, or 0 for the namespace's count", want, dxredis.MaxPartitions)
	}
	r, err := readRoot(ctx, p.rdb, p.keys)
	if err != nil {
		return p.mapErr(op, err)
	}
	if r.format == "" && !r.format1 && want > 1 {
		if r, err = p.createRoot(ctx, want); err != nil {
			return err
		}
	}
	if r.format == "" {
		// A new namespace of one partition (its first write creates the record), or format-1
		// data (checkFormat refuses it).
		return nil
	}
	if r.migrating && want != 0 && !p.opts.anyFormat {
		// Being re-partitioned: whatever count the caller wants, the namespace cannot be used yet.
		return p.formatErr(op, &FormatError{Namespace: p.keys.Namespace(), Found: dxredis.Format, Migrating: true})
	}
	if want != 0 && want != r.partitions {
		return p.partitionErr(op, &PartitionError{Namespace: p.keys.Namespace(), Want: want, Found: r.partitions})
	}
	if r.partitions == 1 {
		return nil
	}
	keys, err := p.keys.WithTags(r.tags)
	if err != nil {
		return p.mapErr(op, err)
	}
	p.keys = keys
	if r.migrating {
		return nil // no records while dxctl migrate moves the namespace (checkFormat refuses it)
	}
	return p.initPartitions(ctx)
}

// createRoot creates the root record of a new namespace of n partitions, or returns the one
// another process created first.
func (p *Provider) createRoot(ctx context.Context, n int) (rootRecord, error) {
	const op = "new"
	tags, err := dxredis.PartitionTags(p.keys.Namespace(), n)
	if err != nil {
		return rootRecord{}, invalid(op, "%v", err)
	}
	braced := make([]string, n)
	for i, t := range tags {
		braced[i] = "{" + t + "}"
	}
	args, err := argsOf(op, luascripts.NsInit, "mode", "root", "partitions", strconv.Itoa(n), "tags", strings.Join(braced, " "))
	if err != nil {
		return rootRecord{}, err
	}
	// Sent whole (EVAL): New runs this before it loads the scripts.
	root := p.keys.RootMeta()
	res, err := p.send(ctx, p.rdb, luascripts.NsInit.Op, []string{root}, append([]any{strings.TrimSuffix(root, "meta")}, args...), true).Result()
	if err != nil {
		return rootRecord{}, p.mapErr(op, err)
	}
	r := list(res)
	if len(r) < 4 {
		return rootRecord{}, provider.NewPermanentError(op, "unexpected reply from ns_init")
	}
	rec, err := parseRoot(p.keys, str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[0]) == "")
	if err != nil {
		return rootRecord{}, p.mapErr(op, err)
	}
	return rec, nil
}

// initPartitions creates the records of a namespace's partitions that lack one (one pipeline).
func (p *Provider) initPartitions(ctx context.Context) error {
	const op = "new"
	n := p.keys.Partitions()
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.Cmd, n)
	for i := range n {
		args, err := argsOf(op, luascripts.NsInit, "mode", "part", "partitions", strconv.Itoa(n), "tags", strings.TrimSuffix(p.keys.Prefix(i), ":"))
		if err != nil {
			return err
		}
		argv := append([]any{p.keys.Prefix(i)}, args...)
		cmds[i] = p.send(ctx, pipe, luascripts.NsInit.Op, []string{p.keys.Meta(i)}, argv, true)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		r, err := c.Slice()
		if err != nil {
			return p.mapErr(op, err)
		}
		if len(r) < 2 {
			return provider.NewPermanentError(op, "unexpected reply from ns_init")
		}
		if found, _ := strconv.Atoi(str(r[1])); found != n {
			return p.partitionErr(op, &PartitionError{Namespace: p.keys.Namespace(), Want: n, Found: found})
		}
	}
	return nil
}
