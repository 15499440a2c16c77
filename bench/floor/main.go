// floor: a hand-written minimal store (floor.lua) driven like dxbench's W1 (hello) and W2
// (fan-out): every instance started up front, then orchestrator turns and activities fetched and
// acked, batch items per script call (ack and fetch of the next in the same call). What it costs
// Redis per orchestration is the floor a lean turn can aim at; bench/callgrind.sh counts it
// (SYSTEMS=floor, FLOOR_BATCH). See docs/storage-v2.md, "The floor". With -layout 2 it drives
// floor2.lua instead: format 2's keys and today's commands for a hello, with lean Lua (W1 only,
// one item per call; SYSTEMS=floor2).
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed floor.lua
var library string

//go:embed floor2.lua
var library2 string

// Event and message bodies about as long as duroxide's JSON ones.
const (
	startMsg  = `{"StartOrchestration":{"instance":"%s","orchestration":"Hello","input":"\"world\"","version":"1.0.0","execution_id":1}}`
	started   = `{"event_id":1,"kind":{"OrchestrationStarted":{"name":"Hello","version":"1.0.0","input":"\"world\""}},"timestamp_ms":1764388000000,"duroxide_version":"0.1.30"}`
	scheduled = `{"event_id":%d,"kind":{"ActivityScheduled":{"name":"Greet","input":"\"world\"","session_id":null,"tag":null}},"timestamp_ms":1764388000000}`
	item      = `{"ActivityExecute":{"instance":"%s","execution_id":1,"id":%d,"name":"Greet","input":"\"world\""}}`
	completed = `{"ActivityCompleted":{"instance":"%s","execution_id":1,"id":%d,"result":"\"hello, world\""}}`
	done      = `{"event_id":%d,"kind":{"OrchestrationCompleted":{"output":"\"hello, world\""}},"timestamp_ms":1764388000000}`
	recRun    = `R|1|Hello|1.0.0`
	recDone   = `C|1|Hello|1.0.0|"hello, world"`
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	n := flag.Int("n", 300, "orchestrations")
	width := flag.Int("fanout", 1, "activities per orchestration (1: W1 hello, 10: W2)")
	batch := flag.Int("batch", 1, "items per fetch and ack call")
	layout := flag.Int("layout", 1, "1: floor.lua, the fewest commands; 2: floor2.lua, format 2's keys and commands (hello only, -batch 1)")
	flag.Parse()
	if *layout == 2 && (*width != 1 || *batch != 1) {
		fmt.Fprintln(os.Stderr, "floor: -layout 2 plays a hello only: -fanout 1 -batch 1")
		os.Exit(2)
	}
	if err := run(*addr, *n, *width, *batch, *layout); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(addr string, n, width, batch, layout int) error {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	lib, pattern, prefix := library, `\{f\}*`, "f_"
	if layout == 2 { // its own function names: both libraries may be loaded on one server
		lib, pattern, prefix = library2, `\{dxfloor2-*`, "f2_"
	}
	if err := c.Do(ctx, "FUNCTION", "LOAD", "REPLACE", lib).Err(); err != nil {
		return err
	}
	// A run starts empty: an earlier run's keys would be taken for this one's.
	if keys, err := c.Keys(ctx, pattern).Result(); err != nil {
		return err
	} else if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			return err
		}
	}
	calls, attempts := 0, 0
	fcall := func(name string, args ...any) ([]any, error) {
		calls++
		if layout == 2 && name != "ofetch" && name != "wfetch" { // every other call is under an attempt key, as dxredis's
			attempts++
			args = append(args, attemptKey(attempts))
		}
		v, err := c.Do(ctx, append([]any{"FCALL", prefix + name, 0}, args...)...).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r, _ := v.([]any)
		return r, nil
	}
	for i := range n {
		id := "i" + strconv.Itoa(i)
		if layout == 2 { // UUID-long ids, as dxbench's
			id = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		}
		if _, err := fcall("start", id, fmt.Sprintf(startMsg, id)); err != nil {
			return err
		}
	}
	finished, nturns := 0, 0
	var turns, items []any // fetched, not yet acked
	for finished < n {
		progress := false
		if len(turns) == 0 {
			r, err := fcall("ofetch", batch, 5000)
			if err != nil {
				return err
			}
			turns = r
		}
		if len(turns) > 0 {
			progress = true
			args := []any{len(turns)}
			nturns += len(turns)
			for _, t := range turns {
				a, fin := decide(t.([]any), width, layout)
				args = append(args, a...)
				if fin {
					finished++
				}
			}
			r, err := fcall("oack", append(args, batch, 5000)...)
			if err != nil {
				return err
			}
			turns = r[1].([]any)
		}
		if len(items) == 0 {
			r, err := fcall("wfetch", batch, 30000)
			if err != nil {
				return err
			}
			items = r
		}
		if len(items) > 0 {
			progress = true
			args := []any{len(items)}
			for _, it := range items {
				f := it.([]any)
				body, act := f[2].(string), f[0].(string)
				var inst string
				var actID int
				if layout == 2 { // the body is the item's JSON (item, above)
					inst = body[strings.Index(body, `"instance":"`)+12:]
					inst = inst[:strings.IndexByte(inst, '"')]
					idAt := body[strings.Index(body, `"id":`)+5:]
					actID, _ = strconv.Atoi(idAt[:strings.IndexByte(idAt, ',')])
				} else { // "<instance>\n<body>", the item id "<instance>:<activity id>"
					inst, _, _ = strings.Cut(body, "\n")
					actID, _ = strconv.Atoi(act[strings.LastIndexByte(act, ':')+1:])
				}
				args = append(args, act, f[1], inst, fmt.Sprintf(completed, inst, actID))
			}
			r, err := fcall("wack", append(args, batch, 30000)...)
			if err != nil {
				return err
			}
			items = r[1].([]any)
		}
		if !progress {
			return fmt.Errorf("stuck with %d of %d finished", finished, n)
		}
	}
	fmt.Printf(`{"system":"floor","layout":%d,"n":%d,"fanout":%d,"batch":%d,"script_calls_per_orch":%.2f,"turns_per_orch":%.2f}`+"\n",
		layout, n, width, batch, float64(calls)/float64(n), float64(nturns)/float64(n))
	return nil
}

