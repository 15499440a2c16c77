package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// errorOf maps an error to a status code and a message for the user (never a stack trace).
// apiFail answers an API request with err's status code and message (errorOf).
func (s *Server) apiFail(w http.ResponseWriter, err error) {
	code, msg := s.errorOf(err)
	writeJSON(w, code, apiError{msg})
}

func (s *Server) errorOf(err error) (int, string) {
	var br badRequest
	var cf conflict
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest, br.msg
	case errors.As(err, &cf):
		return http.StatusConflict, cf.msg
	case errors.Is(err, provider.ErrNotFound):
		if pe, ok := provider.AsProviderError(err); ok && strings.HasPrefix(pe.Message, "execution ") {
			return http.StatusNotFound, "execution not found (pruned, or never run)"
		}
		return http.StatusNotFound, "instance not found"
	case errors.Is(err, provider.ErrInvalidInput):
		if pe, ok := provider.AsProviderError(err); ok {
			return http.StatusBadRequest, pe.Message
		}
		return http.StatusBadRequest, err.Error()
	}
	s.log.Error("dxctl web: store error", "err", err)
	return http.StatusBadGateway, "the store failed: " + err.Error()
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if len(r.URL.Path) >= 5 && r.URL.Path[:5] == "/api/" {
		writeJSON(w, code, apiError{msg})
		return
	}
	s.render(w, r, code, "error.html", page{Title: http.StatusText(code), Error: msg, Code: code})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotFound, "no such page")
}

