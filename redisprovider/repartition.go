package redisprovider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// Re-partitioning (Migrate with MigrateOptions.Partitions; dxctl migrate --partitions) moves a
// namespace of P partitions to N, offline: its runtimes are stopped; from the plan on New refuses
// the namespace, and from the marks on (before anything moves) every write script does (the mark
// "migrating" in the format records, as a format migration sets it), until the last step. A script runs in one partition, so the keys
// move in steps driven from here, each idempotent, in this order:
//
//  1. Plan: refused (ErrNamespaceBusy, nothing written) while a lock is held, a session owned, a
//     fetcher registered as waiting, or an outbox holds entries after this run forwarded them;
//     refused (provider.ErrInvalidInput) when two worker items of the same id would meet in one
//     new partition, or a key of an unknown kind is found. Then the root record gets the plan
//     (the old and the new tags) and the mark, and every old partition the mark (admin_repart
//     'plan', 'mark'; a partition found busy then undoes them). The new partitions' tags are the
//     usual ones (keys.go, PartitionTags) but for tags the old partitions use, so that no new key
//     can be an old one. The Functions library is loaded again on every primary, so that no
//     process keeps a format check it cached before the mark (lib.lua, format_check).
//  2. Indexes: every index of an old partition is copied, member by member with its score, to the
//     same index of the partition each member moves to (instance ids by PartitionOf, session ids
//     by SessionPartition, worker items by their session or instance), then deleted; the worker
//     index of an instance (wq:inst) goes with its items, and where they leave the instance's
//     partition that partition notes where they went ("@<p>"). Keys only a running runtime uses
//     (wake lists, fetch gates, attempt replies, outbox counters) are deleted.
//  3. Keys: every key of an instance, worker item or session is copied (its value and TTL, in a
//     transaction) to its new partition, then deleted. A child's record gets pp (its parent's
//     partition) when the parent lives elsewhere and loses it otherwise; a children set gets its
//     chx (children elsewhere) rebuilt beside it; a moved item's tag key joins wq:tks there.
//  4. Records: each new partition's record (its enqueue sequence at least the greatest old one,
//     its chores time computed from its indexes), the root record's new count and tags, the old
//     records deleted, the marks removed, the root's last.
//
// A stop after any step (a crash, a kill) leaves the plan in the root record: running Migrate
// again finds it and goes on, repeating at most the step that was cut short (a copy overwrites
// what an earlier one wrote; a key already moved is not found under the old tags any more).

// repartBatch is the most keys one copy step moves (a variable for tests).
var repartBatch = 1000

// repartPage is the most index members one copy step reads.
const repartPage = 5000

// repart is one re-partitioning run.
type repart struct {
	p        *Provider
	from, to dxredis.Keyspace
	oldTag   map[string]int // old tag -> old partition
	root     string         // the root record's prefix, "{<ns>:0}:"
	steps    *stepBudget
	moved    struct{ instances, items, sessions, keys, members int }
}

// stepBudget counts the atomic steps that changed something; with a limit (tests), the step after
// the limit is not taken.
type stepBudget struct{ limit, done int }

func (b *stepBudget) next() error {
	if b.limit > 0 && b.done >= b.limit {
		return errMigrateStopped
	}
	return nil
}

// repartPlan is the plan the root record keeps while a namespace moves.
type repartPlan struct{ from, to []string }

// readPlan reads the root record's plan (nil: none).
func readPlan(ctx context.Context, c redis.Cmdable, keys dxredis.Keyspace) (*repartPlan, error) {
	v, err := c.HMGet(ctx, keys.RootMeta(), "repart_from", "repart_to").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	from, _ := v[0].(string)
	to, _ := v[1].(string)
	if from == "" || to == "" {
		return nil, nil
	}
	return &repartPlan{from: unbrace(from), to: unbrace(to)}, nil
}

func unbrace(tags string) []string {
	var out []string
	for _, t := range strings.Fields(tags) {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(t, "{"), "}"))
	}
	return out
}

func brace(tags []string) string {
	b := make([]string, len(tags))
	for i, t := range tags {
		b[i] = "{" + t + "}"
	}
	return strings.Join(b, " ")
}

