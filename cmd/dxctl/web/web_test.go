package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/cmd/dxctl/web/webfixture"
	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/testwait"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

const testHost = "127.0.0.1:8080"

type env struct {
	t  *testing.T
	p  *redisprovider.Provider
	f  *webfixture.Fixture
	s  *Server
	h  http.Handler
	mr *miniredis.Miniredis
}

// newEnv fills a namespace on miniredis with the fixture and serves it with cfg (Provider and
// AllowedHosts filled in).
func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	p, mr := newTestProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := webfixture.Fill(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	e := serve(t, p, cfg)
	e.f, e.mr = f, mr
	return e
}

// serve serves p with cfg (Provider and AllowedHosts filled in).
func serve(t *testing.T, p *redisprovider.Provider, cfg Config) *env {
	t.Helper()
	cfg.Provider = p
	if cfg.AllowedHosts == nil {
		cfg.AllowedHosts = AllowedHostsFor(testHost)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, p: p, s: s, h: s.Handler()}
}

// newTestProvider opens an empty namespace (and returns the embedded miniredis, nil on a server).
func newTestProvider(t *testing.T) (*redisprovider.Provider, *miniredis.Miniredis) {
	t.Helper()
	// On embedded miniredis, or on the real server at DXREDIS_TEST_ADDR in a fresh namespace that
	// is dropped afterwards.
	addr, ns := os.Getenv("DXREDIS_TEST_ADDR"), "web"
	var mr *miniredis.Miniredis
	if addr == "" {
		mr = miniredis.RunT(t)
		addr = mr.Addr()
	} else {
		ns = fmt.Sprintf("webtest-%d", time.Now().UnixNano())
	}
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: addr, Namespace: ns,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mr == nil {
			if _, err := redisprovider.DropNamespace(context.Background(), p.Client(), ns); err != nil {
				t.Error(err)
			}
		}
		_ = p.Close()
	})
	return p, mr
}

type resp struct {
	code int
	body string
	hdr  http.Header
}

func (e *env) do(method, target string, body io.Reader, hdr map[string]string) resp {
	e.t.Helper()
	r := httptest.NewRequest(method, target, body)
	r.Host = testHost
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	b := w.Body.String()
	if strings.Contains(b, "goroutine ") || strings.Contains(b, "panic") {
		e.t.Fatalf("%s %s: the response shows a stack trace or panic: %.300s", method, target, b)
	}
	return resp{w.Code, b, w.Header()}
}

func (e *env) get(target string) resp { return e.do("GET", target, nil, nil) }

// ok GETs target and wants 200.
func (e *env) ok(target string) string {
	e.t.Helper()
	r := e.get(target)
	if r.code != 200 {
		e.t.Fatalf("GET %s: %d %.500s", target, r.code, r.body)
	}
	return r.body
}

func (e *env) getJSON(target string, v any) {
	e.t.Helper()
	if err := json.Unmarshal([]byte(e.ok(target)), v); err != nil {
		e.t.Fatalf("GET %s: %v", target, err)
	}
}

