package redisprovider

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/google/uuid"
)

// EnqueueForOrchestrator implements provider.Provider. The item goes to its target instance's
// queue (the parent for SubOrch* items), visible after delay; the instance is not created.
//
// Messages for an instance that does not exist (no record, not locked, no start queued) are
// settled when they are enqueued, so that no fetch meets them however many there are: a
// QueueMessage is dropped with a warning (duroxide's rule: its fetch would drop it); other messages
// are parked as orphans, as duroxide's providers leave them queued: a start of that instance within
// an hour of parking receives them in its first batch (an event raised just before the start is
// not lost), also when the id belonged to an instance deleted earlier; after the hour they expire,
// with or without Options.Retention. Parked orphans are counted in GetQueueDepths and
// GetQueueStats (Orphaned) and deleted by PurgeOrphanMessages or by deleting the instance id.
// Messages that reach a fetch without a start all the same (delayed QueueMessages, older data) are
// dropped or parked there, at most 100 instances per fetch script.
func (p *Provider) EnqueueForOrchestrator(ctx context.Context, item provider.WorkItem, delay time.Duration) error {
	const op = "enqueue_for_orchestrator"
	if err := checkDuration(op, "delay", delay); err != nil {
		return err
	}
	js, err := p.encodeItem(op, item, false)
	if err != nil {
		return err
	}
	target := item.TargetInstance()
	args, err := argsOf(op, luascripts.OrchEnqueue, "target", target, "item", js, "code", typeCode(item), "delay", ms(delay))
	if err != nil {
		return err
	}
	res, err := p.runOnce(ctx, op, luascripts.OrchEnqueue.Op, p.keys.PartitionOf(target), args...)
	if err == nil && num(res) == 0 {
		p.opts.Logger.Warn("dxredis: QueueMessage for an instance that does not exist dropped", "instance", target)
	}
	return err
}

// EnqueueStartIfAbsent implements provider.StartIfAbsentEnqueuer: in one script, item (a
// StartOrchestration) is enqueued as EnqueueForOrchestrator would with no delay, unless its
// instance has a record or a start queued; then it writes nothing and returns false. Cost: O(log
// N) plus O(messages queued for the instance).
func (p *Provider) EnqueueStartIfAbsent(ctx context.Context, item provider.WorkItem) (bool, error) {
	const op = "enqueue_start_if_absent"
	if _, ok := item.Kind.(provider.StartOrchestration); !ok {
		return false, invalid(op, "want a StartOrchestration work item, got %q", item.Variant())
	}
	js, err := p.encodeItem(op, item, false)
	if err != nil {
		return false, err
	}
	target := item.TargetInstance()
	args, err := argsOf(op, luascripts.OrchEnqueue, "target", target, "item", js, "code", typeCode(item), "delay", "0", "if_absent", "1")
	if err != nil {
		return false, err
	}
	res, err := p.runOnce(ctx, op, luascripts.OrchEnqueue.Op, p.keys.PartitionOf(target), args...)
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// FetchOrchestrationItem implements provider.Provider. It long-polls: with nothing eligible it
// waits for a wake-up, for delayed work or an expiring lock to come due, or for pollTimeout.
// An empty SupportedDuroxideVersions list matches nothing: it returns nil after pollTimeout
// without touching Redis.
//
// The item also carries HistoryLen and ExecutionTag (see provider.LiteFetcher).
func (p *Provider) FetchOrchestrationItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	return p.fetchOrch(ctx, "fetch_orchestration_item", lockTimeout, pollTimeout, filter, false)
}

// FetchOrchestrationItemLite implements provider.LiteFetcher: FetchOrchestrationItem without the
// history and the KV snapshot (one Redis read less, and O(messages) bytes).
func (p *Provider) FetchOrchestrationItemLite(ctx context.Context, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	return p.fetchOrch(ctx, "fetch_orchestration_item_lite", lockTimeout, pollTimeout, filter, true)
}

var (
	_ provider.LiteFetcher             = (*Provider)(nil)
	_ provider.OrchestrationAckFetcher = (*Provider)(nil)
	_ provider.WorkAckFetcher          = (*Provider)(nil)
	_ provider.WorkBatchFetcher        = (*Provider)(nil)
	_ provider.StartIfAbsentEnqueuer   = (*Provider)(nil)
)