// repartTags are the tags of n partitions of namespace ns that none of avoid is (see
// dxredis.PartitionTags: the smallest k whose slot lies in the partition's share of the slots).
func repartTags(ns string, n int, avoid []string) []string {
	if n == 1 {
		return []string{ns + ":0"}
	}
	tags := make([]string, n)
	for p := range n {
		lo, hi := p*dxredis.Slots/n, (p+1)*dxredis.Slots/n
		for k := 1; ; k++ {
			t := ns + ":" + strconv.Itoa(p) + "/" + strconv.Itoa(k)
			if s := dxredis.Slot(t); s >= lo && s < hi && !slices.Contains(avoid, t) {
				tags[p] = t
				break
			}
		}
	}
	return tags
}

// repartition moves the namespace to n partitions (0: finish a re-partitioning under way, else
// nothing), adding what it did to rep.
func (p *Provider) repartition(ctx context.Context, n int, steps *stepBudget, rep *MigrateReport) error {
	const op = "migrate"
	plan, err := readPlan(ctx, p.rdb, p.keys)
	if err != nil {
		return p.mapErr(op, err)
	}
	base, _ := dxredis.NewKeyspace(p.keys.Namespace())
	if plan == nil {
		if n == 0 || n == p.keys.Partitions() {
			rep.FromPartitions, rep.ToPartitions = p.keys.Partitions(), p.keys.Partitions()
			return nil
		}
		plan = &repartPlan{from: p.keys.Tags(), to: repartTags(p.keys.Namespace(), n, p.keys.Tags())}
	} else if n != 0 && n != len(plan.to) {
		return invalid(op, "namespace %q is being re-partitioned from %d to %d partitions: run migrate with --partitions %d to finish that first",
			p.keys.Namespace(), len(plan.from), len(plan.to), len(plan.to))
	}
	r := &repart{p: p, root: strings.TrimSuffix(base.RootMeta(), "meta"), steps: steps, oldTag: map[string]int{}}
	if r.from, err = base.WithTags(plan.from); err == nil {
		r.to, err = base.WithTags(plan.to)
	}
	if err != nil {
		return p.mapErr(op, fmt.Errorf("dxredis: the re-partitioning plan in %s: %w", base.RootMeta(), err))
	}
	for i, t := range plan.from {
		r.oldTag[t] = i
	}
	rep.FromPartitions, rep.ToPartitions = r.from.Partitions(), r.to.Partitions()
	started, err := r.begin(ctx)
	if err != nil {
		return err
	}
	if started {
		rep.Steps = append(rep.Steps, fmt.Sprintf("plan: %d to %d partitions", r.from.Partitions(), r.to.Partitions()))
	}
	if err := resetFormatChecks(ctx, p.rdb); err != nil {
		return p.mapErr(op, fmt.Errorf("loading the Functions library again (so that no process keeps a format check from before the mark): %w", err))
	}
	if err := r.scan(ctx, r.moveIndex); err != nil {
		return err
	}
	if err := r.scan(ctx, r.moveKeys); err != nil {
		return err
	}
	if r.moved.keys+r.moved.members > 0 {
		rep.Steps = append(rep.Steps, fmt.Sprintf("moved %d instances, %d worker items, %d sessions (%d keys, %d index entries)",
			r.moved.instances, r.moved.items, r.moved.sessions, r.moved.keys, r.moved.members))
	}
	done, err := r.finish(ctx)
	if done {
		rep.Steps = append(rep.Steps, "records")
	}
	return err
}

// run runs admin_repart's step at prefix pre; a step that writes counts against the budget.
func (r *repart) run(ctx context.Context, pre string, writes bool, pairs ...string) (any, error) {
	const op = "migrate"
	if writes {
		if err := r.steps.next(); err != nil {
			return nil, err
		}
	}
	args, err := argsOf(op, luascripts.AdminRepart, pairs...)
	if err != nil {
		return nil, err
	}
	res, err := r.p.callKeys(ctx, op, luascripts.AdminRepart.Op, []string{pre + "meta"}, append([]any{pre}, args...))
	if err != nil {
		return nil, r.p.mapErr(op, err)
	}
	if writes {
		r.steps.done++
	}
	return res, nil
}