// post sends a form (with the CSRF token unless csrf is false).
func (e *env) post(target string, form url.Values, csrf bool) resp {
	e.t.Helper()
	if csrf {
		form = cloneForm(form)
		form.Set("csrf", e.s.CSRFToken())
	}
	return e.do("POST", target, strings.NewReader(form.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

func cloneForm(f url.Values) url.Values {
	out := url.Values{}
	for k, v := range f {
		out[k] = append([]string{}, v...)
	}
	return out
}

func iu(id string) string { return "/instances/" + IDSegment(id) }

// eventually polls cond until it holds, failing the test with fail's message after 10 s.
func eventually(t testing.TB, cond func() bool, fail func() string) {
	t.Helper()
	testwait.For(t, 10*time.Second, cond, fail)
}

// waitState polls the instance's state until it is want.
func (e *env) waitState(id string, want dx.State) {
	e.t.Helper()
	var st dx.Status
	var err error
	eventually(e.t, func() bool {
		st, err = e.f.Client.Status(context.Background(), id)
		return err == nil && st.State == want
	}, func() string { return fmt.Sprintf("instance %q: state %s (err %v), want %s", id, st.State, err, want) })
}

func TestOverviewPageAndAPI(t *testing.T) {
	e := newEnv(t, Config{})
	var o Overview
	e.getJSON("/api/overview", &o)
	m, err := e.p.GetSystemMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The counts read the status indexes directly (keys.go's layout): they must agree with the
	// provider's own metrics, so a layout change fails here.
	if o.Instances != m.TotalInstances || o.ByStatus["Running"] != m.RunningInstances ||
		o.ByStatus["Completed"] != m.CompletedInstances || o.ByStatus["Failed"] != m.FailedInstances || o.Instances != 4 {
		t.Fatalf("overview %+v, metrics %+v", o, m)
	}
	if o.Namespace != e.p.Keyspace().Namespace() || len(o.Samples) != 0 {
		t.Fatalf("overview %+v", o)
	}
	body := e.ok("/")
	for _, want := range []string{`data-field="by_status.Running">2<`, `data-field="instances">4<`, "kept 24 hours", `src="/chart.svg?range=hour"`, `id="pause"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("overview page lacks %q:\n%s", want, body)
		}
	}
	// The fixture's fan-out and its child completed: the chart shows them from the start.
	if svg := e.ok("/chart.svg"); !strings.Contains(svg, "the last hour, one bar per minute: 2 completed, 0 failed") ||
		!strings.Contains(svg, `class="c"`) {
		t.Fatalf("chart: %s", svg)
	}
	for _, a := range []string{"/static/app.js", "/static/style.css"} {
		if e.ok(a) == "" {
			t.Fatalf("%s is empty", a)
		}
	}
}

// The overview breaks the worker queue down by tag, in the API and on the page (tags escaped).
func TestOverviewWorkerTags(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	const hostileTag = `<b>"gpu"</b>`
	// The fixture's runtime runs untagged items only: these stay queued.
	for i, tag := range []string{"gpu", "gpu", hostileTag} {
		it := provider.WorkItem{Kind: provider.ActivityExecute{Instance: webfixture.Waiter, ExecutionID: 1, ID: uint64(100 + i),
			Name: "Work", Input: "1", Tag: &tag}}
		if err := e.p.EnqueueForWorker(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	gpu, err := provider.TagFilterTags("gpu")
	if err != nil {
		t.Fatal(err)
	}
	if it, err := e.p.FetchWorkItem(ctx, time.Minute, 0, nil, gpu); err != nil || it == nil {
		t.Fatalf("fetch gpu item: %+v, %v", it, err)
	}
	var o Overview
	e.getJSON("/api/overview", &o)
	want := []WorkerTag{{Tag: hostileTag, Queued: 1, Ready: 1}, {Tag: "gpu", Queued: 2, Ready: 1, Locked: 1}}
	if !slices.Equal(o.Queues.WorkerTags, want) {
		t.Fatalf("worker tags %+v, want %+v", o.Queues.WorkerTags, want)
	}
	body := e.ok("/")
	for _, row := range []string{`<tr><td>gpu</td><td>1</td><td>0</td><td>0</td><td>1</td></tr>`,
		`<tr><td>&lt;b&gt;&#34;gpu&#34;&lt;/b&gt;</td><td>1</td><td>0</td><td>0</td><td>0</td></tr>`} {
		if !strings.Contains(body, row) {
			t.Fatalf("overview page lacks %s:\n%s", row, body)
		}
	}
	if strings.Contains(body, hostileTag) {
		t.Fatal("the tag is not escaped")
	}
}

func TestChartSamples(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if err := e.s.Sample(ctx); err != nil { // the baseline
		t.Fatal(err)
	}
	if err := e.f.Client.RaiseEvent(ctx, webfixture.Waiter, "go", "done"); err != nil {
		t.Fatal(err)
	}
	e.waitState(webfixture.Waiter, dx.StateCompleted)
	if err := e.s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	var o Overview
	e.getJSON("/api/overview", &o)
	if len(o.Samples) != 1 || o.Samples[0].Completed != 1 || o.Samples[0].Failed != 0 {
		t.Fatalf("samples %+v", o.Samples)
	}
	if svg := e.ok("/chart.svg"); !strings.Contains(svg, "3 completed, 0 failed") {
		t.Fatalf("chart: %s", svg)
	}
}

func TestRunSamplerStopsWithItsContext(t *testing.T) {
	e := newEnv(t, Config{SampleEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.s.RunSampler(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.s.samples.all()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the sampler took no samples")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

func TestInstanceListAndFilters(t *testing.T) {
	e := newEnv(t, Config{})
	ids := func(q string) (List, []string) {
		t.Helper()
		var l List
		e.getJSON("/api/instances?"+q, &l)
		var out []string
		for _, i := range l.Instances {
			out = append(out, i.ID)
		}
		return l, out
	}
	// By creation: the waiters and the fan-out start close together, so take the order the
	// index gives and check that it is the creation order.
	l, all := ids("")
	if len(all) != 4 || !l.Indexed || l.NextCursor != "" {
		t.Fatalf("all: %q %+v", all, l)
	}
	for i := 1; i < len(l.Instances); i++ {
		if l.Instances[i].CreatedAt < l.Instances[i-1].CreatedAt {
			t.Fatalf("not in creation order: %+v", l.Instances)
		}
	}
	running := func() (out []string) {
		for _, i := range l.Instances {
			if i.Status == "Running" {
				out = append(out, i.ID)
			}
		}
		return out
	}()
	if l, got := ids("status=running&sort=status"); len(got) != 2 || !l.Indexed {
		t.Fatalf("running by status entry: %q %+v", got, l)
	}
	if l, got := ids("status=Completed"); len(got) != 2 || l.Indexed || l.Scanned != 4 {
		t.Fatalf("completed by creation: %q %+v", got, l)
	}
	if _, got := ids("name=Child"); strings.Join(got, "|") != webfixture.Child {
		t.Fatalf("name: %q", got)
	}
	if _, got := ids("prefix=order-&version=0.0.0"); len(got) != 0 {
		t.Fatalf("version 0.0.0: %q", got)
	}
	if _, got := ids("prefix=order-"); len(got) != 2 {
		t.Fatalf("prefix: %q", got)
	}
	if l, got := ids("created_before=2000-01-01T00:00:00Z"); len(got) != 0 || l.NextCursor != "" || l.Scanned != 1 {
		t.Fatalf("created before 2000: %q %+v", got, l)
	}
	if _, got := ids("created_after=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))); len(got) != 0 {
		t.Fatalf("created in an hour: %q", got)
	}
	// Cursor paging, one by one, indexed and scanned.
	for _, q := range []string{"limit=1", "limit=1&prefix=", "limit=1&name=Waiter", "limit=1&status=Running"} {
		var got []string
		cursor := ""
		for i := 0; ; i++ {
			l, page := ids(q + "&cursor=" + url.QueryEscape(cursor))
			got = append(got, page...)
			if cursor = l.NextCursor; cursor == "" || i > 10 {
				break
			}
		}
		want := all
		if strings.Contains(q, "=Waiter") || strings.Contains(q, "Running") {
			want = running
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("paging %q: %q, want %q", q, got, want)
		}
	}
	// A bounded scan says how far it got.
	e.s.cfg.ScanLimit = 2
	if l, got := ids("name=Child"); len(got) != 0 || l.Scanned != 2 || l.NextCursor == "" || l.ScannedThrough == 0 {
		t.Fatalf("bounded scan: %q %+v", got, l)
	}
	e.s.cfg.ScanLimit = 500

	body := e.ok("/instances?status=Completed&name=FanOut")
	if !strings.Contains(body, `href="/instances/order-fanout"`) || strings.Contains(body, `href="/instances/order-fanout-child"`) ||
		!strings.Contains(body, "this page examined 4 instances") {
		t.Fatalf("list page:\n%s", body)
	}
	body = e.ok("/instances?limit=1")
	if !strings.Contains(body, `id="next"`) || !strings.Contains(body, "Answered by the store") {
		t.Fatalf("list page with a next page:\n%s", body)
	}
}

func TestBadFilters(t *testing.T) {
	e := newEnv(t, Config{})
	for _, q := range []string{"status=bogus", "sort=status", "sort=random", "limit=0", "limit=x", "limit=100000",
		"created_after=yesterday", "created_before=-5", "cursor=" + url.QueryEscape("not a cursor!")} {
		r := e.get("/api/instances?" + q)
		var ae apiError
		if r.code != 400 || json.Unmarshal([]byte(r.body), &ae) != nil || ae.Error == "" {
			t.Fatalf("api %q: %d %s", q, r.code, r.body)
		}
		r = e.get("/instances?" + q)
		if r.code != 400 || !strings.Contains(r.body, `id="error"`) {
			t.Fatalf("page %q: %d %s", q, r.code, r.body)
		}
	}
	for _, q := range []string{"exec=0", "exec=x", "offset=-1", "limit=0", "limit=5000"} {
		if r := e.get("/api/instances/" + webfixture.FanOut + "/history?" + q); r.code != 400 {
			t.Fatalf("history %q: %d %s", q, r.code, r.body)
		}
		if r := e.get(iu(webfixture.FanOut) + "?" + q); r.code != 400 {
			t.Fatalf("instance page %q: %d %s", q, r.code, r.body)
		}
	}
	if r := e.get("/api/instances/" + webfixture.FanOut + "/history?exec=9"); r.code != 404 || !strings.Contains(r.body, "execution not found") {
		t.Fatalf("missing execution: %d %s", r.code, r.body)
	}
}

func TestInstancePageAndAPI(t *testing.T) {
	e := newEnv(t, Config{})
	var d Detail
	e.getJSON("/api/instances/"+webfixture.FanOut, &d)
	if d.Instance.Status != "Completed" || d.Input == nil || *d.Input != "5" || d.KV["total"] == "" ||
		d.CustomStatus == nil || *d.CustomStatus.Status != `{"phase":"done"}` || len(d.Executions) != 1 ||
		strings.Join(d.Children, ",") != webfixture.Child || len(d.Ancestors) != 0 || d.Error != nil {
		t.Fatalf("detail %+v", d)
	}
	var c Detail
	e.getJSON("/api/instances/"+webfixture.Child, &c)
	if strings.Join(c.Ancestors, ",") != webfixture.FanOut || c.Instance.Parent != webfixture.FanOut {
		t.Fatalf("child %+v", c)
	}
	var h History
	e.getJSON("/api/instances/"+webfixture.FanOut+"/history", &h)
	kinds := map[string]int{}
	for _, b := range h.Bars {
		kinds[b.Kind+"/"+b.Outcome]++
		if b.EndMs < b.StartMs || b.StartMs < h.StartMs || b.EndMs > h.EndMs {
			t.Fatalf("bar %+v outside [%d, %d]", b, h.StartMs, h.EndMs)
		}
	}
	if kinds["activity/completed"] != 4 || kinds["activity/failed"] != 1 || kinds["timer/fired"] != 1 ||
		kinds["suborchestration/completed"] != 1 || h.Total != len(h.Events) || h.ExecutionID != 1 {
		t.Fatalf("history: kinds %v, %d events of %d", kinds, len(h.Events), h.Total)
	}
	// Paging: 3 events from offset 2, with the bars of the scheduling events among them.
	var p History
	e.getJSON("/api/instances/"+webfixture.FanOut+"/history?offset=2&limit=3&exec=1", &p)
	if len(p.Events) != 3 || p.Offset != 2 || p.Total != h.Total || len(p.Bars) != 3 {
		t.Fatalf("page: %d events, %d bars, %+v", len(p.Events), len(p.Bars), p)
	}

	body := e.ok(iu(webfixture.FanOut))
	for _, want := range []string{`id="status">Completed<`, `href="/instances/order-fanout-child"`, `{&#34;phase&#34;:&#34;done&#34;}`,
		"<td>total</td>", `id="timeline"`, `class="bar activity failed"`, `class="bar suborchestration completed"`,
		`class="bar timer fired"`, "<details class=\"event\">", "ActivityScheduled", `id="delete"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("instance page lacks %q:\n%s", want, body)
		}
	}
	// 7 steps, and 8 turns: the start, 5 activity completions, the timer and the child's completion.
	if n, turns := strings.Count(body, `<rect class="bar`), strings.Count(body, `<rect class="bar turn"`); n-turns != 7 || turns != 8 {
		t.Fatalf("%d step bars and %d turns, want 7 and 8", n-turns, turns)
	}
	if len(h.Turns) != 8 || h.Turns[0].Name != "OrchestrationStarted" || h.Turns[0].EventID != 1 {
		t.Fatalf("turns %+v", h.Turns)
	}
	if body := e.ok(iu(webfixture.Child)); strings.Contains(body, `id="delete"`) || !strings.Contains(body, `id="delete-root"`) {
		t.Fatalf("a finished child offers its own delete:\n%s", body)
	}
	body = e.ok(iu(webfixture.FanOut) + "?limit=2")
	if !strings.Contains(body, `id="next-events"`) || strings.Count(body, `<details class="event">`) != 2 {
		t.Fatalf("paged instance page:\n%s", body)
	}
	body = e.ok(iu(webfixture.Waiter))
	if !strings.Contains(body, `id="cancel"`) || strings.Contains(body, `id="delete"`) {
		t.Fatalf("running instance page:\n%s", body)
	}
}

func TestMissingInstance(t *testing.T) {
	e := newEnv(t, Config{})
	for _, target := range []string{iu("nope"), iu("nope") + "/confirm?action=cancel&x=1"} {
		r := e.get(target)
		if target == iu("nope") && (r.code != 404 || !strings.Contains(r.body, "instance not found") || !strings.Contains(r.hdr.Get("Content-Type"), "text/html")) {
			t.Fatalf("GET %s: %d %s", target, r.code, r.body)
		}
	}
	for _, target := range []string{"/api/instances/nope", "/api/instances/nope/history"} {
		r := e.get(target)
		if r.code != 404 || !strings.Contains(r.body, `"error": "instance not found"`) {
			t.Fatalf("GET %s: %d %s", target, r.code, r.body)
		}
	}
	for _, a := range actionNames {
		if r := e.post("/api/instances/nope/"+a, url.Values{"name": {"q"}}, true); r.code != 404 {
			t.Fatalf("POST %s on a missing instance: %d %s", a, r.code, r.body)
		}
	}
	if r := e.get("/no/such/page"); r.code != 404 || !strings.Contains(r.body, "no such page") {
		t.Fatalf("unknown page: %d %s", r.code, r.body)
	}
}

func TestHostileIDsAndPayloadsAreText(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	long := strings.Repeat("<b>\"'ü", 64*1024/9) // about 64 KiB
	payload := `"<img src=x onerror=alert(1)>"`
	for _, id := range []string{long} {
		if _, err := e.f.Client.Start(ctx, "Waiter", json.RawMessage(payload), dx.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		e.waitState(id, dx.StateRunning)
	}
	for _, id := range []string{webfixture.Hostile, long} {
		body := e.ok(iu(id))
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Contains(body, `<b>"'`) {
			t.Fatalf("instance page of %.40q holds raw markup", id)
		}
		if id == webfixture.Hostile && !strings.Contains(body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&#39;&#34;&amp;amp;ü→🙂`) {
			t.Fatalf("hostile id not shown as text:\n%s", body)
		}
		var d Detail
		e.getJSON("/api/instances/"+url.PathEscape(id), &d)
		if d.Instance.ID != id {
			t.Fatalf("api id %.40q", d.Instance.ID)
		}
		r := e.get(iu(id) + "/confirm?action=cancel&reason=" + url.QueryEscape("<script>x</script>"))
		if r.code != 200 || strings.Contains(r.body, "<script>x") {
			t.Fatalf("confirm page: %d", r.code)
		}
	}
	body := e.ok("/instances")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `<b>"'`) || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("list page holds raw markup")
	}
	if body := e.ok("/instances?msg=" + url.QueryEscape("<script>m</script>")); strings.Contains(body, "<script>m") {
		t.Fatal("the message is not escaped")
	}
	// The hostile id survives an action's round trip through the form.
	r := e.post(iu(webfixture.Hostile)+"/cancel", url.Values{"reason": {"<i>why</i>"}}, true)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != iu(webfixture.Hostile)+"?msg=cancellation+requested%3A+the+instance+fails+at+its+next+turn" {
		t.Fatalf("cancel hostile: %d %q", r.code, r.hdr.Get("Location"))
	}
	e.waitState(webfixture.Hostile, dx.StateFailed)
}

func TestActions(t *testing.T) {
	e := newEnv(t, Config{})
	hdr := map[string]string{"Content-Type": "application/json", csrfHeader: e.s.CSRFToken()}
	post := func(id, action, body string) resp {
		return e.do("POST", "/api/instances/"+url.PathEscape(id)+"/"+action, strings.NewReader(body), hdr)
	}
	if r := post(webfixture.Waiter, "raise", `{"name":"go","data":"<b>"}`); r.code != 200 {
		t.Fatalf("raise: %d %s", r.code, r.body)
	}
	e.waitState(webfixture.Waiter, dx.StateCompleted)
	if r := post(webfixture.Waiter, "cancel", `{}`); r.code != 409 {
		t.Fatalf("cancel a completed instance: %d %s", r.code, r.body)
	}
	for _, bad := range []string{`{"data":"1"}`, `not json`, `{"name":"q","data":1}x`} {
		if r := post(webfixture.Hostile, "enqueue", bad); r.code != 400 {
			t.Fatalf("enqueue %s: %d %s", bad, r.code, r.body)
		}
	}
	if r := e.post("/api/instances/"+url.PathEscape(webfixture.Hostile)+"/raise", url.Values{"name": {"go"}, "data": {"{"}}, true); r.code != 400 || !strings.Contains(r.body, "not valid JSON") {
		t.Fatalf("raise with bad JSON: %d %s", r.code, r.body)
	}
	if r := post(webfixture.Hostile, "enqueue", `{"name":"q","data":{"a":1}}`); r.code != 200 {
		t.Fatalf("enqueue: %d %s", r.code, r.body)
	}
	if r := post(webfixture.Hostile, "delete", `{}`); r.code != 409 {
		t.Fatalf("delete a running instance: %d %s", r.code, r.body)
	}
	if r := post(webfixture.Child, "delete", `{}`); r.code != 400 || !strings.Contains(r.body, "sub-orchestration") {
		t.Fatalf("delete a child: %d %s", r.code, r.body)
	}
	// The HTML flow: the confirmation page carries the CSRF token; its POST acts and redirects.
	body := e.ok(iu(webfixture.Hostile) + "/confirm?action=cancel&reason=enough")
	if !strings.Contains(body, `name="csrf" value="`+e.s.CSRFToken()+`"`) || !strings.Contains(body, `value="enough"`) {
		t.Fatalf("confirm page:\n%s", body)
	}
	if r := e.get(iu(webfixture.Hostile) + "/confirm?action=explode"); r.code != 400 {
		t.Fatalf("unknown action: %d", r.code)
	}
	r := e.post(iu(webfixture.Hostile)+"/cancel", url.Values{"reason": {"enough"}}, true)
	if r.code != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	e.waitState(webfixture.Hostile, dx.StateFailed)
	if body := e.ok(iu(webfixture.Hostile)); !strings.Contains(body, "enough") || !strings.Contains(body, `id="status">Failed<`) {
		t.Fatalf("cancelled instance page:\n%s", body)
	}
	r = e.post(iu(webfixture.FanOut)+"/delete", url.Values{}, true)
	if r.code != http.StatusSeeOther || !strings.HasPrefix(r.hdr.Get("Location"), "/instances?msg=deleted+2+instance") {
		t.Fatalf("delete: %d %q %s", r.code, r.hdr.Get("Location"), r.body)
	}
	if r := e.get(iu(webfixture.Child)); r.code != 404 {
		t.Fatalf("the deleted tree's child: %d", r.code)
	}
	if r := e.post(iu("nope")+"/cancel", url.Values{}, true); r.code != 404 || !strings.Contains(r.body, "cancel failed: instance not found") {
		t.Fatalf("cancel a missing instance: %d %s", r.code, r.body)
	}
}

func TestCSRF(t *testing.T) {
	e := newEnv(t, Config{})
	for _, form := range []url.Values{{}, {"csrf": {"wrong"}}, {"csrf": {e.s.CSRFToken() + "x"}}} {
		for _, target := range []string{iu(webfixture.Waiter) + "/cancel", "/api/instances/" + webfixture.Waiter + "/cancel"} {
			if r := e.post(target, form, false); r.code != 403 || !strings.Contains(r.body, "CSRF") {
				t.Fatalf("POST %s %v: %d %s", target, form, r.code, r.body)
			}
		}
	}
	r := e.do("POST", "/api/instances/"+webfixture.Waiter+"/cancel", strings.NewReader(`{}`),
		map[string]string{"Content-Type": "application/json", csrfHeader: "nope"})
	if r.code != 403 {
		t.Fatalf("wrong header: %d", r.code)
	}
	// Nothing happened: the waiter still waits (it would fail at once if cancelled; proven idle
	// by a raise that completes it with the event's data).
	if err := e.f.Client.RaiseEvent(context.Background(), webfixture.Waiter, "go", "still here"); err != nil {
		t.Fatal(err)
	}
	st, err := e.f.Client.Wait(context.Background(), webfixture.Waiter)
	if err != nil || st.State != dx.StateCompleted || st.Output != `"still here"` {
		t.Fatalf("waiter: %+v %v", st, err)
	}
}

func TestReadOnly(t *testing.T) {
	e := newEnv(t, Config{ReadOnly: true})
	body := e.ok(iu(webfixture.Waiter))
	if strings.Contains(body, `id="actions"`) || strings.Contains(body, "confirm") || !strings.Contains(body, "read-only") {
		t.Fatalf("read-only page shows actions:\n%s", body)
	}
	if r := e.get(iu(webfixture.Waiter) + "/confirm?action=cancel"); r.code != 403 {
		t.Fatalf("confirm: %d", r.code)
	}
	for _, a := range actionNames {
		for _, target := range []string{iu(webfixture.Waiter) + "/" + a, "/api/instances/" + webfixture.Waiter + "/" + a} {
			if r := e.post(target, url.Values{"name": {"go"}}, true); r.code != 403 || !strings.Contains(r.body, "read-only") {
				t.Fatalf("POST %s: %d %s", target, r.code, r.body)
			}
		}
	}
	if st, _ := e.f.Client.Status(context.Background(), webfixture.Waiter); st.State != dx.StateRunning {
		t.Fatalf("waiter %s", st.State)
	}
}

func TestToken(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, Config{Token: token})
	if r := e.get("/api/overview"); r.code != 401 {
		t.Fatalf("no token: %d", r.code)
	}
	if r := e.get("/"); r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/login" {
		t.Fatalf("page without token: %d %q", r.code, r.hdr.Get("Location"))
	}
	for _, h := range []map[string]string{{"Authorization": "Bearer nope"}, {tokenHeader: token + "x"}, {"Cookie": cookieName + "=s3cret"}} {
		if r := e.do("GET", "/api/overview", nil, h); r.code != 401 {
			t.Fatalf("%v: %d", h, r.code)
		}
	}
	for _, h := range []map[string]string{{"Authorization": "Bearer " + token}, {tokenHeader: token}, {"Cookie": cookieName + "=" + token}} {
		if r := e.do("GET", "/api/overview", nil, h); r.code != 200 {
			t.Fatalf("%v: %d", h, r.code)
		}
	}
	r := e.get("/instances?status=Running&token=" + token)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/instances?status=Running" ||
		!strings.Contains(r.hdr.Get("Set-Cookie"), cookieName+"="+token) || !strings.Contains(r.hdr.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("?token=: %d %v", r.code, r.hdr)
	}
	if r := e.get("/instances?token=wrong"); r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/login" || r.hdr.Get("Set-Cookie") != "" {
		t.Fatalf("wrong ?token=: %d %v", r.code, r.hdr)
	}
	if body := e.ok("/login"); !strings.Contains(body, `name="token"`) {
		t.Fatal(body)
	}
	if r := e.do("POST", "/login", strings.NewReader("token=bad"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.code != 401 {
		t.Fatalf("bad login: %d", r.code)
	}
	r = e.do("POST", "/login", strings.NewReader("token="+token), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if r.code != http.StatusSeeOther || !strings.Contains(r.hdr.Get("Set-Cookie"), cookieName+"="+token) {
		t.Fatalf("login: %d %v", r.code, r.hdr)
	}
	// A POST needs the token as well as the CSRF token.
	if r := e.post("/api/instances/"+webfixture.Waiter+"/cancel", url.Values{}, true); r.code != 401 {
		t.Fatalf("POST without token: %d", r.code)
	}
}

func TestHostCheck(t *testing.T) {
	e := newEnv(t, Config{})
	for _, h := range []string{"evil.example:8080", "127.0.0.1:9999", "localhost", ""} {
		if r := e.do("GET", "/api/overview", nil, map[string]string{"Host": h}); r.code != http.StatusMisdirectedRequest {
			t.Fatalf("Host %q: %d", h, r.code)
		}
	}
	for _, h := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"} {
		if r := e.do("GET", "/api/overview", nil, map[string]string{"Host": h}); r.code != 200 {
			t.Fatalf("Host %q: %d", h, r.code)
		}
	}
	if got := AllowedHostsFor("10.1.2.3:80"); strings.Join(got, ",") != "10.1.2.3:80" {
		t.Fatalf("non-loopback hosts %q", got)
	}
}

func TestServeStopsWithItsContext(t *testing.T) {
	e := newEnv(t, Config{AllowedHosts: []string{}, AnyHost: true})
	srv := httptest.NewUnstartedServer(nil)
	ln := srv.Listener
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Serve(ctx, ln) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAwkwardIDs: ids a path cleans away or that look escaped reach their instance.
func TestAwkwardIDs(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	hdr := map[string]string{"Content-Type": "application/json", csrfHeader: e.s.CSRFToken()}
	for _, id := range []string{".", "..", "~", "~x", "a/../b", "%2F", "?x#y", " "} {
		if _, err := e.f.Client.Start(ctx, "Waiter", "x", dx.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		e.waitState(id, dx.StateRunning)
		if body := e.ok(iu(id)); !strings.Contains(body, `id="instance-id">`+template.HTMLEscapeString(id)+`<`) {
			t.Fatalf("page of %q (%s) shows another instance", id, iu(id))
		}
		var d Detail
		e.getJSON("/api"+iu(id), &d)
		var h History
		e.getJSON("/api"+iu(id)+"/history", &h)
		if d.Instance.ID != id || h.Total == 0 {
			t.Fatalf("api of %q: %q, %d events", id, d.Instance.ID, h.Total)
		}
		if r := e.do("POST", "/api"+iu(id)+"/cancel", strings.NewReader(`{}`), hdr); r.code != 200 {
			t.Fatalf("cancel %q: %d %s", id, r.code, r.body)
		}
		e.waitState(id, dx.StateFailed)
	}
	for _, target := range []string{"/instances/~!!", "/api/instances/~!!", "/api/instances/~!!/history"} {
		if r := e.get(target); r.code != 400 {
			t.Fatalf("%s: %d", target, r.code)
		}
	}
}

func TestExecutions(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if _, err := e.f.Client.Start(ctx, "Looper", 0, dx.WithInstanceID("looper")); err != nil {
		t.Fatal(err)
	}
	e.waitState("looper", dx.StateCompleted)
	var d Detail
	e.getJSON("/api/instances/looper", &d)
	if len(d.Executions) != 3 || d.Instance.Execution != 3 || *d.Input != "2" {
		t.Fatalf("detail %+v", d)
	}
	var h History
	e.getJSON("/api/instances/looper/history?exec=1", &h)
	if h.ExecutionID != 1 || !strings.Contains(string(h.Events[len(h.Events)-1]), `"OrchestrationContinuedAsNew"`) {
		t.Fatalf("execution 1: %+v", h)
	}
	body := e.ok("/instances/looper?exec=2")
	if !strings.Contains(body, "History of execution 2:") || strings.Count(body, `href="/instances/looper?exec=`) != 3 ||
		!strings.Contains(body, `<tr class="current"><td><a href="/instances/looper?exec=2#history">2</a>`) {
		t.Fatalf("execution 2's page:\n%s", body)
	}
}

// Turns are derived from a history with fixed timestamps: each trigger event starts one, which
// ends at the last event recorded before the next trigger.
func TestInstanceTurns(t *testing.T) {
	p, _ := newTestProvider(t)
	e := serve(t, p, Config{})
	ctx := context.Background()
	const id, t0 = "turns-1", uint64(1_700_000_000_000)
	src := func(n uint64) *uint64 { return &n }
	ev := func(eid, at uint64, source *uint64, k provider.EventKind) provider.Event {
		return provider.Event{EventID: eid, InstanceID: id, ExecutionID: 1, TimestampMs: t0 + at, SourceEventID: source,
			DuroxideVersion: "0.1.29", Kind: k}
	}
	version := "1.0.0"
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "T",
		Input: "{}", Version: &version, ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v, %v", it, err)
	}
	out := `"ok"`
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev(1, 0, nil, provider.OrchestrationStartedEvent{Name: "T", Version: version, Input: "{}"}),
		ev(2, 5, nil, provider.ActivityScheduledEvent{Name: "A", Input: "{}"}),
		ev(3, 8, nil, provider.TimerCreatedEvent{FireAtMs: t0 + 200}),
		ev(4, 100, src(2), provider.ActivityCompletedEvent{Result: "1"}),
		ev(5, 130, nil, provider.ActivityScheduledEvent{Name: "B", Input: "{}"}),
		ev(6, 200, src(3), provider.TimerFiredEvent{FireAtMs: t0 + 200}),
		ev(7, 300, src(5), provider.ActivityCompletedEvent{Result: "2"}),
		ev(8, 340, nil, provider.OrchestrationCompletedEvent{Output: out}),
	}, Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "T", OrchestrationVersion: version,
		Output: &out}}); err != nil {
		t.Fatal(err)
	}
	turn := func(eid, start, end, done uint64, name string) Bar {
		return Bar{EventID: eid, Kind: "turn", Name: name, StartMs: t0 + start, EndMs: t0 + end, Outcome: "completed", DoneEvent: done}
	}
	want := []Bar{turn(1, 0, 8, 3, "OrchestrationStarted"), turn(4, 100, 130, 5, "ActivityCompleted"),
		turn(6, 200, 200, 6, "TimerFired"), turn(7, 300, 340, 8, "ActivityCompleted")}
	var h History
	e.getJSON("/api/instances/"+id+"/history", &h)
	if !slices.Equal(h.Turns, want) || h.StartMs != t0 || h.EndMs != t0+340 {
		t.Fatalf("turns %+v, want %+v", h.Turns, want)
	}
	// A page holds the turns triggered on it.
	e.getJSON("/api/instances/"+id+"/history?offset=3&limit=3", &h)
	if !slices.Equal(h.Turns, want[1:3]) {
		t.Fatalf("page turns %+v, want %+v", h.Turns, want[1:3])
	}
	// On the page: one lane, a bar per turn on the execution's scale (340 ms wide).
	body := e.ok(iu(id))
	for _, bar := range []string{`<rect class="bar turn" x="0.00" y="1" width="2.35" height="8"><title>#1–#3 turn on OrchestrationStarted: 8ms</title>`,
		`<rect class="bar turn" x="29.41" y="1" width="8.82" height="8"><title>#4–#5 turn on ActivityCompleted: 30ms</title>`,
		`<rect class="bar turn" x="58.82" y="1" width="0.40" height="8"><title>#6–#6 turn on TimerFired: 0s</title>`,
		`<rect class="bar turn" x="88.24" y="1" width="11.76" height="8"><title>#7–#8 turn on ActivityCompleted: 40ms</title>`} {
		if !strings.Contains(body, bar) {
			t.Fatalf("instance page lacks %s:\n%s", bar, body)
		}
	}
	if n := strings.Count(body, `<tr class="turns"`); n != 1 {
		t.Fatalf("%d turn lanes, want 1", n)
	}
}

// The partitions page and API describe every partition of a namespace of several (read-only:
// nothing but GET answers).
func TestPartitionsPageAndAPI(t *testing.T) {
	addr, ns := os.Getenv("DXREDIS_TEST_ADDR"), fmt.Sprintf("webparts-%d", time.Now().UnixNano())
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	ctx := context.Background()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Partitions: 12,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = redisprovider.DropNamespace(context.Background(), p.Client(), ns)
		_ = p.Close()
	})
	c := dx.NewClient(p)
	for i := range 20 {
		if _, err := c.Start(ctx, "Work", i, dx.WithInstanceID(fmt.Sprint("i-", i))); err != nil {
			t.Fatal(err)
		}
	}
	e := serve(t, p, Config{})
	var ps Partitions
	e.getJSON("/api/partitions", &ps)
	if ps.Namespace != ns || len(ps.Partitions) != 12 {
		t.Fatalf("partitions %+v", ps)
	}
	var queued uint64
	for i, x := range ps.Partitions {
		if x.Partition != i || x.Tag != p.Keyspace().Tags()[i] || x.Node == "" || x.NodePartitions != 12 {
			t.Fatalf("partition %d: %+v", i, x)
		}
		queued += x.Orchestrator
	}
	if queued != 20 {
		t.Fatalf("%d queued starts over the partitions, want 20", queued)
	}
	body := e.ok("/partitions")
	for i, x := range ps.Partitions {
		row := fmt.Sprintf("<tr><td>%d</td><td><code>%s</code></td><td>%d</td><td>%s</td>", i, x.Tag, x.Slot, x.Node)
		if !strings.Contains(body, row) {
			t.Fatalf("partitions page lacks %s:\n%s", row, body)
		}
	}
	if !strings.Contains(e.ok("/"), `<a href="/partitions">Partitions</a>`) {
		t.Fatal("the navigation does not link the partitions page")
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		for _, path := range []string{"/partitions", "/api/partitions"} {
			if r := e.do(m, path, nil, nil); r.code == 200 {
				t.Fatalf("%s %s: 200", m, path)
			}
		}
	}
	// The overview counts the instances of every partition.
	rt := dx.NewRuntime(p, dx.Options{PollTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	dx.Register(rt, "Work", func(_ dx.Context, n int) (int, error) { return n, nil })
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	for i := range 20 {
		if _, err := c.Wait(ctx, fmt.Sprint("i-", i)); err != nil {
			t.Fatal(err)
		}
	}
	var o Overview
	e.getJSON("/api/overview", &o)
	if o.Instances != 20 || o.ByStatus["Completed"] != 20 {
		t.Fatalf("overview of a namespace of 12 partitions: %d instances, %v", o.Instances, o.ByStatus)
	}
}

// The outcome counts live in the namespace: a console started afterwards serves them and draws
// them at once (GET /api/stats, the chart), over the last hour or day.
func TestStatsSurviveConsoleRestart(t *testing.T) {
	e := newEnv(t, Config{})
	var first Outcomes
	e.getJSON("/api/stats", &first)
	// The fixture: the fan-out and its child completed; the fan-out's activities ran, one failed.
	if first.Totals.OrchestrationsCompleted != 2 || first.Totals.OrchestrationsFailed != 0 ||
		first.Totals.ActivitiesCompleted == 0 || first.Totals.ActivitiesFailed != 1 || len(first.Buckets) != 60 || first.StepMs != 60_000 {
		t.Fatalf("stats %+v", first)
	}
	again := serve(t, e.p, Config{}) // a new console on the same namespace
	var second Outcomes
	again.getJSON("/api/stats?last=24h&step=15m", &second)
	if second.Totals != first.Totals || len(second.Buckets) != 96 || second.StepMs != 15*60_000 {
		t.Fatalf("after a console restart: %+v, want the totals %+v", second, first.Totals)
	}
	if svg := again.ok("/chart.svg?range=day"); !strings.Contains(svg, "the last 24 hours, one bar per 15 minutes: 2 completed, 0 failed") {
		t.Fatalf("day chart: %s", svg)
	}
	if body := again.ok("/?chart=day"); !strings.Contains(body, `src="/chart.svg?range=day"`) {
		t.Fatalf("overview with the day chart:\n%s", body)
	}
	for _, q := range []string{"last=2d", "last=90s", "last=1h&step=7m", "step=x", "last=0"} {
		if r := again.get("/api/stats?" + q); r.code != http.StatusBadRequest || !strings.Contains(r.body, `"error"`) {
			t.Fatalf("/api/stats?%s: %d %s", q, r.code, r.body)
		}
	}
}

// The overview shows the caps per tag: running against the cap, items waiting because of it.
func TestOverviewCaps(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if err := e.p.SetTagLimits(ctx, "gpu", redisprovider.TagLimits{Concurrency: 1, Rate: 2.5}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		tag := "gpu"
		it := provider.WorkItem{Kind: provider.ActivityExecute{Instance: webfixture.Waiter, ExecutionID: 1, ID: uint64(200 + i),
			Name: "Work", Input: "1", Tag: &tag}}
		if err := e.p.EnqueueForWorker(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	gpu, _ := provider.TagFilterTags("gpu")
	if it, err := e.p.FetchWorkItem(ctx, time.Minute, 0, nil, gpu); err != nil || it == nil {
		t.Fatalf("fetch: %+v %v", it, err)
	}
	var o Overview
	e.getJSON("/api/overview", &o)
	if want := []TagCap{{Tag: "gpu", Concurrency: 1, Rate: 2.5, Running: 1, Waiting: 1}}; !slices.Equal(o.Queues.Caps, want) {
		t.Fatalf("caps %+v, want %+v", o.Queues.Caps, want)
	}
	if body := e.ok("/"); !strings.Contains(body, `<tr><td>gpu</td><td>1</td><td>1</td><td>2.5</td><td>1</td></tr>`) {
		t.Fatalf("overview page lacks the caps row:\n%s", body)
	}
}

// parkOne enqueues an activity of the fixture's waiter, fetches it and parks it as a dead letter.
func parkOne(t *testing.T, p *redisprovider.Provider, id uint64) {
	t.Helper()
	ctx := context.Background()
	tag := "pay"
	if err := p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: webfixture.Waiter,
		ExecutionID: 1, ID: id, Name: "Pay", Input: "1", Tag: &tag}}); err != nil {
		t.Fatal(err)
	}
	f, _ := provider.TagFilterTags("pay")
	it, err := p.FetchWorkItem(ctx, time.Minute, 0, nil, f)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v %v", it, err)
	}
	d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 11, MaxAttempts: 10, Message: "{}",
		MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: webfixture.Waiter, ExecutionID: 1, ActivityName: "Pay", ActivityID: id}}}}
	if err := p.ParkWorkItem(ctx, it.LockToken, d); err != nil {
		t.Fatal(err)
	}
}

