package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

type templates struct{ t *template.Template }

func parseTemplates() (*templates, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"msTime":      msTime,
		"shorten":     shorten,
		"instanceURL": instanceURL,
		"scheduleURL": scheduleURL,
		"pct":         func(f float64) string { return fmt.Sprintf("%.3f%%", f) },
		"num":         func(f float64) string { return fmt.Sprintf("%.2f", f) },
		"ageMs": func(ms int64) string {
			if ms <= 0 {
				return "-"
			}
			return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
		},
		"deref": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
		"confirmURL": func(id, action string) string {
			return instanceURL(id) + "/confirm?" + url.Values{"action": {action}}.Encode()
		},
	}).ParseFS(assets, "templates/*")
	if err != nil {
		return nil, err
	}
	return &templates{t}, nil
}

// msTime renders ms since the epoch as UTC with milliseconds ("-" for 0).
func msTime(ms uint64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02 15:04:05.000Z")
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// envelope holds the fields every event has; summary shows the rest.
var envelope = map[string]bool{"event_id": true, "source_event_id": true, "instance_id": true,
	"execution_id": true, "timestamp_ms": true, "duroxide_version": true, "type": true}

// summary renders an event's own fields as key=value, shortened, for the collapsed line.
func summary(e provider.Event) string {
	b, err := provider.Marshal(e)
	if err != nil {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	var parts []string
	for _, k := range sortedKeysRaw(m) {
		if envelope[k] || string(m[k]) == "null" {
			continue
		}
		v := string(m[k])
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			v = s
		} else {
			var buf bytes.Buffer
			if json.Compact(&buf, m[k]) == nil {
				v = buf.String()
			}
		}
		parts = append(parts, k+"="+shorten(v, 60))
	}
	return shorten(strings.Join(parts, " "), 160)
}

func sortedKeysRaw(m map[string]json.RawMessage) []string {
	s := make(map[string]string, len(m))
	for k := range m {
		s[k] = ""
	}
	return slices.Sorted(maps.Keys(s))
}