// fetchArgs checks a fetch's arguments and returns orch_fetch's ARGV after the prefix (with a new
// lock nonce) for partition part, the wake list the fetch blocks on there and the filter's
// signature. mode is orch_fetch's (” none). skip is true when the filter matches nothing.
func (p *Provider) fetchArgs(op string, part int, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter, lite bool, mode string) (args []any, wakeKey, sig string, skip bool, err error) {
	if lockTimeout <= 0 {
		return nil, "", "", false, invalid(op, "lock timeout must be positive, got %v", lockTimeout)
	}
	if err := checkDuration(op, "poll timeout", pollTimeout); err != nil {
		return nil, "", "", false, err
	}
	if filter != nil && len(filter.SupportedDuroxideVersions) == 0 {
		return nil, "", "", true, nil
	}
	e := luascripts.OrchFetch.Encoder(8)
	e.Set("token", uuid.NewString())
	e.Set("lock_ms", ms(lockTimeout))
	e.Flag("filtered", filter != nil)
	e.Section("ranges")
	wakeFilter := dxredis.WakeFilterNone
	if filter != nil {
		var bounds []string
		for _, r := range filter.SupportedDuroxideVersions {
			if r.Min == nil || r.Max == nil {
				return nil, "", "", false, invalid(op, "capability filter range has a nil bound")
			}
			lo, hi := pinKey(r.Min), pinKey(r.Max)
			bounds = append(bounds, lo, hi)
			e.Entry(lo, hi)
		}
		wakeFilter = strings.Join(bounds, " ") // as orch_fetch registers it
	}
	e.Set("wait_ms", ms(waitRegistration(pollTimeout, rescanPeriod(lockTimeout))))
	e.Flag("lite", lite)
	if mode != "" {
		e.Set("mode", mode)
	}
	args, err = encoded(op, e)
	return args, p.keys.WakeOrchFilter(part, wakeFilter), "o" + wakeFilter, false, err
}

func (p *Provider) fetchOrch(ctx context.Context, op string, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter, lite bool) (*provider.LockedOrchestrationItem, error) {
	if p.keys.Partitions() > 1 {
		return p.fetchOrchParts(ctx, op, lockTimeout, pollTimeout, filter, lite, false)
	}
	args, wakeKey, _, skip, err := p.fetchArgs(op, 0, lockTimeout, pollTimeout, filter, lite, "")
	if err != nil {
		return nil, err
	}
	if skip {
		p.sleep(ctx, pollTimeout) // matches nothing; like TagFilterNone, do not make callers spin
		return nil, nil
	}
	// Every waiter on the filter's list can take what its tokens announce, so idle fetches may
	// skip their script.
	var item *provider.LockedOrchestrationItem
	err = p.poll(ctx, op, []string{wakeKey}, pollTimeout, rescanPeriod(lockTimeout), true, func() (bool, int64, int64, error) {
		args[fetchToken] = uuid.NewString() // each try locks under a nonce of its own
		res, err := p.run(ctx, op, luascripts.OrchFetch.Op, 0, args...)
		if err != nil {
			return false, 0, 0, err
		}
		found, now, next, _, err := p.orchFetchReply(op, res, lite, &item)
		return found, now, next, err
	})
	return item, err
}

// orchClass is the hub's class of orchestration fetches with filter (namespaces of several
// partitions, hub.go).
func (p *Provider) orchClass(op string, lockTimeout time.Duration, filter *provider.DispatcherCapabilityFilter) (*fetchClass, error) {
	_, _, sig, _, err := p.fetchArgs(op, 0, lockTimeout, 0, filter, false, "")
	if err != nil {
		return nil, err
	}
	return p.parts.class(sig, func(part int) []string {
		_, key, _, _, _ := p.fetchArgs(op, part, lockTimeout, 0, filter, false, "")
		return []string{key}
	}), nil
}

// fetchOrchParts is fetchOrch over the partitions of a namespace of several (hub.go).
// With known, it looks only where work is known to wait, without waiting (an ack-and-fetch that
// leaves its partition).
func (p *Provider) fetchOrchParts(ctx context.Context, op string, lockTimeout, pollTimeout time.Duration, filter *provider.DispatcherCapabilityFilter, lite, known bool) (*provider.LockedOrchestrationItem, error) {
	if filter != nil && len(filter.SupportedDuroxideVersions) == 0 {
		p.sleep(ctx, pollTimeout)
		return nil, nil
	}
	c, err := p.orchClass(op, lockTimeout, filter)
	if err != nil {
		return nil, err
	}
	p.parts.start()
	var item *provider.LockedOrchestrationItem
	err = p.parts.fetchFrom(ctx, op, c, pollTimeout, rescanPeriod(lockTimeout), known, func(ctx context.Context, part int, mode string) (bool, int64, int64, int64, error) {
		args, _, _, _, err := p.fetchArgs(op, part, lockTimeout, pollTimeout, filter, lite, mode)
		if err != nil {
			return false, 0, 0, 0, err
		}
		res, err := p.run(ctx, op, luascripts.OrchFetch.Op, part, args...)
		if err != nil {
			return false, 0, 0, 0, err
		}
		if forwarded(&res) { // retention reaped a child in another partition
			p.forward(ctx, part)
		}
		var it *provider.LockedOrchestrationItem
		found, now, next, head, err := p.orchFetchReply(op, res, lite, &it)
		if found {
			item = it
		}
		return found, now, next, head, err
	})
	return item, err
}

