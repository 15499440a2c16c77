package redisprovider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
)

// FsckViolation is one broken invariant of the keyspace (keys.go lists them).
type FsckViolation struct {
	// Code names the invariant, e.g. "messages_stranded" (stable: scripts may match on it).
	Code string
	// Subject is the instance id, or the worker item's id ("b12") for codes starting with "item_",
	// or "" for the namespace as a whole.
	Subject string
	// Detail says what is wrong and names the keys involved.
	Detail string
	// Partition is the partition where it was found (0 in a namespace of one; -1: the root record
	// of a namespace of several).
	Partition int
}

// FsckReport is what Fsck checked and found.
type FsckReport struct {
	Keys       int // keys of the namespace scanned
	Instances  int // instance ids checked
	Items      int // worker items checked
	Histories  int // instance histories read (FsckDeep; 0 for Fsck)
	Violations []FsckViolation
}

// fsckBatch is how many subjects one admin_fsck call checks (each call is one atomic step).
const fsckBatch = 100

// Fsck checks the namespace's invariants (keys.go, "Invariants") and reports every violation. It
// only reads, and is safe on a live system: it walks the keyspace with SCAN and the indexes with
// ZSCAN/SSCAN, page by page, and checks each instance and worker item in a script (admin_fsck)
// that sees it at one instant, so a turn in flight never shows as a violation. It reads every key
// name once and keeps one entry per instance id: run it off-peak on very large namespaces.
func (p *Provider) Fsck(ctx context.Context) (FsckReport, error) {
	const op = "fsck"
	if ctx == nil {
		return FsckReport{}, errNilContext(op)
	}
	run, err := p.runFsck(ctx, op)
	return run.report, err
}

// runFsck scans and checks the namespace, partition by partition; Repair reads what the scans saw
// (pins, orphaned keys), by partition.
func (p *Provider) runFsck(ctx context.Context, op string) (*fsckRun, error) {
	run := &fsckRun{parts: make([]*fsck, p.keys.Partitions())}
	for part := range run.parts {
		f := &fsck{p: p, part: part, prefix: p.keys.Prefix(part), inst: map[string]*fsckInst{}, items: map[string]bool{}}
		run.parts[part] = f
		if err := f.scanKeys(ctx); err != nil {
			return run, p.mapErr(op, err)
		}
		if err := f.check(ctx); err != nil {
			return run, p.mapErr(op, err)
		}
		r := &run.report
		r.Keys, r.Instances, r.Items = r.Keys+f.report.Keys, r.Instances+f.report.Instances, r.Items+f.report.Items
		r.Violations = append(r.Violations, f.report.Violations...)
	}
	if p.keys.Partitions() > 1 {
		v, err := p.fsckOutboxSeqs(ctx)
		if err != nil {
			return run, p.mapErr(op, err)
		}
		run.report.Violations = append(run.report.Violations, v...)
		if v, err = p.fsckInboxMarks(ctx); err != nil {
			return run, p.mapErr(op, err)
		}
		run.report.Violations = append(run.report.Violations, v...)
	}
	if p.keys.Partitions() > 1 {
		v, err := p.fsckRoot(ctx)
		if err != nil {
			return run, p.mapErr(op, err)
		}
		run.report.Violations = append(run.report.Violations, v...)
	}
	return run, nil
}

// fsckOutboxSeqs checks that each partition's outbox sequence for a destination (ob:seq) is at or
// above what the destination applied of it (ib:hwm): else ob_apply skips the next entries as
// applied before, and the messages they carry are lost [outbox_seq_behind]. The mark is read
// before the sequence (both only grow), so a violation is real.
func (p *Provider) fsckOutboxSeqs(ctx context.Context) ([]FsckViolation, error) {
	var out []FsckViolation
	n := p.keys.Partitions()
	for dest := range n {
		hwm, err := p.rdb.HGetAll(ctx, p.keys.Prefix(dest)+"ib:hwm").Result()
		if err != nil {
			return nil, err
		}
		for src, mark := range hwm {
			s, err := strconv.Atoi(src)
			if err != nil || s < 0 || s >= n {
				continue
			}
			m, _ := strconv.ParseInt(mark, 10, 64)
			seq, err := p.rdb.HGet(ctx, p.keys.Prefix(s)+"ob:seq", strconv.Itoa(dest)).Int64()
			if err != nil && err != redis.Nil {
				return nil, err
			}
			if seq < m {
				out = append(out, FsckViolation{Code: "outbox_seq_behind", Subject: strconv.Itoa(dest), Partition: s,
					Detail: fmt.Sprintf("%sob:seq holds %d for partition %d, which applied up to %d: its next entries would be skipped as applied before",
						p.keys.Prefix(s), seq, dest, m)})
			}
		}
	}
	return out, nil
}