// attemptKey is the k-th attempt key of a layout-2 run (dxredis's are as long: 22 characters of
// base64 after the prefix).
func attemptKey(k int) string { return fmt.Sprintf("{dxfloor2-00000000:0}:att:%022d", k) }

// decide plays the orchestration's turn: the first schedules width activities, each completion is
// appended, the last one completes it. It returns the turn's oack arguments and whether it ended.
func decide(t []any, width, layout int) ([]any, bool) {
	id, token, msgs := t[0].(string), t[1], t[2].([]any)
	var hist []any
	if layout == 2 { // one string, an event a line
		for _, line := range strings.Split(strings.TrimSuffix(t[3].(string), "\n"), "\n") {
			if line != "" {
				hist = append(hist, line)
			}
		}
	} else {
		hist = t[3].([]any)
	}
	var events, its []any
	fin := false
	next := len(hist) + 1
	if len(hist) == 0 {
		events = append(events, started)
		next++
		for range width {
			events = append(events, fmt.Sprintf(scheduled, next))
			itemID := id + ":" + strconv.Itoa(next)
			if layout == 2 { // the activity's id (floor2.lua keys its item index by '1:<id>')
				itemID = strconv.Itoa(next)
			}
			its = append(its, itemID, fmt.Sprintf(item, id, next))
			next++
		}
		msgs = msgs[1:] // the start
	}
	have := 0
	for _, h := range hist {
		if strings.Contains(h.(string), "ActivityCompleted") {
			have++
		}
	}
	for range msgs {
		events = append(events, `{"event_id":`+strconv.Itoa(next)+`,"kind":{"ActivityCompleted":{"result":"\"hello, world\""}}}`)
		next++
		have++
	}
	rec := recRun
	if have == width {
		events = append(events, fmt.Sprintf(done, next))
		rec, fin = recDone, true
	}
	taken := len(t[2].([]any))
	args := []any{id, token, taken, rec, len(events)}
	args = append(args, events...)
	args = append(args, len(its)/2)
	return append(args, its...), fin
}