// page is what every template gets.
type page struct {
	Title     string
	Namespace string
	ReadOnly  bool
	CSRF      string
	Msg       string
	Error     string
	Code      int
	Data      any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	p.Namespace, p.ReadOnly, p.CSRF = s.p.Keyspace().Namespace(), s.cfg.ReadOnly, s.csrf
	if p.Msg == "" {
		p.Msg = r.URL.Query().Get("msg")
	}
	var buf bytes.Buffer
	if err := s.tmpl.t.ExecuteTemplate(&buf, name, p); err != nil {
		s.log.Error("dxctl web: rendering a page failed", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func instanceURL(id string) string { return "/instances/" + IDSegment(id) }

// IDSegment is an instance id as one path segment: path-escaped, except that an id a URL path
// cannot carry as a segment ("." and "..", which paths clean away) and any id starting with "~"
// become "~" followed by the id in unpadded base64url.
func IDSegment(id string) string {
	if id == "." || id == ".." || strings.HasPrefix(id, "~") {
		return "~" + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	return url.PathEscape(id)
}

// pathID reads the {id} segment (see IDSegment).
func pathID(r *http.Request) (string, error) {
	seg := r.PathValue("id")
	if rest, ok := strings.CutPrefix(seg, "~"); ok {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil {
			return "", badf("instance segment %q: ~ must be followed by the id in base64url", seg)
		}
		return string(b), nil
	}
	return seg, nil
}

// ---- API ----

func (s *Server) apiOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	o, err := s.overview(ctx)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) apiStats(w http.ResponseWriter, r *http.Request) {
	minutes, step, err := outcomesQuery(r.URL.Query())
	if err != nil {
		s.apiFail(w, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	o, err := ReadOutcomes(ctx, s.p, minutes, step)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) apiInstances(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	if err == nil {
		ctx, cancel := s.ctx(r)
		defer cancel()
		var l List
		if l, err = s.list(ctx, f); err == nil {
			writeJSON(w, http.StatusOK, l)
			return
		}
	}
	s.apiFail(w, err)
}

func (s *Server) apiInstance(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	id, err := pathID(r)
	var d Detail
	if err == nil {
		d, err = s.detail(ctx, id, nil, 0)
	}
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	exec, off, lim, err := parseHistoryQuery(r.URL.Query())
	id, perr := pathID(r)
	if err == nil && perr != nil {
		err = perr
	}
	if err == nil {
		ctx, cancel := s.ctx(r)
		defer cancel()
		var h History
		if h, _, _, err = s.history(ctx, id, exec, off, lim); err == nil {
			writeJSON(w, http.StatusOK, h)
			return
		}
	}
	s.apiFail(w, err)
}

func (s *Server) apiPartitions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	ps, err := s.partitions(ctx)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

// ---- pages ----

func (s *Server) pagePartitions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	ps, err := s.partitions(ctx)
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	s.render(w, r, http.StatusOK, "partitions.html", page{Title: "Partitions", Data: ps})
}

func (s *Server) pageOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	o, err := s.overview(ctx)
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	chart := r.URL.Query().Get("chart")
	if _, ok := chartRanges[chart]; !ok {
		chart = "hour"
	}
	s.render(w, r, http.StatusOK, "overview.html", page{Title: "Overview", Data: overviewView{o, chart}})
}

// overviewView is the overview page's data: the overview and the chart's range (chartRanges).
type overviewView struct {
	Overview
	Chart string
}

type listView struct {
	F        Filter
	L        List
	Statuses []string
	Next     string
	After    string
	Before   string
}

func (s *Server) pageInstances(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	var l List
	if err == nil {
		ctx, cancel := s.ctx(r)
		defer cancel()
		l, err = s.list(ctx, f)
	}
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	v := listView{F: f, L: l, Statuses: statuses}
	if l.NextCursor != "" {
		q := f.Query()
		q.Set("cursor", l.NextCursor)
		v.Next = "/instances?" + q.Encode()
	}
	if f.CreatedAfter > 0 {
		v.After = msRFC(f.CreatedAfter)
	}
	if f.CreatedBefore > 0 {
		v.Before = msRFC(f.CreatedBefore)
	}
	s.render(w, r, http.StatusOK, "instances.html", page{Title: "Instances", Data: v})
}

type eventView struct {
	ID      uint64
	Time    string
	Type    string
	Source  string
	Summary string
	JSON    string
}

type barView struct {
	Bar
	X, W     float64 // percent of the timeline's width
	Duration string
}

type kvView struct{ Key, Value string }

type instanceView struct {
	D          Detail
	H          History
	Terminal   bool
	Events     []eventView
	Bars       []barView
	Turns      []barView
	KV         []kvView
	Prev, Next string
	First      int
	Last       int
}

func (s *Server) pageInstance(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	exec, off, lim, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	h, evs, all, err := s.history(ctx, id, exec, off, lim)
	var d Detail
	if err == nil {
		d, err = s.detail(ctx, id, all, h.ExecutionID)
	}
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	v := instanceView{D: d, H: h, Terminal: d.Instance.Status != provider.StatusRunning,
		First: min(off+1, h.Total), Last: min(off+lim, h.Total)}
	for i, e := range evs {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, h.Events[i], "", "  ")
		ev := eventView{ID: e.EventID, Time: msTime(e.TimestampMs), Type: e.Kind.EventType(), Summary: summary(e), JSON: pretty.String()}
		if e.SourceEventID != nil {
			ev.Source = "#" + strconv.FormatUint(*e.SourceEventID, 10)
		}
		v.Events = append(v.Events, ev)
	}
	span := float64(h.EndMs - h.StartMs)
	view := func(b Bar) barView {
		end := b.EndMs
		if end == 0 {
			end = h.EndMs
		}
		bv := barView{Bar: b, Duration: (time.Duration(end-b.StartMs) * time.Millisecond).String()}
		if span > 0 {
			bv.X = 100 * float64(b.StartMs-h.StartMs) / span
			bv.W = 100 * float64(end-b.StartMs) / span
		}
		bv.W = max(bv.W, 0.4) // an instant step stays visible
		bv.X = min(bv.X, 100-bv.W)
		if b.EndMs == 0 {
			bv.Duration += " so far"
		}
		return bv
	}
	for _, b := range h.Bars {
		v.Bars = append(v.Bars, view(b))
	}
	for _, b := range h.Turns {
		v.Turns = append(v.Turns, view(b))
	}
	for _, k := range slices.Sorted(maps.Keys(d.KV)) {
		v.KV = append(v.KV, kvView{k, d.KV[k]})
	}
	link := func(o int) string {
		q := url.Values{"offset": {strconv.Itoa(o)}, "exec": {strconv.FormatUint(h.ExecutionID, 10)}}
		if lim != defaultHistoryLimit {
			q.Set("limit", strconv.Itoa(lim))
		}
		return instanceURL(id) + "?" + q.Encode() + "#history"
	}
	if off > 0 {
		v.Prev = link(max(off-lim, 0))
	}
	if off+lim < h.Total {
		v.Next = link(off + lim)
	}
	s.render(w, r, http.StatusOK, "instance.html", page{Title: "Instance " + shorten(id, 40), Data: v})
}

type confirmView struct {
	ID     string
	URL    string
	Action string
	Args   actionArgs
	Data   string
}

func (s *Server) pageConfirm(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ReadOnly {
		s.fail(w, r, http.StatusForbidden, "read-only console: actions are disabled")
		return
	}
	q := r.URL.Query()
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	action := q.Get("action")
	known := false
	for _, a := range actionNames {
		known = known || a == action
	}
	if !known {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("unknown action %q", action))
		return
	}
	v := confirmView{ID: id, URL: instanceURL(id), Action: action,
		Args: actionArgs{Reason: q.Get("reason"), Name: q.Get("name")}, Data: q.Get("data")}
	s.render(w, r, http.StatusOK, "confirm.html", page{Title: "Confirm " + action, Data: v})
}

// chartSVG draws the orchestrations completed and failed, from the counts the namespace keeps
// (redisprovider.OutcomeStats, so the chart is full when the server starts), as bars, newest
// right: ?range=hour (the default) or day.
func (s *Server) chartSVG(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "hour"
	}
	rg, ok := chartRanges[name]
	if !ok {
		http.Error(w, "range: want hour or day", http.StatusBadRequest)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	o, err := ReadOutcomes(ctx, s.p, rg.minutes, rg.step)
	if err != nil {
		code, msg := s.errorOf(err)
		http.Error(w, msg, code)
		return
	}
	var peak uint64 = 1
	for _, b := range o.Buckets {
		peak = max(peak, b.OrchestrationsCompleted, b.OrchestrationsFailed)
	}
	type col struct{ X, HC, HF, YC, YF float64 }
	const width, height = 600.0, 120.0
	bw := width / float64(len(o.Buckets))
	var cols []col
	for i, b := range o.Buckets {
		if b.OrchestrationsCompleted == 0 && b.OrchestrationsFailed == 0 {
			continue
		}
		hc := (height - 20) * float64(b.OrchestrationsCompleted) / float64(peak)
		hf := (height - 20) * float64(b.OrchestrationsFailed) / float64(peak)
		cols = append(cols, col{float64(i) * bw, hc, hf, height - hc, height - hf})
	}
	var buf bytes.Buffer
	err = s.tmpl.t.ExecuteTemplate(&buf, "chart.svg", map[string]any{"Cols": cols, "BW": bw / 2, "Peak": peak,
		"Empty": len(cols) == 0, "Caption": rg.caption, "Per": time.Duration(o.StepMs) * time.Millisecond,
		"Completed": o.Totals.OrchestrationsCompleted, "Failed": o.Totals.OrchestrationsFailed})
	if err != nil {
		http.Error(w, "internal error drawing the chart", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(buf.Bytes())
}