// The dead letters page and API list the parked activities; redrive and discard are POSTs with the
// CSRF token, refused by a read-only console.
func TestDeadLettersPage(t *testing.T) {
	e := newEnv(t, Config{})
	parkOne(t, e.p, 300)
	parkOne(t, e.p, 301)
	var d DeadLetters
	e.getJSON("/api/dead", &d)
	if len(d.DeadLetters) != 2 || d.DeadLetters[0].Name != "Pay" || !strings.Contains(d.DeadLetters[0].Error, "poison: activity Pay#300") {
		t.Fatalf("dead letters %+v", d)
	}
	first, second := d.DeadLetters[0].ID, d.DeadLetters[1].ID
	body := e.ok("/dead")
	if !strings.Contains(body, `action="/dead/`+first+`/redrive"`) || !strings.Contains(body, "Pay#301") {
		t.Fatalf("dead letters page:\n%s", body)
	}
	if r := e.post("/dead/"+first+"/redrive", url.Values{}, false); r.code != http.StatusForbidden {
		t.Fatalf("redrive without the CSRF token: %d", r.code)
	}
	if r := e.post("/dead/"+first+"/redrive", url.Values{}, true); r.code != http.StatusSeeOther || !strings.Contains(r.hdr.Get("Location"), "redriven") {
		t.Fatalf("redrive: %d %v", r.code, r.hdr)
	}
	r := e.do("POST", "/api/dead/"+second+"/discard", nil, map[string]string{"X-Csrf-Token": e.s.CSRFToken()})
	if r.code != http.StatusOK || !strings.Contains(r.body, "discarded") {
		t.Fatalf("discard: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/api/dead/"+second+"/discard", nil, map[string]string{"X-Csrf-Token": e.s.CSRFToken()}); r.code != http.StatusNotFound {
		t.Fatalf("a second discard: %d %s", r.code, r.body)
	}
	e.getJSON("/api/dead", &d)
	if len(d.DeadLetters) != 0 {
		t.Fatalf("left: %+v", d)
	}
	parkOne(t, e.p, 302)
	ro := serve(t, e.p, Config{ReadOnly: true})
	if body := ro.ok("/dead"); strings.Contains(body, "<form") || !strings.Contains(body, "Pay#302") {
		t.Fatalf("read-only dead letters page:\n%s", body)
	}
	e.getJSON("/api/dead", &d)
	if r := ro.post("/dead/"+d.DeadLetters[0].ID+"/redrive", url.Values{}, true); r.code != http.StatusForbidden {
		t.Fatalf("read-only redrive: %d", r.code)
	}
}
