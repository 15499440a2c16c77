package redisprovider

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// Outcomes of one repair (RepairAction.Outcome).
const (
	RepairRepaired = "repaired" // the violation was fixed; Detail says what was written
	RepairClean    = "clean"    // it no longer held when the repair re-checked it: nothing written
	RepairLeft     = "left"     // not repaired; Detail says why
)

// RepairAction is what Repair did about one violation.
type RepairAction struct {
	FsckViolation        // the violation as fsck reported it
	Outcome       string // RepairRepaired, RepairClean or RepairLeft
	Why           string // what was written, or why nothing was
}

// RepairReport is what Repair found, did and left.
type RepairReport struct {
	Found   []FsckViolation // the first check's violations
	Actions []RepairAction  // one per violation found, over every pass, in order
	After   FsckReport      // the check after the repairs: its violations were left unrepaired
}

// repairPasses bounds the check-and-repair rounds: a repair can uncover another violation (a
// message without a body removed leaves an empty instance in a ready set, say).
const repairPasses = 3

// Repair checks the namespace as Fsck does and repairs what can be repaired without guessing
// (docs/operations.md lists what each code's repair does and what it leaves), then checks again.
// Each repair runs in one script (admin_repair) that re-checks its violation first and writes
// nothing when it no longer holds, so Repair is safe on a live system: a turn that moved on since
// the check is left alone. It repeats check and repair while a pass repairs something (at most
// three passes); the report's After lists what is left. Histories are never changed.
func (p *Provider) Repair(ctx context.Context) (RepairReport, error) {
	const op = "repair"
	if ctx == nil {
		return RepairReport{}, errNilContext(op)
	}
	var rep RepairReport
	run, err := p.runFsck(ctx, op)
	if err != nil {
		return rep, err
	}
	rep.Found = run.report.Violations
	for pass := 0; pass < repairPasses && len(run.report.Violations) > 0; pass++ {
		fixed := false
		for _, v := range run.report.Violations {
			if v.Code == "wrong_partition" || v.Partition < 0 {
				rep.Actions = append(rep.Actions, RepairAction{FsckViolation: v, Outcome: RepairLeft,
					Why: "not repaired: which partition's data is right cannot be told from the keys (docs/operations.md, fsck)"})
				continue
			}
			a, err := p.repairOne(ctx, run.parts[v.Partition], v)
			if err != nil {
				return rep, p.mapErr(op, err)
			}
			rep.Actions = append(rep.Actions, a)
			fixed = fixed || a.Outcome == RepairRepaired
		}
		if run, err = p.runFsck(ctx, op); err != nil {
			return rep, err
		}
		if !fixed {
			break
		}
	}
	rep.After = run.report
	return rep, nil
}

// repairOne runs the repair of one violation, with the arguments its code takes.
func (p *Provider) repairOne(ctx context.Context, f *fsck, v FsckViolation) (RepairAction, error) {
	var vals []string
	switch v.Code {
	case "message_without_visibility":
		var err error
		if vals, err = p.invisibleMessages(ctx, v.Subject); err != nil {
			return RepairAction{}, err
		}
	case "orphaned_keys":
		if in := f.inst[v.Subject]; in != nil {
			vals = in.others
		}
	case "pin_unlisted":
		vals = f.pins
	case "item_index_without_item", "item_placement":
		vals = f.workReadySets()
	case "outbox_seq_behind":
		d, err := strconv.Atoi(v.Subject)
		if err != nil || d < 0 || d >= p.keys.Partitions() {
			return RepairAction{FsckViolation: v, Outcome: RepairLeft, Why: "no such partition"}, nil
		}
		hwm, err := p.rdb.HGet(ctx, p.keys.Prefix(d)+"ib:hwm", strconv.Itoa(v.Partition)).Result()
		if err != nil {
			return RepairAction{FsckViolation: v, Outcome: RepairClean, Why: "the violation no longer holds"}, nil
		}
		vals = []string{hwm}
	case "inbox_mark_behind":
		src, err := strconv.Atoi(v.Subject)
		if err != nil || src < 0 || src >= p.keys.Partitions() {
			return RepairAction{FsckViolation: v, Outcome: RepairLeft, Why: "no such partition"}, nil
		}
		want, err := p.appliedAtLeast(ctx, src, v.Partition)
		if err != nil {
			return RepairAction{}, err
		}
		vals = []string{strconv.FormatInt(want, 10)}
	}
	e := luascripts.AdminRepair.Encoder(3 + len(vals))
	e.Set("retention", ms(p.opts.Retention))
	e.Set("code", v.Code)
	e.Set("subject", v.Subject)
	e.Section("list")
	for _, s := range vals {
		e.Entry(s)
	}
	args, err := encoded("repair", e)
	if err != nil {
		return RepairAction{}, err
	}
	res, err := p.run(ctx, "repair", luascripts.AdminRepair.Op, v.Partition, args...)
	if err != nil {
		return RepairAction{}, err
	}
	r := list(res)
	if len(r) != 2 {
		return RepairAction{}, provider.NewPermanentError("repair", "unexpected reply from admin_repair")
	}
	return RepairAction{FsckViolation: v, Outcome: str(r[0]), Why: str(r[1])}, nil
}

// invisibleMessages returns, for each message body of an instance without its type-and-time field
// t<s>, the triple (seq, type code, visible at ms): a timer at its own fire time, 0 (now) for any
// other message. Read outside the script, it is re-checked there.
func (p *Provider) invisibleMessages(ctx context.Context, id string) ([]string, error) {
	fields, err := p.rdb.HGetAll(ctx, p.keys.Messages(id)).Result()
	if err != nil {
		return nil, err
	}
	var out []string
	for f, body := range fields {
		s, ok := strings.CutPrefix(f, "m")
		if _, typed := fields["t"+s]; !ok || typed {
			continue
		}
		code, at := "O", uint64(0)
		var wi provider.WorkItem
		if json.Unmarshal([]byte(body), &wi) == nil {
			code = typeCode(wi)
			if t, ok := wi.Kind.(provider.TimerFired); ok {
				at = t.FireAtMs
			}
		}
		out = append(out, s, code, strconv.FormatUint(at, 10))
	}
	return out, nil
}
