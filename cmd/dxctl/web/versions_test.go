package web

import (
	"context"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The versions page and API list the versions in flight, linking each to its running instances.
func TestVersionsPageAndAPI(t *testing.T) {
	e := newEnv(t, Config{ReadOnly: true})
	var v Versions
	e.getJSON("/api/versions", &v)
	if len(v.Versions) != 1 || v.Versions[0].Orchestration != "Waiter" || v.Versions[0].Version != "1.0.0" ||
		v.Versions[0].Running != 2 || v.Versions[0].Held != 0 || time.Since(v.Versions[0].NewestStart) > time.Minute {
		t.Fatalf("versions %+v", v)
	}
	body := e.ok("/versions")
	for _, want := range []string{`<a href="/instances?name=Waiter&amp;status=Running&amp;version=1.0.0">Waiter</a>`, "<td>2</td>", `href="/versions"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("versions page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<form") {
		t.Fatal("the versions page has a form")
	}
	list := e.ok(v.Versions[0].ListURL())
	if !strings.Contains(list, ">waiter-1<") {
		t.Fatalf("the row's link does not list its instances:\n%s", list)
	}
}

// Names and versions are text on the page, whatever they hold.
func TestVersionsPageEscapes(t *testing.T) {
	p, _ := newTestProvider(t)
	e := serve(t, p, Config{})
	if body := e.ok("/versions"); !strings.Contains(body, "no instance in flight") {
		t.Fatalf("empty namespace:\n%s", body)
	}
	const name, version = `<script>alert("n")</script>`, `1.0.0+<b>x</b>`
	ctx := context.Background()
	v := version
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{Instance: "i-1", Orchestration: name,
		Version: &v, Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v %v", it, err)
	}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{{
		EventID: 1, InstanceID: "i-1", ExecutionID: 1, DuroxideVersion: "0.1.30",
		Kind: provider.OrchestrationStartedEvent{Name: name, Version: version, Input: "{}"}}},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: name, OrchestrationVersion: version}}); err != nil {
		t.Fatal(err)
	}
	body := e.ok("/versions")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>x") ||
		!strings.Contains(body, html.EscapeString(name)) || !strings.Contains(body, "&lt;b&gt;x&lt;/b&gt;") {
		t.Fatalf("not escaped:\n%s", body)
	}
}
