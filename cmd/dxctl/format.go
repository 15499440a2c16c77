package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/duroxide-go/dxredis/provider"
)

// table writes aligned columns (text/tabwriter).
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	}
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = cell(fmt.Sprint(c))
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// cell keeps a value on one table cell: tabs and line breaks would break the alignment.
func cell(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// msTime renders ms since the epoch as UTC RFC 3339 ("-" for 0).
func msTime(ms uint64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(int64(ms)).UTC().Format(time.RFC3339)
}

// eventTime renders an event's timestamp with milliseconds.
func eventTime(ms uint64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z")
}

// age renders a duration rounded for people ("-" for none).
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// envelope holds the Event fields every event has; eventDetails prints the rest.
var envelope = map[string]bool{"event_id": true, "source_event_id": true, "instance_id": true,
	"execution_id": true, "timestamp_ms": true, "duroxide_version": true, "type": true}

// eventDetails renders an event's kind-specific fields as key=value in duroxide's field order
// (null fields left out, long values shortened), preceded by source=#N for completions.
func eventDetails(e provider.Event) string {
	var parts []string
	if e.SourceEventID != nil {
		parts = append(parts, fmt.Sprintf("source=#%d", *e.SourceEventID))
	}
	b, err := provider.Marshal(e)
	if err != nil {
		return "(cannot encode: " + err.Error() + ")"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return string(b)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		if envelope[key] || string(raw) == "null" {
			continue
		}
		parts = append(parts, key+"="+shorten(value(raw), 80))
	}
	return strings.Join(parts, " ")
}

// value renders a field of an event's JSON by dxctl's one rule for values (render): a string
// field as render shows its text, anything else as compact JSON.
func value(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return render(s)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// render is dxctl's one rendering of a stored value (a payload, an output, an event's field, a
// custom status, a KV value), in show, its history and wait: text that is JSON as compact JSON
// (a JSON string keeps its quotes: "released res-1"); any other text as it is, Go-quoted when
// empty or holding spaces or control characters. --json prints values exactly as stored.
func render(s string) string {
	if json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err == nil {
			return buf.String()
		}
	}
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