// orchFetchReply reads orch_fetch's reply: an item (into *item), or when the next work is due;
// and the partition's head where the fetch's mode reports it (-1 none or not reported).
func (p *Provider) orchFetchReply(op string, res any, lite bool, item **provider.LockedOrchestrationItem) (found bool, now, next, head int64, err error) {
	r := list(res)
	if len(r) >= 10 && str(r[0]) != "" {
		*item = p.orchItem(r, lite && (len(r) < 11 || str(r[10]) != "1"))
		head = -1
		if len(r) >= 12 {
			head = num(r[11])
		}
		return true, 0, 0, head, nil
	}
	if len(r) < 3 {
		return false, 0, 0, 0, provider.NewPermanentError(op, "unexpected reply from orch_fetch")
	}
	head = -1
	if len(r) >= 4 {
		head = num(r[3])
	}
	return false, num(r[2]), num(r[1]), head, nil
}

// orchItem builds the fetched item from orch_fetch's reply. Undecodable history (or messages)
// becomes HistoryError with the lock held, as the contract requires. A lite item has no history
// and no KV snapshot (a lite fetch of a small history without KV gets them whole: lite false).
func (p *Provider) orchItem(r []any, lite bool) *provider.LockedOrchestrationItem {
	it := provider.OrchestrationItem{Instance: str(r[1]), KVSnapshot: map[string]provider.KVEntry{},
		ExecutionTag: str(r[8]), HistoryLen: int(num(r[9]))}
	var problems []string
	for _, m := range list(r[5]) {
		var wi provider.WorkItem
		if err := json.Unmarshal([]byte(str(m)), &wi); err != nil {
			problems = append(problems, "queued message: "+err.Error())
			continue
		}
		it.Messages = append(it.Messages, wi)
	}
	var exec uint64
	if e := str(r[3]); e != "" {
		exec, _ = strconv.ParseUint(e, 10, 64)
	}
	var history []provider.Event
	if !lite {
		var err error
		history, err = p.history.decode(it.Instance, exec, str(r[6]))
		if err != nil {
			problems = append(problems, "history: "+err.Error())
			history = nil
		}
	}
	if len(problems) > 0 {
		it.HistoryError = strings.Join(problems, "; ")
		it.HistoryLen = 0
	}
	it.History = history
	if it.History == nil && !lite {
		it.History = []provider.Event{} // a lite item's History stays nil: not read, not empty
	}
	it.ExecutionID = exec
	if inst := list(r[4]); len(inst) == 2 { // the instance record's name and version
		it.OrchestrationName, it.Version = str(inst[0]), str(inst[1])
	}
	// Not created yet (or created without metadata): name and version from the history's
	// OrchestrationStarted, else from the batch's start item.
	if it.OrchestrationName == "" {
		for _, e := range history {
			if s, ok := e.Kind.(provider.OrchestrationStartedEvent); ok {
				it.OrchestrationName, it.Version = s.Name, s.Version
				break
			}
		}
	}
	for _, m := range it.Messages {
		switch s := m.Kind.(type) {
		case provider.StartOrchestration:
			if it.OrchestrationName == "" {
				it.OrchestrationName, it.Version = s.Orchestration, deref(s.Version)
			}
			if it.ExecutionID == 0 {
				it.ExecutionID = s.ExecutionID
			}
		case provider.ContinueAsNew:
			if it.OrchestrationName == "" {
				it.OrchestrationName, it.Version = s.Orchestration, deref(s.Version)
			}
		}
	}
	if it.ExecutionID == 0 {
		it.ExecutionID = 1
	}
	if it.Version == "" {
		it.Version = "unknown"
	}
	kv := list(r[7])
	for i := 0; i+1 < len(kv); i += 2 {
		it.KVSnapshot[str(kv[i])] = kvEntry(str(kv[i+1]))
	}
	return &provider.LockedOrchestrationItem{Item: it, LockToken: str(r[0]), AttemptCount: uint32(num(r[2]))}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// kvEntry parses a stored "<ms>|<value>".
func kvEntry(stored string) provider.KVEntry {
	msPart, value, _ := strings.Cut(stored, "|")
	at, _ := strconv.ParseUint(msPart, 10, 64)
	return provider.KVEntry{Value: value, LastUpdatedAtMs: at}
}

// AckOrchestrationItem implements provider.Provider in one script call. Every check (token,
// expiry, duplicate event ids, argument shape) happens before the first write.
func (p *Provider) AckOrchestrationItem(ctx context.Context, lockToken string, ack provider.OrchestrationAck) error {
	const op = "ack_orchestration_item"
	args, err := p.ackArgs(op, lockToken, ack)
	if err != nil {
		return err
	}
	part := p.tokenPartition(lockToken)
	res, err := p.runOnce(ctx, op, luascripts.OrchAck.Op, part, args...)
	if err == nil && num(res) == 2 {
		p.forward(ctx, part)
	}
	return err
}

// tokenPartition is the partition of an orchestration lock token's instance.
func (p *Provider) tokenPartition(lockToken string) int {
	return p.keys.PartitionOf(tokenInstance(lockToken))
}

// AckOrchestrationItemAndFetch implements provider.OrchestrationAckFetcher in one script call
// (orch_ack_fetch): the ack runs at most once per call, as AckOrchestrationItem's; a retry of a
// call whose reply was lost fetches again (an item the lost reply had locked is redelivered when
// its lock expires).
func (p *Provider) AckOrchestrationItemAndFetch(ctx context.Context, lockToken string, ack provider.OrchestrationAck, lockTimeout time.Duration,
	filter *provider.DispatcherCapabilityFilter, opts provider.FetchOptions) (*provider.LockedOrchestrationItem, error) {
	const op = "ack_orchestration_item_and_fetch"
	args, err := p.ackArgs(op, lockToken, ack)
	if err != nil {
		return nil, err
	}
	if err := checkDuration(op, "next poll", opts.NextPoll); err != nil {
		return nil, err
	}
	part := p.tokenPartition(lockToken)
	mode := ""
	var c *fetchClass
	if p.keys.Partitions() > 1 {
		// The fetch stays in the ack's partition only while no other holds older work (hub.go).
		if c, err = p.orchClass(op, lockTimeout, filter); err != nil {
			return nil, err
		}
		if !p.parts.stays(c, part) {
			if err := p.AckOrchestrationItem(ctx, lockToken, ack); err != nil {
				return nil, err
			}
			return p.fetchOrchParts(ctx, op, lockTimeout, 0, filter, opts.Lite, true)
		}
		mode = "h"
	}
	fargs, wakeKey, _, skip, err := p.fetchArgs(op, part, lockTimeout, opts.NextPoll, filter, opts.Lite, mode)
	if err != nil {
		return nil, err
	}
	if skip {
		return nil, p.AckOrchestrationItem(ctx, lockToken, ack)
	}
	all, err := composed(op, luascripts.OrchAckFetch, args, fargs)
	if err != nil {
		return nil, err
	}
	res, err := p.runOnce(ctx, op, luascripts.OrchAckFetch.Op, part, all...)
	if err != nil {
		return nil, err
	}
	if forwarded(&res) {
		p.forward(ctx, part)
	}
	var item *provider.LockedOrchestrationItem
	found, now, next, head, err := p.orchFetchReply(op, res, opts.Lite, &item)
	if err != nil {
		return nil, err
	}
	switch {
	case c != nil && found:
		p.parts.noteHead(c, part, head, rescanPeriod(lockTimeout))
	case c != nil:
		p.parts.noteEmpty(c, part, now, next, rescanPeriod(lockTimeout), waitRegistration(opts.NextPoll, rescanPeriod(lockTimeout)))
	case opts.NextPoll > 0:
		// The script registered the caller's next wait: that fetch may start with it.
		p.idle.prepared([]string{wakeKey}, now, next, opts.NextPoll+rescanPeriod(lockTimeout))
	}
	return item, nil
}

// ReadForReplay implements provider.LiteFetcher: the execution's history, the instance's KV
// snapshot and the execution's tag (empty unless executionID is the instance's current
// execution). Undecodable history is a permanent error.
func (p *Provider) ReadForReplay(ctx context.Context, instance string, executionID uint64) ([]provider.Event, map[string]provider.KVEntry, string, error) {
	const op = "read_for_replay"
	res, err := p.onInstance(ctx, op, luascripts.InstReplay, instance, "exec", strconv.FormatUint(executionID, 10))
	if err != nil {
		return nil, nil, "", err
	}
	r := list(res)
	if len(r) < 3 {
		return nil, nil, "", provider.NewPermanentError(op, "unexpected reply from inst_replay")
	}
	history, err := p.history.decode(instance, executionID, str(r[0]))
	if err != nil {
		return nil, nil, "", provider.NewPermanentError(op, "stored history of "+strconv.Quote(instance)+" does not decode: "+err.Error()).WithCause(err)
	}
	if history == nil {
		history = []provider.Event{}
	}
	kv := map[string]provider.KVEntry{}
	pairs := list(r[1])
	for i := 0; i+1 < len(pairs); i += 2 {
		kv[str(pairs[i])] = kvEntry(str(pairs[i+1]))
	}
	return history, kv, str(r[2]), nil
}

// ackArgs checks an ack and returns orch_ack's ARGV after the prefix.
func (p *Provider) ackArgs(op, lockToken string, ack provider.OrchestrationAck) ([]any, error) {
	if err := checkToken(op, lockToken); err != nil {
		return nil, err
	}
	if ack.ExecutionID == 0 {
		return nil, invalid(op, "execution_id must be at least 1")
	}
	md := ack.Metadata
	lines, kvOps := make([]string, 0, len(ack.HistoryDelta)), []string{}
	csOp, csVal := "", ""
	quoted := ""
	if inst := tokenInstance(lockToken); inst != "" && len(ack.HistoryDelta) > 0 {
		quoted = quoteInstance(inst)
	}
	for _, e := range ack.HistoryDelta {
		js, err := p.encodeEvent(op, e)
		if err != nil {
			return nil, err
		}
		if quoted != "" {
			js = storedEvent(js, quoted, ack.ExecutionID)
		}
		lines = append(lines, js)
		switch k := e.Kind.(type) {
		case provider.CustomStatusUpdatedEvent:
			if k.Status != nil {
				csOp, csVal = "s", *k.Status
			} else {
				csOp, csVal = "c", ""
			}
		case provider.KeyValueSetEvent:
			kvOps = append(kvOps, "s", k.Key, strconv.FormatUint(k.LastUpdatedAtMs, 10)+"|"+k.Value)
		case provider.KeyValueClearedEvent:
			kvOps = append(kvOps, "c", k.Key, "")
		case provider.KeyValuesClearedEvent:
			kvOps = append(kvOps, "C", "", "")
		}
	}
	part := p.tokenPartition(lockToken)
	e := luascripts.OrchAck.Encoder(24 + 2*len(lines) + len(kvOps) + 7*len(ack.WorkerItems) +
		3*len(ack.CancelledActivities) + 5*len(ack.OrchestratorItems))
	e.Set("token", lockToken)
	e.Set("exec", strconv.FormatUint(ack.ExecutionID, 10))
	e.Set("status", md.Status)
	output, outAt := "", ""
	if md.Output != nil {
		output, outAt = *md.Output, outputAt(lines, *md.Output)
	}
	e.Flag("has_output", md.Output != nil)
	e.Set("output", output)
	e.Set("out_at", outAt)
	e.Set("name", md.OrchestrationName)
	e.Set("ver", md.OrchestrationVersion)
	e.Set("parent", md.ParentInstanceID)
	pin, pink := "", ""
	if v := md.PinnedDuroxideVersion; v != nil {
		pin, pink = v.String(), pinKey(v)
	}
	e.Set("pin", pin)
	e.Set("pink", pink)
	e.Set("cs_op", csOp)
	e.Set("cs_val", csVal)
	e.Flag("terminal", provider.IsTerminalStatus(md.Status))
	e.Set("retention", ms(p.opts.Retention))
	ppart := ""
	if md.ParentInstanceID != "" {
		if pp := p.keys.PartitionOf(md.ParentInstanceID); pp != part {
			ppart = strconv.Itoa(pp)
		}
	}
	e.Set("ppart", ppart)

	e.Section("hist")
	for i, ev := range ack.HistoryDelta {
		e.Entry(strconv.FormatUint(ev.EventID, 10), lines[i])
	}
	e.Section("kvops")
	for i := 0; i+2 < len(kvOps); i += 3 {
		e.Entry(kvOps[i], kvOps[i+1], kvOps[i+2])
	}
	// Items for other partitions go to the outbox (keys.go, Partitions): worker items of sessions
	// homed elsewhere, orchestrator items for instances elsewhere.
	e.Section("witems")
	var xw []route
	var xwDest []int
	for _, w := range ack.WorkerItems {
		r, err := p.activityRoute(op, w)
		if err != nil {
			return nil, err
		}
		if d := p.workPartition(r); d != part {
			xw, xwDest = append(xw, r), append(xwDest, d)
			continue
		}
		e.Entry(r.json, r.instance, r.execution, r.activity, r.session, r.tag)
	}
	e.Section("cancels")
	for _, c := range ack.CancelledActivities {
		if c.Instance == "" {
			return nil, invalid(op, "cancelled activity has an empty instance id")
		}
		e.Entry(c.Instance, strconv.FormatUint(c.ExecutionID, 10), strconv.FormatUint(c.ActivityID, 10))
	}
	e.Section("oitems")
	type xitem struct {
		dest                          int
		target, json, code, visibleAt string
	}
	var xo []xitem
	for _, o := range ack.OrchestratorItems {
		js, err := p.encodeItem(op, o, false)
		if err != nil {
			return nil, err
		}
		visibleAt := "0"
		if t, ok := o.Kind.(provider.TimerFired); ok {
			visibleAt = strconv.FormatUint(t.FireAtMs, 10)
		}
		if d := p.keys.PartitionOf(o.TargetInstance()); d != part {
			xo = append(xo, xitem{d, o.TargetInstance(), js, typeCode(o), visibleAt})
			continue
		}
		e.Entry(o.TargetInstance(), js, typeCode(o), visibleAt)
	}
	e.Section("xo")
	for _, x := range xo {
		e.Entry(strconv.Itoa(x.dest), x.target, x.json, x.code, x.visibleAt)
	}
	e.Section("xw")
	for i, r := range xw {
		e.Entry(strconv.Itoa(xwDest[i]), r.json, r.instance, r.execution, r.activity, r.session, r.tag)
	}
	return encoded(op, e)
}

// outputAt is where output is, as a JSON string, in the history bytes an ack appends (its lines,
// each ended by '\n'): "<offset> <length>", or "" when no line holds it (the output then gets a
// key of its own). A terminal event carries its output, so it is stored once. Readers unquote
// those bytes (replyOutput), which gives back any valid UTF-8 output exactly.
func outputAt(lines []string, output string) string {
	if len(lines) == 0 || !utf8.ValidString(output) {
		return ""
	}
	q, err := provider.Marshal(output)
	if err != nil {
		return ""
	}
	off := 0
	for _, l := range lines {
		off += len(l) + 1
	}
	for i := len(lines) - 1; i >= 0; i-- { // the terminal event is usually the last
		off -= len(lines[i]) + 1
		if j := strings.Index(lines[i], string(q)); j >= 0 {
			return strconv.Itoa(off+j) + " " + strconv.Itoa(len(q))
		}
	}
	return ""
}

// replyOutput is the output in r[at] of a script reply (nil when none): JSON-quoted when r[flagAt]
// is "q" (read from the history, see outputAt), else as stored.
func replyOutput(op string, r []any, at, flagAt int) (*string, error) {
	if r[at] == nil {
		return nil, nil
	}
	out := str(r[at])
	if len(r) > flagAt && str(r[flagAt]) == "q" {
		if err := json.Unmarshal([]byte(out), &out); err != nil {
			return nil, provider.NewPermanentError(op, "stored output does not decode: "+err.Error()).WithCause(err)
		}
	}
	return &out, nil
}

// encodeEvent validates and encodes one history event.
func (p *Provider) encodeEvent(op string, e provider.Event) (string, error) {
	if e.EventID == 0 {
		return "", invalid(op, "event_id 0 is not allowed (ids start at 1)")
	}
	if e.Kind == nil {
		return "", invalid(op, "event %d has no kind", e.EventID)
	}
	b, err := provider.Marshal(e)
	if err != nil {
		return "", invalid(op, "encoding event %d: %v", e.EventID, err)
	}
	if len(b) > p.opts.MaxPayloadBytes {
		return "", invalid(op, "event %d is %d bytes, more than MaxPayloadBytes (%d)", e.EventID, len(b), p.opts.MaxPayloadBytes)
	}
	return string(b), nil
}

// AbandonOrchestrationItem implements provider.Provider.
func (p *Provider) AbandonOrchestrationItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error {
	const op = "abandon_orchestration_item"
	if err := checkToken(op, lockToken); err != nil {
		return err
	}
	if err := checkDuration(op, "delay", delay); err != nil {
		return err
	}
	args, err := argsOf(op, luascripts.OrchAbandon, "token", lockToken, "delay", ms(delay), "ignore", boolArg(ignoreAttempt))
	if err != nil {
		return err
	}
	part := p.tokenPartition(lockToken)
	_, err = p.runOnce(ctx, op, luascripts.OrchAbandon.Op, part, args...)
	if p.keys.Partitions() > 1 {
		p.parts.touch(part)
	}
	return err
}

// HoldOrchestrationItem implements provider.Holder: an abandon that counts no attempt and keeps
// the reason in the instance's message hash (its field h) until an ack consumes the messages.
func (p *Provider) HoldOrchestrationItem(ctx context.Context, lockToken string, delay time.Duration, reason string) error {
	const op = "hold_orchestration_item"
	if err := checkToken(op, lockToken); err != nil {
		return err
	}
	if err := checkDuration(op, "delay", delay); err != nil {
		return err
	}
	if reason == "" || len(reason) > maxHoldReason || !utf8.ValidString(reason) {
		return invalid(op, "a hold's reason must be 1 to %d bytes of UTF-8 (got %d bytes)", maxHoldReason, len(reason))
	}
	args, err := argsOf(op, luascripts.OrchAbandon, "token", lockToken, "delay", ms(delay), "ignore", "1", "reason", reason)
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.OrchAbandon.Op, p.tokenPartition(lockToken), args...)
	return err
}