// begin records the plan and marks the old partitions, after the checks (see the file comment).
// It reports whether it did (false: a plan was there already).
func (r *repart) begin(ctx context.Context) (bool, error) {
	const op = "migrate"
	if p, err := readPlan(ctx, r.p.rdb, r.p.keys); err != nil || p != nil {
		return false, r.p.mapErr(op, err)
	}
	if r.from.Partitions() > 1 {
		// Entries a stopped process left in the outboxes: delivered first.
		for part := range r.p.keys.Partitions() {
			if err := r.p.forwardOlder(ctx, part, 0); err != nil {
				return false, err
			}
		}
	}
	for part := range r.from.Partitions() {
		why, err := r.run(ctx, r.from.Prefix(part), false, "step", "check")
		if err != nil {
			return false, err
		}
		if s := str(why); s != "" {
			return false, fmt.Errorf("%w: partition %d: %s: stop every runtime that uses the namespace, then run dxctl migrate again", ErrNamespaceBusy, part, s)
		}
	}
	if err := r.check(ctx); err != nil {
		return false, err
	}
	res, err := r.run(ctx, r.root, true, "step", "plan", "n", "0", "tags", brace(r.from.Tags()), "to", brace(r.to.Tags()))
	if err != nil {
		return false, err
	}
	if got := list(res); len(got) != 2 || str(got[0]) != brace(r.from.Tags()) || str(got[1]) != brace(r.to.Tags()) {
		return false, invalid(op, "another dxctl migrate began moving namespace %q meanwhile: run migrate again (without --partitions) to finish its move", r.p.keys.Namespace())
	}
	for part := range r.from.Partitions() {
		why, err := r.run(ctx, r.from.Prefix(part), true, "step", "mark")
		if err != nil {
			return true, err
		}
		if s := str(why); s != "" {
			// A runtime started between the check and the mark: undo, as if refused at the check.
			for q := range r.from.Partitions() {
				if _, err := r.run(ctx, r.from.Prefix(q), false, "step", "unmark"); err != nil {
					return true, err
				}
			}
			if _, err := r.run(ctx, r.root, false, "step", "unmark"); err != nil {
				return true, err
			}
			return false, fmt.Errorf("%w: partition %d: %s: stop every runtime that uses the namespace, then run dxctl migrate again", ErrNamespaceBusy, part, s)
		}
	}
	return true, nil
}

