package dxredis

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The keyspace of one namespace. Every key starts with the partition's hash tag "{<ns>:<p>}:",
// so all keys of a partition live in one Redis Cluster slot and every script runs unchanged on a
// cluster. Per-instance keys end with the raw instance id, after a fixed type prefix (and, for
// per-execution keys, "<execution>:"), so no id — braces, colons, spaces, unicode, any length —
// can change the hash tag or collide with another key: the prefix before the id is fixed and the
// id is the whole remainder.
//
// Scripts build per-instance keys themselves (they discover instance ids inside Redis), with the
// helpers in scripts/lib.lua; TestLuaKeysMatchGo checks that both sides agree.
//
// Types (P = prefix, id = instance id, e = execution id, s = sequence number):
//
//	P meta                  HASH    format record: format partitions tags seq (the enqueue sequence, FIFO
//	                                order of both queues) [migrating]; see Meta
//	P seq, oq:next, wq:next, oq:orphans
//	                        HASH    {format: 2}: what format-1 code touches first, made unusable to it
//	                                (Format1Keys)
//	P oq:pins               SET     pinned pin keys that have a ready set ("-", no pinned version, is implied)
//	P oq:ready:<pin>        ZSET    unlocked instances with visible messages, score = oldest visible seq
//	P oq:due                ZSET    unlocked instances with delayed messages, score = next visible_at ms
//	P oq:locked             ZSET    locked instances, score = locked_until ms
//	P oq:gate               STRING  housekeeping gate: a time at or before every score of oq:locked, oq:due and chores
//	                                (99999999999999 when empty); fetches scan them only once it is due
//	P chores                STRING  earliest ms an index sweep (idx:expiry, oq:parked, idx:reap) may be due
//	P status                CHANNEL pub/sub: instance ids whose status finished or custom status changed
//	P wake:orch             LIST    wake tokens for long-polling orchestration fetchers without a filter
//	P wake:orch:f:<sha1>    LIST    wake tokens for fetchers with one capability filter (sha1 of its ranges)
//	P wake:filters          ZSET    filters of waiting orchestration fetchers ("*" none, else "lo hi lo hi..."
//	                                in pin keys), score = ms until which one may still be waiting
//	P oq:parked             ZSET    instances whose messages are parked orphans, score = their expiry ms
//	P oq:dead               ZSET    instances held as poison (orch_abandon with a "poison:" reason:
//	                                dx.Options.OnPoison), score = when held (ms); an entry whose q:<id>
//	                                h is gone is stale (listing drops it); work_dead 'oredrive' ends one
//	P att:<attempt>         STRING  reply of a write call that ran, kept 20 s (its retries return it)
//	P stats                 HASH    per-minute outcome counts: "<minute>:<kind>" -> count (minute = ms /
//	                                60000; kind oc/of orchestrations completed/failed, ac/af activities
//	                                completed/failed), t -> the minute of the last trim; counted by the
//	                                acks, 1440 minutes kept (lib.lua, stats_count; redisprovider,
//	                                OutcomeStats); dropped by dxctl migrate --partitions
//	P idx:instances         ZSET    instance id, score = created_at ms
//	P idx:expiry            ZSET    retained (settled) roots, score = when their keys expire
//	P idx:reap              SET     descendants of expired roots, deleted by the next fetches
//	P idx:status:<status>   ZSET    instance id by current status, score = ms it entered that status
//	P i:<id>                HASH    instance: name ver created updated parent (absent, with created
//	                                and updated, for an instance acked or appended without a name
//	                                and version: known, not created, in no index) open (direct
//	                                children whose subtree is not finished; retention) tag (current
//	                                execution's tag) kv ("1" once KV was written); and always its
//	                                current execution's record (one layout): exec status hn hb
//	                                (its history's events, bytes) hd ("1" while its event ids are
//	                                1..n, else "0") out ("<offset> <length>" of the output in the
//	                                history, "k" in xo:, "-" none) pink (the pinned version's
//	                                sortable key; absent: unpinned) xs (started; absent: created)
//	                                done (completed; absent while unfinished, and while the status
//	                                is terminal: updated); see scripts/lib.lua, Executions
//	P xs:<id>               ZSET    execution ids of the instance (score = id); absent while the
//	                                instance has one execution
//	P x:<e>:<id>            HASH    record of an execution that is not the current one (older
//	                                executions, appended ones): status started completed pink out
//	                                hn hd
//	P xo:<e>:<id>           STRING  an execution's output when its history does not hold it
//	P h:<e>:<id>            STRING  history: event JSON lines ("<json>\n"), appended, never rewritten
//	                                (a finished one of at most 4 KiB is rewritten once, exactly);
//	                                instance_id, execution_id, a null source_event_id, duroxide_version
//	                                0.1.30 and null parents of OrchestrationStarted are left out
//	P he:<e>:<id>           SET     event ids of the history, once they are not exactly 1..n in order
//	P q:<id>                HASH    orchestrator messages: m<s> JSON, t<s> "<code><ms>": the type code (S
//	                                start, C continue-as-new, Q queue message, O other) and the ms the
//	                                message becomes visible, a<s> deliveries that ended without an ack
//	                                (absent 0; a held lock's is not counted yet), h "<ms> <reason>"
//	                                while the runtime holds the instance (its next ack deletes it with
//	                                the messages)
//	P lk:<id>               HASH    instance lock: tok ("<nonce>.<id>") until seqs inst ("1": the instance
//	                                was created at fetch) more ("1": other messages pending) tag
//	P cs:<id>               HASH    custom status: v (version) s (value) n ("1" when cleared)
//	P kv:<id>               HASH    KV store (earlier executions): key -> "<ms>|<value>"
//	P kd:<id>               HASH    KV delta (current execution): key -> "s<ms>|<value>" or "t" (tombstone)
//	P ch:<id>               SET     direct children (sub-orchestrations) of the instance
//
// A namespace of several partitions (see Keyspace, "Partitions") also has:
//
//	{<ns>:0}:meta           HASH    the root record: format partitions tags (every partition's tag,
//	                                braced, space-separated); see RootMeta; while dxctl migrate
//	                                --partitions moves the namespace also migrating repart_from
//	                                repart_to (the old and the new tags: redisprovider, repartition.go)
//	P chx:<id>              HASH    children of the instance that live in other partitions: child ->
//	                                its partition (written when the child is created, see ob_apply 'c')
//	P i:<id> field pp       the partition of the instance's parent, when it is not this one
//	P wq:inst:<id> "<e>:<a>" -> "@<p>"  an activity whose item went to session partition p
//	P ob:<d>                LIST    outbox for partition d: entries "<seq> <kind> <fields>" (lib.lua,
//	                                ob_put), appended in the script that commits them
//	P ob:seq                HASH    d -> the last sequence number written to ob:<d>
//	P ob:dirty              ZSET    d -> when ob:<d>'s oldest unforwarded entry was written (ms)
//	P ib:hwm                HASH    source partition -> the last of its entries applied here
//	P slot:probe            never written: every script on a cluster node reads it first (lib.lua, dx_setup), so that
//	                                a script on a slot in migration fails before its first write
//	P repl:mark             STRING  written (10 s TTL) by forwarding with WaitReplicas right before
//	                                WAIT, so that WAIT covers other connections' writes
//	P wake:x:<process>      LIST    a process's control list: pushed to re-arm its partition watcher
//
// # Outboxes
//
// Every script stays inside one partition. What a script must change in another partition (a
// message for an instance there: a child's start, a completion for a parent, a cancellation, an
// event or queue message between orchestrations, a detached start; a session item for a session
// homed there and its cancellation; a parent's bookkeeping of a child: children set, retention's
// open count and reaping) is appended to this partition's outbox for that partition, in the same
// script, so it commits with the rest. redisprovider forwards it right after the script returns
// (ob_take here, ob_apply there, ob_trim here); if the writer stops first, the sweeps of every
// process that fetches forward it. The destination applies each source's entries once and in order
// (their sequence numbers against ib:hwm), so a forward repeated by a crash or raced by another
// process changes nothing, and messages between two partitions keep their order.
//
// # Slot migrations
//
// A partition is one slot, so moving it to another primary (redis-cli --cluster reshard or
// rebalance) moves all its keys, a batch per MIGRATE. Meanwhile a script could find some of its
// keys gone (Redis fails the script at that key, after the writes it made) or, on the importing
// node, miss the keys still on the other. So every script on a cluster node (elsewhere no slot
// moves, and the probe is skipped) reads two keys first, the meta key and slot:probe, which never
// exists (lib.lua, dx_setup): on a slot in migration that read fails
// before anything is written, on either node, and redisprovider retries the call until the slot
// has moved (provider.go, callMoving). No script runs on a half-moved partition.
//
// Worker-queue keys are listed in keys_worker.go.
//
// # Invariants
//
// What every script leaves true when it returns (so at any instant a script can observe), and
// what redisprovider's Fsck (dxctl fsck) checks, one instance or worker item per atomic step; the
// code it reports is in brackets:
//
//   - A lock lk:<id> is in oq:locked scored at its until, and oq:locked lists nothing else
//     [lock_unindexed, locked_without_lock, lock_expiry_mismatch]; the messages a lock covers
//     exist [lock_message_missing].
//   - q:<id> holds a body m<s> exactly for the sequence numbers it holds a t<s> for
//     [message_without_body, message_without_visibility].
//   - An instance with messages is locked, ready (in oq:ready:<its pin key>), delayed (in
//     oq:due) or parked (in oq:parked) [messages_stranded]; it is in at most one ready set, the
//     one of its own pin key, and never while locked or without messages [ready_twice,
//     ready_wrong_pin, ready_while_locked, ready_without_messages, due_without_messages]; parked
//     messages belong to an instance without a record [orphan_with_record]; a ready set of a
//     pinned pin key is listed in oq:pins [pin_unlisted].
//   - An instance's current execution's record is in i:<id> with exec hn hb hd out, every other
//     execution listed in xs:<id> has a record x:<e>:<id> with hn hd out, and no record holds
//     pin (the layouts of older releases; dxctl migrate converts them) [record_layout].
//   - An instance record i:<id> with a name is in idx:instances and in idx:status:<its status>, in no other
//     status index [record_unlisted, status_unindexed, status_stale]; without a record, an id
//     stays in those indexes only while it is a retained root in idx:expiry, until the sweep
//     [listed_without_record, status_without_record].
//   - A record with a TTL (a retained root) is in idx:expiry [retained_unlisted]; its field open
//     counts its existing children (ch:<id>) that are not settled, and each names it as parent
//     [open_children_mismatch, child_parent_mismatch].
//   - Keys of an instance exist only with its record, messages, lock, execution set or a
//     history (or while it awaits the retention sweep or reaping) [orphaned_keys].
//   - Worker items: see keys_worker.go, "Invariants" [item_placement, item_lock_expiry_mismatch,
//     item_unlisted, item_tag_unlisted, item_index_without_item].
//   - The housekeeping gate oq:gate is at or before the earliest score of the sets it stands
//     for and before chores [gate_late]; chores is at or before the
//     first expiry of idx:expiry and oq:orphans, and due while idx:reap is not empty [chores_late].
//   - A namespace with data has its format record, format 2, and the format-1 keys as
//     hashes [format_record]; one of several partitions has its root record, with the count and
//     tags its providers use, and a record in every partition [format_record].
//   - An instance's keys exist only in its own partition (PartitionOf), but for the wq:inst entries
//     of its session items in their sessions' partitions [wrong_partition]; an outbox with entries
//     is listed in ob:dirty [outbox_unlisted].
//
//   - A partition's enqueue sequence (meta seq) is at or above every message and worker item
//     number in use [seq_behind]; a session with visible items is in its group index
//     [item_session_unindexed] and counted in wq:scount [session_uncounted]; an outbox's
//     sequence (ob:seq) is at or above the mark its destination applied (ib:hwm)
//     [outbox_seq_behind], and that mark at or above what the source trimmed from the outbox
//     [inbox_mark_behind].
//
// redisprovider's Repair (dxctl fsck --repair) fixes each violation it can tell the fix of from
// the other keys, one script per repair (scripts/admin_repair.lua, one function per code).
//
// FsckDeep (dxctl fsck --deep) also reads the histories: a record counts exactly the events its
// history holds [history_missing, history_short]; a history has its record [record_missing]; a
// terminal record's history ends with a terminal event [history_not_ended]; in a Running
// execution every activity, timer and sub-orchestration open in the history has what finishes it:
// a worker item, a TimerFired message, a child (or its start), a queued result, or an outbox
// entry carrying one [activity_lost, timer_lost, child_lost, child_result_lost]; a child is listed
// by its parent [child_unlisted]. RepairDeep rebuilds what the history determines
// (redisprovider/admin_fsck_deep.go; docs/operations.md, "fsck --deep").

var namespacePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// MaxPartitions is the most partitions a namespace may have.
const MaxPartitions = 256

// Keyspace names the keys of one namespace, split into its partitions.
//
// # Partitions
//
// A namespace has P partitions (1 to MaxPartitions), fixed when it is created and kept in its root
// format record (RootMeta). Each partition is one Redis Cluster slot: all its keys carry its hash
// tag, so every script runs in one partition, and a cluster spreads the partitions over its
// primaries. With P = 1 the one partition's tag is "<ns>:0", the layout of the releases before
// partitions. With P > 1 partition p's tag is "<ns>:<p>/<k>" for the smallest k >= 1 whose slot
// lies in the p-th 1/P of the slot range ([p*16384/P, (p+1)*16384/P), see PartitionTags), so that
// with a cluster's even slot layout each primary serves the same number of partitions; the tags
// are stored in the root record when the namespace is created and read from there afterwards. A
// namespace re-partitioned by dxctl migrate --partitions takes for each partition the smallest such
// k that its previous partitions did not use, so that no new key is an old one.
//
// Placement: an instance lives in partition PartitionOf(id) = FNV-1a 64 (the UTF-8 bytes of its
// placement key) mod P, where the placement key is the id up to its first "::sub::": duroxide
// names auto-numbered sub-orchestrations "<parent>::sub::<event id>", so a tree of them lives in
// its root's partition, while explicitly named children and detached orchestrations go by their
// own ids. A session's items live in PartitionOf(session id).
type Keyspace struct {
	namespace string
	tags      []string // the partitions' hash tags; nil: the one partition "<ns>:0"
}