// maxHoldReason bounds a hold's reason (provider.Holder).
const maxHoldReason = 1024

// HeldReason implements provider.Holder.
func (p *Provider) HeldReason(ctx context.Context, instance string) (string, time.Time, error) {
	res, err := p.onInstance(ctx, "held_reason", luascripts.InstState, instance, "what", "hold")
	if err != nil || str(res) == "" {
		return "", time.Time{}, err
	}
	at, reason, _ := strings.Cut(str(res), " ")
	msec, _ := strconv.ParseInt(at, 10, 64)
	return reason, time.UnixMilli(msec).UTC(), nil
}

// RenewOrchestrationItemLock implements provider.Provider.
func (p *Provider) RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	const op = "renew_orchestration_item_lock"
	if err := checkToken(op, lockToken); err != nil {
		return err
	}
	if err := checkDuration(op, "extend_for", extendFor); err != nil {
		return err
	}
	args, err := argsOf(op, luascripts.OrchRenew, "token", lockToken, "extend", ms(extendFor))
	if err != nil {
		return err
	}
	_, err = p.run(ctx, op, luascripts.OrchRenew.Op, p.tokenPartition(lockToken), args...)
	return err
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// onInstance runs a per-instance script (its first argument "id" is the instance, then pairs of
// argument names and values, see argsOf) on the instance's partition, after checking the id.
func (p *Provider) onInstance(ctx context.Context, op string, s *luascripts.Schema, instance string, pairs ...string) (any, error) {
	if err := checkID(op, instance); err != nil {
		return nil, err
	}
	args, err := argsOf(op, s, append([]string{"id", instance}, pairs...)...)
	if err != nil {
		return nil, err
	}
	return p.run(ctx, op, s.Op, p.keys.PartitionOf(instance), args...)
}