// appliedAtLeast is how much of source's entries for dest dest must have applied: the entries
// below the head of the outbox were trimmed, and an entry is trimmed only once applied; an empty
// outbox was applied up to its sequence (ob:seq).
func (p *Provider) appliedAtLeast(ctx context.Context, source, dest int) (int64, error) {
	pre, d := p.keys.Prefix(source), strconv.Itoa(dest)
	seq, err := p.rdb.HGet(ctx, pre+"ob:seq", d).Int64()
	if err == redis.Nil {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	head, err := p.rdb.LIndex(ctx, pre+"ob:"+d, 0).Result()
	if err == redis.Nil {
		return seq, nil
	} else if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(head, " ")
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, nil // an entry that does not parse: ob_apply reports it
	}
	return n - 1, nil
}

// fsckInboxMarks checks the other side of fsckOutboxSeqs: each partition's mark of what it applied
// from a source (ib:hwm) is at or above what the source trimmed (appliedAtLeast). Below it, the
// source's next entry follows a gap, which ob_apply never fills: the messages wait in the outbox
// for ever [inbox_mark_behind]. The source is read before the mark (both only grow), so a
// violation is real.
func (p *Provider) fsckInboxMarks(ctx context.Context) ([]FsckViolation, error) {
	var out []FsckViolation
	n := p.keys.Partitions()
	for src := range n {
		for dest := range n {
			if dest == src {
				continue
			}
			want, err := p.appliedAtLeast(ctx, src, dest)
			if err != nil || want == 0 {
				if err != nil {
					return nil, err
				}
				continue
			}
			m, err := p.rdb.HGet(ctx, p.keys.Prefix(dest)+"ib:hwm", strconv.Itoa(src)).Int64()
			if err != nil && err != redis.Nil {
				return nil, err
			}
			if m < want {
				out = append(out, FsckViolation{Code: "inbox_mark_behind", Subject: strconv.Itoa(src), Partition: dest,
					Detail: fmt.Sprintf("%sib:hwm holds %d for partition %d, which trimmed its entries up to %d: its next entries follow a gap and are never applied",
						p.keys.Prefix(dest), m, src, want)})
			}
		}
	}
	return out, nil
}

// fsckRun is a check of every partition.
type fsckRun struct {
	parts  []*fsck
	report FsckReport
}

// fsckRoot checks the root record of a namespace of several partitions: format 2, the partition
// count and tags the provider uses, and the keys a format-1 process would use first made hashes.
func (p *Provider) fsckRoot(ctx context.Context) ([]FsckViolation, error) {
	var out []FsckViolation
	root, err := readRoot(ctx, p.rdb, p.keys)
	if err != nil {
		return nil, err
	}
	if root.format != strconv.Itoa(dxredis.Format) || root.partitions != p.keys.Partitions() || !slices.Equal(root.tags, p.keys.Tags()) {
		out = append(out, FsckViolation{Code: "format_record", Partition: -1, Detail: fmt.Sprintf("%s holds format %q, %d partitions, tags %q: want format %d, %d partitions, tags %q",
			p.keys.RootMeta(), root.format, root.partitions, root.tags, dxredis.Format, p.keys.Partitions(), p.keys.Tags())})
	}
	pre := strings.TrimSuffix(p.keys.RootMeta(), "meta")
	for _, k := range dxredis.Format1Keys {
		if t, err := p.rdb.Type(ctx, pre+k).Result(); err != nil {
			return nil, err
		} else if t != "hash" {
			out = append(out, FsckViolation{Code: "format_record", Partition: -1, Detail: pre + k + " is not the format-2 hash: a format-1 process would use it"})
		}
	}
	return out, nil
}

type fsck struct {
	p      *Provider
	part   int
	prefix string
	report FsckReport
	inst   map[string]*fsckInst // instance id -> what the key scan saw of it
	items  map[string]bool      // worker item numbers
	sets   []string             // index sets whose members are instance ids or item numbers
	pins   []string
	// outboxes are the destinations of this partition's outboxes (ob:<dest>); misplaced the ids
	// whose keys were seen in this partition although they live in another
	outboxes  []string
	misplaced map[string]bool
}