// NewKeyspace validates the namespace (1-64 of A-Z a-z 0-9 . _ -) and returns its keyspace with
// one partition.
func NewKeyspace(namespace string) (Keyspace, error) {
	if !namespacePattern.MatchString(namespace) {
		return Keyspace{}, fmt.Errorf("namespace %q: want 1-64 characters of A-Z a-z 0-9 . _ -", namespace)
	}
	return Keyspace{namespace: namespace}, nil
}

// WithTags returns the keyspace with the given partition tags (as PartitionTags computes them, or
// as a namespace's root record stores them): one per partition.
func (k Keyspace) WithTags(tags []string) (Keyspace, error) {
	if len(tags) < 1 || len(tags) > MaxPartitions {
		return Keyspace{}, fmt.Errorf("namespace %q: %d partitions, want 1-%d", k.namespace, len(tags), MaxPartitions)
	}
	for i, t := range tags {
		if !validTag(k.namespace, i, len(tags), t) {
			return Keyspace{}, fmt.Errorf("namespace %q: partition %d's tag %q is not one of this namespace's", k.namespace, i, t)
		}
	}
	if len(tags) == 1 {
		tags = nil
	}
	k.tags = tags
	return k, nil
}

// validTag says whether t can be the tag of partition p of n of namespace ns.
func validTag(ns string, p, n int, t string) bool {
	if n == 1 {
		return t == ns+":0"
	}
	rest, ok := strings.CutPrefix(t, ns+":"+strconv.Itoa(p)+"/")
	if !ok {
		return false
	}
	k, err := strconv.Atoi(rest)
	return err == nil && k >= 1 && strconv.Itoa(k) == rest
}