// Read implements provider.Provider: the latest execution's history, empty for unknown instances.
func (p *Provider) Read(ctx context.Context, instance string) ([]provider.Event, error) {
	return p.readHistory(ctx, "read", instance, "")
}

// ReadWithExecution implements provider.Provider.
func (p *Provider) ReadWithExecution(ctx context.Context, instance string, executionID uint64) ([]provider.Event, error) {
	return p.readHistory(ctx, "read_with_execution", instance, strconv.FormatUint(executionID, 10))
}

func (p *Provider) readHistory(ctx context.Context, op, instance, exec string) ([]provider.Event, error) {
	res, err := p.onInstance(ctx, op, luascripts.InstRead, instance, "exec", exec)
	if err != nil {
		return nil, err
	}
	r := list(res)
	if len(r) < 2 {
		return []provider.Event{}, nil
	}
	e, _ := strconv.ParseUint(str(r[0]), 10, 64)
	events, err := decodeHistory(str(r[1]), instance, e)
	if err != nil {
		return nil, provider.NewPermanentError(op, "stored history of "+strconv.Quote(instance)+" does not decode: "+err.Error()).WithCause(err)
	}
	return events, nil
}

// AppendWithExecution implements provider.Provider (for tests and tools; the runtime appends
// through AckOrchestrationItem).
func (p *Provider) AppendWithExecution(ctx context.Context, instance string, executionID uint64, events []provider.Event) error {
	const op = "append_with_execution"
	if instance == "" || executionID == 0 {
		return invalid(op, "instance id must be non-empty and execution_id at least 1")
	}
	if len(events) == 0 {
		return nil
	}
	e := luascripts.OrchAppend.Encoder(2 + 2*len(events))
	e.Set("id", instance)
	e.Set("exec", strconv.FormatUint(executionID, 10))
	e.Section("hist")
	quoted := quoteInstance(instance)
	for _, ev := range events {
		js, err := p.encodeEvent(op, ev)
		if err != nil {
			return err
		}
		if quoted != "" {
			js = storedEvent(js, quoted, executionID)
		}
		e.Entry(strconv.FormatUint(ev.EventID, 10), js)
	}
	args, err := encoded(op, e)
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.OrchAppend.Op, p.keys.PartitionOf(instance), args...)
	return err
}