// resetFormatChecks loads every dxredis Functions library again on every primary: a library's
// load keeps the format checks it passed (lib.lua, format_check), which a mark set afterwards
// must not be hidden by. Servers without Functions run the scripts as EVAL, which check every
// call.
func resetFormatChecks(ctx context.Context, c redis.UniversalClient) error {
	return eachPrimary(ctx, c, func(n *redis.Client) error {
		libs, err := n.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "dxredis_*", WithCode: true}).Result()
		if err != nil {
			if strings.Contains(strings.ToLower(err.Error()), "unknown command") {
				return nil
			}
			return err
		}
		for _, l := range libs {
			if err := n.FunctionLoadReplace(ctx, l.Code).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachPrimary runs fn on the server, or on each primary of a cluster, one after the other.
func eachPrimary(ctx context.Context, c redis.UniversalClient, fn func(*redis.Client) error) error {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		if rc, ok := c.(*redis.Client); ok {
			return fn(rc)
		}
		return fmt.Errorf("dxredis: a %T is neither a client nor a cluster client", c)
	}
	var nodes []*redis.Client
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, n)
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

// What a key of an old partition is (classify).
type keyRole uint8

const (
	roleUnknown  keyRole = iota
	roleKeep             // the format record; at the root's prefix the format-1 guards
	roleDrop             // rebuilt elsewhere, or only used while runtimes run
	roleOutbox           // ob:<d>: empty once forwarded
	roleByInst           // an index of instance ids
	roleByItem           // an index of worker item ids
	roleBySess           // an index of session ids
	roleWorkInst         // wq:inst:<instance>
	roleInst             // a key of one instance
	roleItem             // a worker item
	roleSess             // a key of one session
)

// classify says what the key rest (after its partition's prefix) is and whose it is: the
// instance, item or session id for roleInst, roleItem, roleSess and roleWorkInst (keys.go,
// keys_worker.go).
func classify(rest string, atRoot bool) (keyRole, string) {
	switch rest {
	case "meta":
		return roleKeep, ""
	case "seq", "oq:next", "wq:next", "oq:orphans": // dxredis.Format1Keys
		if atRoot {
			return roleKeep, ""
		}
		return roleDrop, ""
	case "oq:pins", "oq:gate", "chores", "wake:orch", "wake:filters", "wq:waiting", "ob:seq", "ob:dirty", "ib:hwm", "wq:tks", "stats", "caps":
		return roleDrop, ""
	case "oq:due", "oq:locked", "oq:parked", "oq:dead", "idx:instances", "idx:expiry", "idx:reap":
		return roleByInst, ""
	case "wq:shold", "wq:dead":
		return roleByItem, ""
	case "wq:sowned", "wq:sidle", "wq:scount":
		return roleBySess, ""
	}
	for _, d := range []string{"wake:orch:f:", "wake:x:", "att:", "wq:wake:", "chx:", "cap:run:", "cap:rate:"} {
		if strings.HasPrefix(rest, d) {
			return roleDrop, ""
		}
	}
	if d, ok := strings.CutPrefix(rest, "ob:"); ok && d != "" && strings.Trim(d, "0123456789") == "" {
		return roleOutbox, ""
	}
	for _, x := range []string{"oq:ready:", "idx:status:"} {
		if strings.HasPrefix(rest, x) {
			return roleByInst, ""
		}
	}
	if strings.HasPrefix(rest, "wq:q:") {
		return roleByItem, ""
	}
	for _, x := range []string{"wq:sfree:", "wq:sown:", "wq:owner:"} {
		if strings.HasPrefix(rest, x) {
			return roleBySess, ""
		}
	}
	if id, ok := strings.CutPrefix(rest, "wq:inst:"); ok {
		return roleWorkInst, id
	}
	if id, ok := strings.CutPrefix(rest, "wq:m:"); ok {
		return roleItem, id
	}
	for _, x := range []string{"wq:sess:", "wq:stags:"} {
		if sid, ok := strings.CutPrefix(rest, x); ok {
			return roleSess, sid
		}
	}
	if tail, ok := strings.CutPrefix(rest, "wq:sitems:"); ok {
		// "<tk>:<sid>", the tag key "-" or "<byte length>:<tag>" (dxredis.WorkTagKey).
		if sid, ok := strings.CutPrefix(tail, "-:"); ok {
			return roleSess, sid
		}
		if l, after, ok := strings.Cut(tail, ":"); ok {
			if n, err := strconv.Atoi(l); err == nil && n >= 0 && len(after) > n && after[n] == ':' {
				return roleSess, after[n+1:]
			}
		}
		return roleUnknown, ""
	}
	for _, x := range []string{"i:", "xs:", "q:", "lk:", "cs:", "kv:", "kd:", "ch:"} {
		if id, ok := strings.CutPrefix(rest, x); ok {
			return roleInst, id
		}
	}
	for _, x := range []string{"x:", "xo:", "h:", "he:"} {
		if tail, ok := strings.CutPrefix(rest, x); ok {
			if e, id, ok := strings.Cut(tail, ":"); ok && e != "" && strings.Trim(e, "0123456789") == "" {
				return roleInst, id
			}
		}
	}
	return roleUnknown, ""
}

// oldKey is a key of an old partition.
type oldKey struct {
	key, rest string
	part      int
}

// scan walks the keys of the old partitions (every primary of a cluster, one after the other) and
// hands them to fn in batches of at most repartBatch.
func (r *repart) scan(ctx context.Context, fn func(context.Context, []oldKey) error) error {
	ns := r.from.Namespace()
	match := globQuote("{"+ns+":") + "*" + globQuote("}:") + "*"
	err := eachPrimary(ctx, r.p.rdb, func(n *redis.Client) error {
		var batch []oldKey
		iter := n.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			end := strings.Index(k, "}:")
			if end < 0 {
				continue
			}
			part, ok := r.oldTag[k[1:end]]
			if !ok {
				continue
			}
			if batch = append(batch, oldKey{key: k, rest: k[end+2:], part: part}); len(batch) == repartBatch {
				if err := fn(ctx, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if len(batch) > 0 {
			return fn(ctx, batch)
		}
		return nil
	})
	return r.fail(err)
}

// fail maps a Redis error to a provider error; the stop of a test, a busy namespace and provider
// errors stay as they are.
func (r *repart) fail(err error) error {
	var pe *provider.ProviderError
	if err == nil || errors.As(err, &pe) || errors.Is(err, errMigrateStopped) || errors.Is(err, ErrNamespaceBusy) {
		return err
	}
	return r.p.mapErr("migrate", err)
}

// itemHomes reads where worker items of an old partition move: their session's partition, else
// their instance's (-1 for an item that does not exist).
func (r *repart) itemHomes(ctx context.Context, part int, ids []string) ([]int, error) {
	pipe := r.p.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, r.from.Prefix(part)+"wq:m:"+id, "s", "i")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]int, len(ids))
	for i, c := range cmds {
		v := c.Val()
		sid, _ := v[0].(string)
		inst, ok := v[1].(string)
		switch {
		case !ok:
			out[i] = -1
		case sid != "":
			out[i] = r.to.SessionPartition(sid)
		default:
			out[i] = r.to.PartitionOf(inst)
		}
	}
	return out, nil
}