// PartitionTags computes the hash tags of a namespace of n partitions (see Keyspace).
func PartitionTags(namespace string, n int) ([]string, error) {
	if n < 1 || n > MaxPartitions {
		return nil, fmt.Errorf("%d partitions: want 1-%d", n, MaxPartitions)
	}
	if n == 1 {
		return []string{namespace + ":0"}, nil
	}
	tags := make([]string, n)
	for p := range n {
		lo, hi := p*Slots/n, (p+1)*Slots/n
		for k := 1; ; k++ {
			t := namespace + ":" + strconv.Itoa(p) + "/" + strconv.Itoa(k)
			if s := Slot(t); s >= lo && s < hi {
				tags[p] = t
				break
			}
		}
	}
	return tags, nil
}

// Namespace returns the namespace name.
func (k Keyspace) Namespace() string { return k.namespace }

// Partitions is the namespace's partition count.
func (k Keyspace) Partitions() int { return max(1, len(k.tags)) }

// Tags returns the partitions' hash tags.
func (k Keyspace) Tags() []string {
	if k.tags == nil {
		return []string{k.namespace + ":0"}
	}
	return slices.Clone(k.tags)
}

// PartitionOf says which partition holds an instance (see Keyspace, Placement).
func (k Keyspace) PartitionOf(instance string) int {
	if k.tags == nil {
		return 0
	}
	if i := strings.Index(instance, "::sub::"); i >= 0 {
		instance = instance[:i]
	}
	return int(fnv1a64(instance) % uint64(len(k.tags)))
}

