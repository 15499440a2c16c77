package luascripts

// The arguments of the operations (schema.go): one declaration per operation, after the prefix
// (ARGV[1]). Names are the Lua locals the operation's body reads; what each means is in the
// operation's header (scripts/<op>.lua), which a test checks against these. Changing a layout is
// a change here, in the header and at the Go call site, and the library's name changes with it.
var (
	OrchEnqueue = &Schema{Op: "orch_enqueue", Args: []Arg{
		S("target"), S("item"), S("code"), N("delay"), Opt(F("if_absent")),
	}}
	OrchFetch = &Schema{Op: "orch_fetch", Args: []Arg{
		S("token"), N("lock_ms"), F("filtered"), Sec("ranges", "lo", "hi"), N("wait_ms"), F("lite"), Opt(S("mode")),
	}}
	OrchAck = &Schema{Op: "orch_ack", Args: []Arg{
		S("token"), S("exec"), S("status"), F("has_output"), S("output"), S("out_at"),
		S("name"), S("ver"), S("parent"), S("pin"), S("pink"),
		S("cs_op"), S("cs_val"), F("terminal"), N("retention"), S("ppart"),
		Sec("hist", "event_id", "json"),
		Sec("kvops", "op", "key", "value"),
		Sec("witems", "json", "instance", "execution", "activity", "session", "tag"),
		Sec("cancels", "instance", "execution", "activity"),
		Sec("oitems", "target", "json", "code", "visible_at"),
		Sec("xo", "dest", "target", "json", "code", "visible_at"),
		Sec("xw", "dest", "json", "instance", "execution", "activity", "session", "tag"),
	}}
	OrchAckFetch = &Schema{Op: "orch_ack_fetch", Parts: []*Schema{OrchAck, OrchFetch}}
	OrchAbandon  = &Schema{Op: "orch_abandon", Args: []Arg{
		S("token"), N("delay"), F("ignore"), Opt(S("reason")),
	}}
	OrchRenew  = &Schema{Op: "orch_renew", Args: []Arg{S("token"), N("extend")}}
	OrchAppend = &Schema{Op: "orch_append", Args: []Arg{S("id"), S("exec"), Sec("hist", "event_id", "json")}}

	WorkEnqueue = &Schema{Op: "work_enqueue", Args: []Arg{
		S("item"), S("instance"), S("execution"), S("activity"), S("session"), S("tag"),
	}}
	WorkFetch = &Schema{Op: "work_fetch", Args: []Arg{
		S("token"), N("lock_ms"), S("owner"), N("slock_ms"), N("wait_ms"), S("mode"), F("caps"), S("any"), All("tks", "tag_key"),
	}}
	WorkAck = &Schema{Op: "work_ack", Args: []Arg{
		S("token"), F("completed"), S("target"), S("completion"), S("tpart"), F("failed"),
	}}
	WorkAckFetch = &Schema{Op: "work_ack_fetch", Parts: []*Schema{WorkAck, WorkFetch}}
	WorkAckMany  = &Schema{Op: "work_ack_many", Args: []Arg{
		N("want"), Sec("acks", "token", "completed", "target", "completion", "tpart", "failed"), All("fetch", "arg"),
	}}
	WorkFetchMany  = &Schema{Op: "work_fetch_many", Args: []Arg{N("want"), All("fetch", "arg")}}
	WorkDead       = &Schema{Op: "work_dead", Args: []Arg{S("what"), S("token"), S("id"), N("lock_ms"), S("reason")}}
	WorkAbandon    = &Schema{Op: "work_abandon", Args: []Arg{S("token"), N("delay"), F("ignore")}}
	WorkRenew      = &Schema{Op: "work_renew", Args: []Arg{S("token"), N("ext")}}
	SessionCleanup = &Schema{Op: "work_session_cleanup", Args: []Arg{N("limit")}}
	SessionRenew   = &Schema{Op: "work_session_renew", Args: []Arg{N("ext"), N("idle"), All("owners", "owner")}}

	InstRead   = &Schema{Op: "inst_read", Args: []Arg{S("id"), S("exec")}}
	InstReplay = &Schema{Op: "inst_replay", Args: []Arg{S("id"), S("exec")}}
	InstState  = &Schema{Op: "inst_state", Args: []Arg{S("id"), S("what"), Opt(S("key"))}}

	AdminIdle    = &Schema{Op: "admin_idle"}
	AdminInspect = &Schema{Op: "admin_inspect", Args: []Arg{S("what"), S("id"), Opt(S("exec_id"))}}
	AdminList    = &Schema{Op: "admin_list", Args: []Arg{S("status"), S("cscore"), S("cmember"), N("limit"), Opt(F("scores"))}}
	AdminMetrics = &Schema{Op: "admin_metrics", Args: []Arg{N("off"), N("n")}}
	AdminOrphans = &Schema{Op: "admin_orphans", Args: []Arg{N("n")}}
	AdminPrune   = &Schema{Op: "admin_prune", Args: []Arg{
		S("mode"), N("keep"), N("exec_before"), N("inst_before"), N("limit"), All("ids", "id"),
	}}
	AdminMigrate = &Schema{Op: "admin_migrate", Args: []Arg{S("step"), All("ids", "id")}}
	AdminRepart  = &Schema{Op: "admin_repart", Args: []Arg{S("step"), Opt(N("n")), Opt(S("tags")), Opt(S("to")), Opt(S("seq"))}}
	AdminFsck    = &Schema{Op: "admin_fsck", Args: []Arg{S("mode"), S("subject"), All("list", "v")}}
	AdminRepair  = &Schema{Op: "admin_repair", Args: []Arg{N("retention"), S("code"), S("subject"), All("list", "v")}}
	AdminDelete  = &Schema{Op: "admin_delete", Args: []Arg{
		N("retention"), S("mode"), F("force"), N("before"), N("limit"), All("list", "v"),
	}}
	ObTake      = &Schema{Op: "ob_take", Args: []Arg{N("limit"), N("older")}}
	ObApply     = &Schema{Op: "ob_apply", Args: []Arg{S("source"), N("retention"), All("entries", "entry")}}
	ObTrim      = &Schema{Op: "ob_trim", Args: []Arg{All("marks", "dest", "hwm")}}
	NsInit      = &Schema{Op: "ns_init", Args: []Arg{S("mode"), N("partitions"), S("tags")}}
	AdminQueues = &Schema{Op: "admin_queues", Args: []Arg{S("what"), Opt(S("pin")), Opt(N("off")), Opt(N("n"))}}
)

// Schemas lists every declared operation by name (the library builder reads it).
var Schemas = index(OrchEnqueue, OrchFetch, OrchAck, OrchAckFetch, OrchAbandon, OrchRenew, OrchAppend,
	WorkEnqueue, WorkFetch, WorkAck, WorkAckFetch, WorkAckMany, WorkFetchMany, WorkAbandon, WorkDead, WorkRenew, SessionCleanup, SessionRenew,
	InstRead, InstReplay, InstState, AdminIdle, AdminInspect, AdminList, AdminMetrics, AdminOrphans, AdminPrune, AdminMigrate, AdminRepart, AdminQueues, AdminFsck, AdminRepair, AdminDelete, NsInit, ObTake, ObApply, ObTrim)

func index(ss ...*Schema) map[string]*Schema {
	m := map[string]*Schema{}
	for _, s := range ss {
		m[s.Op] = s
	}
	return m
}