// GetCustomStatus implements provider.Provider.
func (p *Provider) GetCustomStatus(ctx context.Context, instance string, lastSeenVersion uint64) (*provider.CustomStatus, error) {
	const op = "get_custom_status"
	res, err := p.onInstance(ctx, op, luascripts.InstState, instance, "what", "cs")
	if err != nil {
		return nil, err
	}
	r := list(res)
	if len(r) < 3 || r[0] == nil {
		return nil, nil
	}
	version := uint64(num(r[0]))
	if version <= lastSeenVersion {
		return nil, nil
	}
	cs := &provider.CustomStatus{Version: version}
	if str(r[2]) != "1" {
		v := str(r[1])
		cs.Status = &v
	}
	return cs, nil
}

// GetKVValue implements provider.Provider: the current execution's change wins over the store;
// a cleared key is absent.
func (p *Provider) GetKVValue(ctx context.Context, instance, key string) (string, bool, error) {
	const op = "get_kv_value"
	res, err := p.onInstance(ctx, op, luascripts.InstState, instance, "what", "kv", "key", key)
	if err != nil {
		return "", false, err
	}
	r := list(res)
	if len(r) < 2 {
		return "", false, nil
	}
	if r[1] != nil {
		d := str(r[1])
		if d == "t" {
			return "", false, nil
		}
		return kvEntry(d[1:]).Value, true, nil
	}
	if r[0] != nil {
		return kvEntry(str(r[0])).Value, true, nil
	}
	return "", false, nil
}