// SessionPartition says which partition holds a session's items and lock.
func (k Keyspace) SessionPartition(session string) int {
	if k.tags == nil {
		return 0
	}
	return int(fnv1a64(session) % uint64(len(k.tags)))
}

// fnv1a64 is the 64-bit FNV-1a hash of s's bytes.
func fnv1a64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Prefix is the common prefix (hash tag included) of every key of a partition.
func (k Keyspace) Prefix(partition int) string {
	if k.tags == nil {
		return "{" + k.namespace + ":0}:"
	}
	return "{" + k.tags[partition] + "}:"
}

// RootMeta is the namespace's root format record: with P = 1 partition 0's own record (Meta(0));
// with P > 1 a key of its own, under the tag "<ns>:0" that no partition then uses, holding the
// partition count and all the partitions' tags. It is what New reads first.
func (k Keyspace) RootMeta() string { return "{" + k.namespace + ":0}:meta" }

// Meta is a partition's format record (HASH): format ("2"), partitions ("1"), tags (the hash
// tags of the namespace's partitions, space-separated), seq (the enqueue sequence: FIFO order of
// both queues) and, while `dxctl migrate` converts the namespace, migrating (the format it moves
// to). The first write script of a new namespace writes it (lib.lua, format_check). Scripts take it
// as KEYS[1], so that cluster clients route each call to the partition's slot.
func (k Keyspace) Meta(partition int) string { return k.Prefix(partition) + "meta" }

// Format is the storage format this release reads and writes. Format 1 is the layout of the
// releases before it (no format record; its enqueue sequence was the STRING key "seq").
const Format = 2

// Format1Keys are the keys, relative to a partition's prefix, that a format-1 process reads or
// writes first in every call it makes (its sequence, its fetch gates, its orphan index). Format 2
// holds each as a HASH {format: 2} and never uses them otherwise, so that an older process fails
// with WRONGTYPE before it writes anything.
var Format1Keys = []string{"seq", "oq:next", "wq:next", "oq:orphans"}

// Attempt is the key a write call's script stores its reply under, so that retries of the call
// (same attempt id) return that reply instead of running it again. Scripts take it as KEYS[2].
func (k Keyspace) Attempt(partition int, attempt string) string {
	return k.Prefix(partition) + "att:" + attempt
}