// check refuses (before the plan: nothing written) a namespace with a key this release does not
// know, or whose move would put two worker items of the same id (ids count per partition,
// dxredis.WorkItemID) in one new partition.
func (r *repart) check(ctx context.Context) error {
	type seen struct{ from int }
	at := map[int]map[string]seen{}
	return r.scan(ctx, func(ctx context.Context, batch []oldKey) error {
		byPart := map[int][]string{}
		for _, k := range batch {
			switch role, id := classify(k.rest, k.key == r.root+k.rest); role {
			case roleUnknown:
				return invalid("migrate", "key %s is of no kind this release knows (keys.go): not re-partitioning a namespace it might lose it in", k.key)
			case roleItem:
				byPart[k.part] = append(byPart[k.part], id)
			}
		}
		for part, ids := range byPart {
			homes, err := r.itemHomes(ctx, part, ids)
			if err != nil {
				return err
			}
			for i, q := range homes {
				if q < 0 {
					continue
				}
				if at[q] == nil {
					at[q] = map[string]seen{}
				}
				if s, dup := at[q][ids[i]]; dup && s.from != part {
					return invalid("migrate", "worker items %s of partitions %d and %d would both move to partition %d of %d, where an item id names one item: "+
						"let the runtimes finish their activities (or delete the instances), then run migrate again", ids[i], s.from, part, q, r.to.Partitions())
				}
				at[q][ids[i]] = seen{part}
			}
		}
		return nil
	})
}

// copyStep runs write, which queues the commands for partition q on tx(q), as one step: one
// transaction per partition written to (on a cluster a transaction cannot span slots; they run
// at once), or on one server one transaction for all.
func (r *repart) copyStep(ctx context.Context, write func(tx func(q int) redis.Pipeliner)) error {
	if err := r.steps.next(); err != nil {
		return err
	}
	_, cluster := r.p.rdb.(*redis.ClusterClient)
	pipes := map[int]redis.Pipeliner{}
	write(func(q int) redis.Pipeliner {
		if !cluster {
			q = 0
		}
		if pipes[q] == nil {
			pipes[q] = r.p.rdb.TxPipeline()
		}
		return pipes[q]
	})
	errs := make(chan error, len(pipes))
	for _, pipe := range pipes {
		go func() {
			_, err := pipe.Exec(ctx)
			errs <- err
		}()
	}
	var err error
	for range pipes {
		err = cmp.Or(err, <-errs)
	}
	if err != nil {
		return err
	}
	r.steps.done++
	return nil
}