// fsckInst is what the key scan saw of an instance: whether one of the keys that make an
// instance exist (record, messages, lock, executions, a history) is there, and its other keys.
type fsckInst struct {
	anchored bool
	others   []string
	hexec    uint64 // the highest execution of a history key seen (FsckDeep)
}

// Per-instance key kinds (keys.go): the ones that anchor an instance, and the others.
var (
	fsckAnchors = []string{"i:", "q:", "lk:", "xs:", "wq:inst:"} // wq:inst: (worker items) may precede the instance
	fsckOthers  = []string{"cs:", "kv:", "kd:", "ch:", "chx:"}
	fsckPerExec = []string{"h:", "x:", "xo:", "he:"} // followed by "<execution>:<id>"
)

func (f *fsck) scanKeys(ctx context.Context) error {
	match := globQuote(f.prefix) + "*"
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			f.sawKey(iter.Val())
		}
		return iter.Err()
	}
	return forEachPrimary(ctx, f.p.rdb, scan)
}

// sawKey files one key of the namespace under its instance, item or index.
func (f *fsck) sawKey(key string) {
	f.report.Keys++
	rest := strings.TrimPrefix(key, f.prefix)
	switch {
	case strings.HasPrefix(rest, "wq:m:"):
		f.items[rest[len("wq:m:"):]] = true
		return
	case strings.HasPrefix(rest, "oq:ready:"):
		f.pins = append(f.pins, rest[len("oq:ready:"):])
		f.sets = append(f.sets, key)
		return
	case strings.HasPrefix(rest, "ob:") && strings.Trim(rest[len("ob:"):], "0123456789") == "" && len(rest) > len("ob:"):
		f.outboxes = append(f.outboxes, rest[len("ob:"):])
		return
	case isWorkReadySet(rest), strings.HasPrefix(rest, "idx:status:"),
		slices.Contains([]string{"oq:due", "oq:locked", "oq:orphans", "idx:instances", "idx:expiry", "idx:reap"}, rest):
		f.sets = append(f.sets, key)
		return
	}
	for _, kind := range fsckAnchors {
		if strings.HasPrefix(rest, kind) {
			id := rest[len(kind):]
			if kind != "wq:inst:" { // a session's items live in the session's partition
				f.place(id)
			}
			f.instance(id).anchor()
			return
		}
	}
	for _, kind := range fsckOthers {
		if strings.HasPrefix(rest, kind) {
			f.place(rest[len(kind):])
			f.instance(rest[len(kind):]).other(key)
			return
		}
	}
	for _, kind := range fsckPerExec {
		if strings.HasPrefix(rest, kind) {
			e, id, ok := strings.Cut(rest[len(kind):], ":")
			if ok && e != "" && strings.Trim(e, "0123456789") == "" {
				f.place(id)
				in := f.instance(id)
				if kind == "h:" {
					if n, err := strconv.ParseUint(e, 10, 64); err == nil && n > in.hexec {
						in.hexec = n
					}
					in.anchor() // a history: an execution exists
				} else {
					in.other(key)
				}
			}
			return
		}
	}
}

// place notes an instance key seen in this partition of an instance placed in another.
func (f *fsck) place(id string) {
	if f.p.keys.Partitions() > 1 && f.p.keys.PartitionOf(id) != f.part {
		if f.misplaced == nil {
			f.misplaced = map[string]bool{}
		}
		f.misplaced[id] = true
	}
}

func (f *fsck) instance(id string) *fsckInst {
	in := f.inst[id]
	if in == nil {
		in = &fsckInst{}
		f.inst[id] = in
	}
	return in
}

func (in *fsckInst) anchor() { in.anchored, in.others = true, nil }

func (in *fsckInst) other(key string) {
	if !in.anchored {
		in.others = append(in.others, key)
	}
}