// StatusChannel is the pub/sub channel orch_ack publishes an instance id on when the instance
// finishes (Completed or Failed) or its custom status changes (redisprovider's WatchStatus).
func (k Keyspace) StatusChannel(partition int) string { return k.Prefix(partition) + "status" }

// WakeOrch is the list orchestration fetchers without a capability filter block on.
func (k Keyspace) WakeOrch(partition int) string { return k.Prefix(partition) + "wake:orch" }

// WakeOrchFilter is the list orchestration fetchers with capability filter filter (as registered
// in WakeFilters: "*" for none, else its ranges as "lo hi lo hi ..." in pin keys) block on.
func (k Keyspace) WakeOrchFilter(partition int, filter string) string {
	if filter == WakeFilterNone {
		return k.WakeOrch(partition)
	}
	sum := sha1.Sum([]byte(filter))
	return k.Prefix(partition) + "wake:orch:f:" + hex.EncodeToString(sum[:])
}

// WakeFilterNone is the WakeFilters member of fetchers without a capability filter.
const WakeFilterNone = "*"

// WakeFilters is the set of capability filters of waiting orchestration fetchers: a wake-up goes
// to the list of every filter that accepts the work, so it reaches a fetcher that can take it.
func (k Keyspace) WakeFilters(partition int) string { return k.Prefix(partition) + "wake:filters" }

// Instance is an instance's metadata hash. It also holds its current execution's record, always
// (scripts/lib.lua, Executions).
func (k Keyspace) Instance(id string) string { return k.inst("i:", id) }

// Executions is the sorted set of an instance's execution ids. An instance with one execution
// has none: the Instance hash's exec field is that execution (scripts/lib.lua, executions).
func (k Keyspace) Executions(id string) string { return k.inst("xs:", id) }

// Execution is the metadata hash of an execution that is not the instance's current one (older
// executions of a continued-as-new instance, executions appended beside the current one).
func (k Keyspace) Execution(id string, execution uint64) string {
	return k.inst("x:"+strconv.FormatUint(execution, 10)+":", id)
}

// ExecutionOutput is one execution's output (a string; absent when the execution has none or
// its history holds it: the record's out field then says where, and a finished execution's
// output is stored once). It is not a field of a hash: an output over 64 bytes would push that
// hash out of Redis's compact listpack encoding.
func (k Keyspace) ExecutionOutput(id string, execution uint64) string {
	return k.inst("xo:"+strconv.FormatUint(execution, 10)+":", id)
}

// History is one execution's history: a string of event JSON lines, appended in ack order.
// A fetch or read of the whole history is then one bulk string, and an ack one APPEND.
func (k Keyspace) History(id string, execution uint64) string {
	return k.inst("h:"+strconv.FormatUint(execution, 10)+":", id)
}

// HistoryIDs is the set of event ids of one execution's history, kept only once its ids stop
// being exactly 1, 2, 3, ... in order (while they are, the record's event count is enough to
// tell a duplicate).
func (k Keyspace) HistoryIDs(id string, execution uint64) string {
	return k.inst("he:"+strconv.FormatUint(execution, 10)+":", id)
}

// Messages is an instance's orchestrator message hash.
func (k Keyspace) Messages(id string) string { return k.inst("q:", id) }

// Lock is an instance's lock hash.
func (k Keyspace) Lock(id string) string { return k.inst("lk:", id) }

// CustomStatus is an instance's custom status hash.
func (k Keyspace) CustomStatus(id string) string { return k.inst("cs:", id) }

// KVStore is an instance's KV store hash.
func (k Keyspace) KVStore(id string) string { return k.inst("kv:", id) }

// KVDelta is an instance's current-execution KV delta hash.
func (k Keyspace) KVDelta(id string) string { return k.inst("kd:", id) }

// Children is the set of an instance's direct sub-orchestrations.
func (k Keyspace) Children(id string) string { return k.inst("ch:", id) }

func (k Keyspace) inst(kind, id string) string {
	return k.Prefix(k.PartitionOf(id)) + kind + id
}