// deleteStep deletes keys of the old partitions, as one step.
func (r *repart) deleteStep(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := r.steps.next(); err != nil {
		return err
	}
	pipe := r.p.rdb.Pipeline()
	for _, k := range keys {
		pipe.Del(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	r.steps.done++
	return nil
}

// moveIndex copies the indexes of a batch member by member to the partitions their members move
// to, deletes them, and deletes the keys that are dropped (see the file comment, 2).
func (r *repart) moveIndex(ctx context.Context, batch []oldKey) error {
	var drop []string
	for _, k := range batch {
		role, id := classify(k.rest, k.key == r.root+k.rest)
		switch role {
		case roleDrop:
			drop = append(drop, k.key)
		case roleOutbox:
			if n, err := r.p.rdb.LLen(ctx, k.key).Result(); err != nil {
				return err
			} else if n > 0 {
				return fmt.Errorf("%w: outbox %s holds %d entries: run migrate again once they are forwarded", ErrNamespaceBusy, k.key, n)
			}
		case roleByInst, roleByItem, roleBySess:
			if err := r.moveMembers(ctx, k, role); err != nil {
				return err
			}
		case roleWorkInst:
			if err := r.moveWorkInst(ctx, k, id); err != nil {
				return err
			}
		case roleUnknown:
			return invalid("migrate", "key %s is of no kind this release knows (keys.go)", k.key)
		}
	}
	return r.deleteStep(ctx, drop)
}

// moveMembers copies an index's members, page by page, to the same index in their new partitions,
// then deletes it.
func (r *repart) moveMembers(ctx context.Context, k oldKey, role keyRole) error {
	typ, err := r.p.rdb.Type(ctx, k.key).Result()
	if err != nil || typ == "none" {
		return err
	}
	pin, ready := strings.CutPrefix(k.rest, "oq:ready:")
	// move copies one page: members ids (with their scores, or hash values, in vals).
	move := func(ids []string, zs []redis.Z, vals []string) error {
		homes := make([]int, len(ids))
		switch role {
		case roleByInst:
			for i, id := range ids {
				homes[i] = r.to.PartitionOf(id)
			}
		case roleBySess:
			for i, id := range ids {
				homes[i] = r.to.SessionPartition(id)
			}
		default:
			if homes, err = r.itemHomes(ctx, k.part, ids); err != nil {
				return err
			}
		}
		to := map[int][]int{} // partition -> the members going there
		for i, q := range homes {
			if q >= 0 { // (-1: an entry of an item that does not exist, fsck's item_index_without_item)
				to[q] = append(to[q], i)
			}
		}
		r.moved.members += len(ids)
		return r.copyStep(ctx, func(tx func(int) redis.Pipeliner) {
			for q, idx := range to {
				key := r.to.Prefix(q) + k.rest
				for c := 0; c < len(idx); c += 1000 {
					part := idx[c:min(c+1000, len(idx))]
					args := make([]any, 0, 2*len(part))
					switch typ {
					case "zset":
						z := make([]redis.Z, len(part))
						for j, i := range part {
							z[j] = zs[i]
						}
						tx(q).ZAdd(ctx, key, z...)
					case "set":
						for _, i := range part {
							args = append(args, ids[i])
						}
						tx(q).SAdd(ctx, key, args...)
					default:
						for _, i := range part {
							args = append(args, ids[i], vals[i])
						}
						tx(q).HSet(ctx, key, args...)
					}
				}
				if ready && pin != "-" {
					tx(q).SAdd(ctx, r.to.Prefix(q)+"oq:pins", pin)
				}
			}
		})
	}
	switch typ {
	case "zset":
		for off := int64(0); ; off += repartPage {
			zs, err := r.p.rdb.ZRangeWithScores(ctx, k.key, off, off+repartPage-1).Result()
			if err != nil {
				return err
			}
			ids := make([]string, len(zs))
			for i, z := range zs {
				ids[i] = z.Member.(string)
			}
			if len(ids) > 0 {
				if err := move(ids, zs, nil); err != nil {
					return err
				}
			}
			if len(zs) < repartPage {
				break
			}
		}
	case "set", "hash":
		for cursor := uint64(0); ; {
			var got []string
			if typ == "set" {
				got, cursor, err = r.p.rdb.SScan(ctx, k.key, cursor, "", repartPage).Result()
			} else {
				got, cursor, err = r.p.rdb.HScan(ctx, k.key, cursor, "", repartPage).Result()
			}
			if err != nil {
				return err
			}
			ids, vals := got, []string(nil)
			if typ == "hash" {
				ids = nil
				for i := 0; i+1 < len(got); i += 2 {
					ids, vals = append(ids, got[i]), append(vals, got[i+1])
				}
			}
			if len(ids) > 0 {
				if err := move(ids, nil, vals); err != nil {
					return err
				}
			}
			if cursor == 0 {
				break
			}
		}
	default:
		return invalid("migrate", "index %s is a %s, not a sorted set, set or hash (keys.go)", k.key, typ)
	}
	return r.deleteStep(ctx, []string{k.key})
}

// moveWorkInst moves an instance's worker index entries: each activity's list of items to the
// partition its items move to, and a note "@<p>" in the instance's partition where that is
// another. Notes of the old layout are dropped (the lists say where the items are).
func (r *repart) moveWorkInst(ctx context.Context, k oldKey, inst string) error {
	all, err := r.p.rdb.HGetAll(ctx, k.key).Result()
	if err != nil {
		return err
	}
	var fields, firsts []string
	for f, v := range all {
		if ids := strings.Fields(v); len(ids) > 0 && !strings.HasPrefix(v, "@") {
			fields, firsts = append(fields, f), append(firsts, ids[0])
		}
	}
	homes, err := r.itemHomes(ctx, k.part, firsts)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		own := r.to.PartitionOf(inst)
		err := r.copyStep(ctx, func(tx func(int) redis.Pipeliner) {
			for i, f := range fields {
				q := homes[i]
				if q < 0 {
					q = own // items gone: the entry stays with the instance, as it was
				}
				tx(q).HSet(ctx, r.to.Prefix(q)+k.rest, f, all[f])
				if q != own {
					tx(own).HSet(ctx, r.to.Prefix(own)+k.rest, f, "@"+strconv.Itoa(q))
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return r.deleteStep(ctx, []string{k.key})
}

// keyValue is a key's value and TTL as read for a copy.
type keyValue struct {
	typ  string
	str  string
	hash map[string]string
	set  []string
	zset []redis.Z
	ttl  time.Duration // 0: none
}

// keyType is the Redis type of a key of an instance, worker item or session (keys.go,
// keys_worker.go), by its kind.
func keyType(rest string) string {
	for _, x := range []string{"xs:", "wq:sitems:"} {
		if strings.HasPrefix(rest, x) {
			return "zset"
		}
	}
	for _, x := range []string{"xo:", "h:"} {
		if strings.HasPrefix(rest, x) {
			return "string"
		}
	}
	for _, x := range []string{"he:", "ch:", "wq:stags:"} {
		if strings.HasPrefix(rest, x) {
			return "set"
		}
	}
	return "hash" // i: x: q: lk: cs: kv: kd: wq:m: wq:sess:
}

// readValues reads keys' values and TTLs (one round trip). A key gone meanwhile reads as type
// "none"; one of another type than its kind's fails the read (WRONGTYPE).
func (r *repart) readValues(ctx context.Context, keys []oldKey) ([]keyValue, error) {
	out := make([]keyValue, len(keys))
	var cmds []func()
	pipe := r.p.rdb.Pipeline()
	for i, k := range keys {
		v := &out[i]
		v.typ = keyType(k.rest)
		ttl := pipe.PTTL(ctx, k.key)
		switch v.typ {
		case "string":
			c := pipe.Get(ctx, k.key)
			cmds = append(cmds, func() { v.str = c.Val() })
		case "hash":
			c := pipe.HGetAll(ctx, k.key)
			cmds = append(cmds, func() { v.hash = c.Val() })
		case "set":
			c := pipe.SMembers(ctx, k.key)
			cmds = append(cmds, func() { v.set = c.Val() })
		case "zset":
			c := pipe.ZRangeWithScores(ctx, k.key, 0, -1)
			cmds = append(cmds, func() { v.zset = c.Val() })
		}
		cmds = append(cmds, func() {
			switch d := ttl.Val(); {
			case d == -2: // (go-redis keeps PTTL's -2, the key is gone, unscaled)
				v.typ = "none"
			case d > 0:
				v.ttl = d
			}
		})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for _, f := range cmds {
		f()
	}
	return out, nil
}

// writeValue queues the commands that make key hold v (whatever it held).
func writeValue(ctx context.Context, pipe redis.Pipeliner, key string, v keyValue) {
	if v.typ == "string" {
		pipe.Set(ctx, key, v.str, v.ttl) // (replaces the key, TTL included: one command)
		return
	}
	pipe.Del(ctx, key)
	const chunk = 1000
	switch v.typ {
	case "hash":
		args := make([]any, 0, 2*len(v.hash))
		for _, f := range slices.Sorted(maps.Keys(v.hash)) {
			args = append(args, f, v.hash[f])
		}
		for i := 0; i < len(args); i += 2 * chunk {
			pipe.HSet(ctx, key, args[i:min(i+2*chunk, len(args))]...)
		}
	case "set":
		for i := 0; i < len(v.set); i += chunk {
			m := make([]any, 0, chunk)
			for _, s := range v.set[i:min(i+chunk, len(v.set))] {
				m = append(m, s)
			}
			pipe.SAdd(ctx, key, m...)
		}
	case "zset":
		for i := 0; i < len(v.zset); i += chunk {
			pipe.ZAdd(ctx, key, v.zset[i:min(i+chunk, len(v.zset))]...)
		}
	}
	if v.ttl > 0 {
		pipe.PExpire(ctx, key, v.ttl)
	}
}

// moveKeys copies the keys of instances, worker items and sessions of a batch to their new
// partitions, with the bookkeeping the new placement needs, then deletes them (see the file
// comment, 3).
func (r *repart) moveKeys(ctx context.Context, batch []oldKey) error {
	var keys []oldKey
	var roles []keyRole
	var owners []string
	for _, k := range batch {
		switch role, id := classify(k.rest, k.key == r.root+k.rest); role {
		case roleInst, roleItem, roleSess:
			keys, roles, owners = append(keys, k), append(roles, role), append(owners, id)
		case roleKeep:
		case roleUnknown:
			return invalid("migrate", "key %s is of no kind this release knows (keys.go)", k.key)
		default: // an index or dropped key left by a pass cut short: the next run's index pass takes it
			return fmt.Errorf("dxredis: migrate: key %s was not moved by the index pass", k.key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	vals, err := r.readValues(ctx, keys)
	if err != nil {
		return err
	}
	multi := r.to.Partitions() > 1
	err = r.copyStep(ctx, func(tx func(int) redis.Pipeliner) {
		for i, k := range keys {
			v := vals[i]
			if v.typ == "none" {
				continue
			}
			var q int
			switch roles[i] {
			case roleInst:
				q = r.to.PartitionOf(owners[i])
				if strings.HasPrefix(k.rest, "i:") {
					r.moved.instances++
					if parent := v.hash["parent"]; multi && parent != "" && r.to.PartitionOf(parent) != q {
						v.hash["pp"] = strconv.Itoa(r.to.PartitionOf(parent))
					} else {
						delete(v.hash, "pp")
					}
				}
				if strings.HasPrefix(k.rest, "ch:") && multi {
					away := map[string]string{}
					for _, c := range v.set {
						if cp := r.to.PartitionOf(c); cp != q {
							away[c] = strconv.Itoa(cp)
						}
					}
					chx := keyValue{typ: "hash", hash: away}
					if len(away) == 0 {
						chx.typ = "none"
					}
					writeValue(ctx, tx(q), r.to.Prefix(q)+"chx:"+owners[i], chx)
				}
			case roleItem:
				r.moved.items++
				if sid := v.hash["s"]; sid != "" {
					q = r.to.SessionPartition(sid)
				} else {
					q = r.to.PartitionOf(v.hash["i"])
				}
				if tk := v.hash["t"]; tk != "" && tk != "-" {
					tx(q).SAdd(ctx, r.to.Prefix(q)+"wq:tks", tk)
				}
			case roleSess:
				if strings.HasPrefix(k.rest, "wq:sess:") {
					r.moved.sessions++
				}
				q = r.to.SessionPartition(owners[i])
			}
			r.moved.keys++
			writeValue(ctx, tx(q), r.to.Prefix(q)+k.rest, v)
		}
	})
	if err != nil {
		return err
	}
	return r.deleteStep(ctx, names)
}

// finish writes the records (see the file comment, 4). It reports whether it changed anything.
func (r *repart) finish(ctx context.Context) (bool, error) {
	const op = "migrate"
	before := r.steps.done
	root, err := r.p.rdb.HMGet(ctx, r.root+"meta", "partitions", "tags").Result()
	if err != nil {
		return false, r.p.mapErr(op, err)
	}
	n := strconv.Itoa(r.to.Partitions())
	switched := root[0] == n && (r.to.Partitions() == 1 || root[1] == brace(r.to.Tags()))
	if !switched {
		pipe := r.p.rdb.Pipeline()
		seqs := make([]*redis.StringCmd, r.from.Partitions())
		for part := range seqs {
			seqs[part] = pipe.HGet(ctx, r.from.Meta(part), "seq")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return false, r.p.mapErr(op, err)
		}
		var seq uint64
		for _, c := range seqs {
			if v, err := strconv.ParseUint(c.Val(), 10, 64); err == nil {
				seq = max(seq, v)
			}
		}
		for q := range r.to.Partitions() {
			if _, err := r.run(ctx, r.to.Prefix(q), true, "step", "part", "n", n, "tags", "{"+r.to.Tags()[q]+"}", "to", "", "seq", strconv.FormatUint(seq, 10)); err != nil {
				return false, err
			}
		}
		if _, err := r.run(ctx, r.root, true, "step", "switch", "n", n, "tags", brace(r.to.Tags())); err != nil {
			return false, err
		}
	}
	var old []string
	for part := range r.from.Partitions() {
		if r.from.Prefix(part) != r.root {
			old = append(old, r.from.Meta(part))
		}
	}
	pipe := r.p.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(old))
	for i, k := range old {
		exists[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, r.p.mapErr(op, err)
	}
	var left []string
	for i, c := range exists {
		if c.Val() > 0 {
			left = append(left, old[i])
		}
	}
	if err := r.deleteStep(ctx, left); err != nil {
		return false, r.fail(err)
	}
	if r.to.Partitions() > 1 {
		for q := range r.to.Partitions() {
			if _, err := r.run(ctx, r.to.Prefix(q), true, "step", "open"); err != nil {
				return false, err
			}
		}
	}
	_, err = r.run(ctx, r.root, true, "step", "done")
	return r.steps.done > before, err
}