// check walks the index sets for ids the key scan did not see (entries left behind), then checks
// every instance and item, and the namespace-wide invariants.
func (f *fsck) check(ctx context.Context) error {
	for _, set := range f.sets {
		rest := strings.TrimPrefix(set, f.prefix)
		isItems := strings.HasPrefix(rest, "wq:")
		var ready []string // members of a worker set: an item's tag (or session) names its set
		if err := f.members(ctx, set, func(m string) {
			if isItems {
				f.items[m] = true
				if isWorkReadySet(rest) {
					ready = append(ready, m)
				}
			} else if _, ok := f.inst[m]; !ok {
				f.inst[m] = &fsckInst{anchored: true} // no keys of its own: the index entry is what is checked
			}
		}); err != nil {
			return err
		}
		// Entries of items that do not exist (a fetch would lock a ghost) or that belong in
		// another set. Checked here, per set, since nothing else says which set an item that is
		// gone was in.
		for i := 0; i < len(ready); i += fsckBatch {
			if err := f.call(ctx, "wready", set, ready[i:min(i+fsckBatch, len(ready))]); err != nil {
				return err
			}
		}
	}
	var batch []string
	flush := func(mode string) error {
		if len(batch) == 0 {
			return nil
		}
		err := f.call(ctx, mode, "", batch)
		batch = batch[:0]
		return err
	}
	for id, in := range f.inst {
		f.report.Instances++
		if batch = append(batch, id); len(batch) == fsckBatch {
			if err := flush("inst"); err != nil {
				return err
			}
		}
		if !in.anchored && len(in.others) > 0 {
			if err := f.call(ctx, "keys", id, in.others); err != nil {
				return err
			}
		}
	}
	if err := flush("inst"); err != nil {
		return err
	}
	for s := range f.items {
		f.report.Items++
		if batch = append(batch, s); len(batch) == fsckBatch {
			if err := flush("item"); err != nil {
				return err
			}
		}
	}
	if err := flush("item"); err != nil {
		return err
	}
	for id := range f.misplaced {
		f.report.Violations = append(f.report.Violations, FsckViolation{Code: "wrong_partition", Subject: id, Partition: f.part,
			Detail: fmt.Sprintf("keys of the instance are in partition %d (%s), but it lives in partition %d: no script of it reads them there",
				f.part, f.prefix, f.p.keys.PartitionOf(id))})
	}
	if len(f.outboxes) > 0 {
		if err := f.call(ctx, "outbox", "", f.outboxes); err != nil {
			return err
		}
	}
	// The format record is checked once the namespace holds anything (the first write makes it).
	hasData := "0"
	if f.report.Keys > 0 {
		hasData = "1"
	}
	return f.call(ctx, "global", hasData, f.pins)
}

// members calls fn with every member of the sorted set or set key, page by page.
func (f *fsck) members(ctx context.Context, key string, fn func(string)) error {
	typ, err := f.p.rdb.Type(ctx, key).Result()
	if err != nil {
		return err
	}
	var iter *redis.ScanIterator
	switch typ {
	case "zset":
		iter = f.p.rdb.ZScan(ctx, key, 0, "", 500).Iterator()
	case "set":
		iter = f.p.rdb.SScan(ctx, key, 0, "", 500).Iterator()
	default:
		return nil // gone since the key scan, or not an index
	}
	for i := 0; iter.Next(ctx); i++ {
		if typ == "zset" && i%2 == 1 {
			continue // ZSCAN returns member, score pairs
		}
		fn(iter.Val())
	}
	return iter.Err()
}

// call runs one admin_fsck batch and files its violations.
func (f *fsck) call(ctx context.Context, mode, subject string, vals []string) error {
	res, err := f.p.fsckCall(ctx, f.part, mode, subject, vals)
	if err != nil {
		return err
	}
	r := list(res)
	if len(r)%3 != 0 {
		return provider.NewPermanentError("fsck", "unexpected reply from admin_fsck")
	}
	for i := 0; i < len(r); i += 3 {
		f.report.Violations = append(f.report.Violations, FsckViolation{Code: str(r[i]), Subject: str(r[i+1]), Detail: str(r[i+2]), Partition: f.part})
	}
	return nil
}

// isWorkReadySet reports whether a key (after the prefix) is a worker set that lists items: a
// schedule wq:q:<tk>, wq:shold or a session's wq:sitems:<tk>:<sid>.
func isWorkReadySet(rest string) bool {
	return strings.HasPrefix(rest, "wq:q:") || strings.HasPrefix(rest, "wq:sitems:") || rest == "wq:shold" || rest == "wq:dead"
}

// workReadySets are the worker sets the key scan saw.
func (f *fsck) workReadySets() []string {
	var out []string
	for _, set := range f.sets {
		if isWorkReadySet(strings.TrimPrefix(set, f.prefix)) {
			out = append(out, set)
		}
	}
	return out
}