// mergedKV merges store pairs and delta pairs as clients see them.
func mergedKV(store, delta []any) map[string]string {
	out := map[string]string{}
	for k, v := range pairsToMap(store) {
		out[k] = kvEntry(v).Value
	}
	for k, v := range pairsToMap(delta) {
		if v == "t" {
			delete(out, k)
		} else {
			out[k] = kvEntry(v[1:]).Value
		}
	}
	return out
}

// GetKVAllValues implements provider.Provider.
func (p *Provider) GetKVAllValues(ctx context.Context, instance string) (map[string]string, error) {
	const op = "get_kv_all_values"
	res, err := p.onInstance(ctx, op, luascripts.InstState, instance, "what", "kv", "key", "")
	if err != nil {
		return nil, err
	}
	r := list(res)
	if len(r) < 2 {
		return map[string]string{}, nil
	}
	return mergedKV(list(r[0]), list(r[1])), nil
}

// GetInstanceStats implements provider.Provider.
func (p *Provider) GetInstanceStats(ctx context.Context, instance string) (*provider.SystemStats, error) {
	const op = "get_instance_stats"
	res, err := p.onInstance(ctx, op, luascripts.InstState, instance, "what", "stats")
	if err != nil {
		return nil, err
	}
	r := list(res)
	if len(r) < 5 || num(r[0]) != 1 {
		return nil, nil
	}
	// The stored history holds each event's JSON plus a newline.
	count, history := num(r[1]), str(r[2])
	st := &provider.SystemStats{HistoryEventCount: uint64(count), HistorySizeBytes: uint64(max(int64(len(history))-count, 0))}
	// queue_pending_count: carry_forward_events of the current execution's event 1.
	for rest := history; rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if e, err := provider.DecodeEventIn([]byte(line), instance, 0, storedVersion); err == nil && e.EventID == 1 {
			if s, ok := e.Kind.(provider.OrchestrationStartedEvent); ok {
				st.QueuePendingCount = uint64(len(s.CarryForwardEvents))
			}
			break
		}
	}
	for _, v := range mergedKV(list(r[3]), list(r[4])) {
		st.KVUserKeyCount++
		st.KVTotalValueBytes += uint64(len(v))
	}
	return st, nil
}
