package web

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

func TestSchedulesPagesAndActions(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	c := e.f.Client
	if err := c.CreateSchedule(ctx, "hourly<b>", dx.Schedule{Spec: dx.ScheduleSpec{Cron: "@hourly"},
		Action: dx.ScheduleAction{Orchestration: "Child", Input: 2}, Note: "<i>note</i>"}); err != nil {
		t.Fatal(err)
	}
	su := "/schedules/" + IDSegment("hourly<b>")
	wait := func(what string, cond func(dx.ScheduleInfo) bool) {
		t.Helper()
		var info dx.ScheduleInfo
		var err error
		eventually(t, func() bool {
			info, err = c.GetSchedule(ctx, "hourly<b>")
			return err == nil && cond(info)
		}, func() string { return fmt.Sprintf("timed out waiting for %s: %+v %v", what, info, err) })
	}
	wait("the first turn", func(i dx.ScheduleInfo) bool { return len(i.Next) > 0 })
	list := e.ok("/schedules")
	if !strings.Contains(list, `href="`+su+`"`) || !strings.Contains(list, "hourly&lt;b&gt;") || strings.Contains(list, "<i>") {
		t.Fatalf("list page:\n%s", list)
	}
	var api Schedules
	e.getJSON("/api/schedules", &api)
	if len(api.Schedules) != 1 || api.Schedules[0].ID != "hourly<b>" {
		t.Fatalf("api list: %+v", api)
	}
	body := e.ok(su)
	if !strings.Contains(body, `id="state">active<`) || !strings.Contains(body, `name="csrf" value="`+e.s.CSRFToken()+`"`) {
		t.Fatalf("schedule page:\n%s", body)
	}
	if r := e.post(su+"/pause", url.Values{"reason": {"lunch"}}, true); r.code != 303 {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	wait("the pause", func(i dx.ScheduleInfo) bool { return i.State == "paused" })
	if body := e.ok(su); !strings.Contains(body, `id="state">paused (lunch)<`) || !strings.Contains(body, `id="resume"`) {
		t.Fatalf("paused page:\n%s", body)
	}
	hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", csrfHeader: e.s.CSRFToken()}
	if r := e.do("POST", "/api"+su+"/trigger", strings.NewReader(""), hdr); r.code != 200 {
		t.Fatalf("api trigger: %d %s", r.code, r.body)
	}
	wait("the triggered run", func(i dx.ScheduleInfo) bool { return len(i.Recent) == 1 && i.Recent[0].Why == "trigger" })
	if r := e.post(su+"/backfill", url.Values{"from": {"yesterday"}}, true); r.code != 400 {
		t.Fatalf("bad backfill: %d %s", r.code, r.body)
	}
	if r := e.post("/schedules/nope/pause", url.Values{}, true); r.code != 404 {
		t.Fatalf("pause a missing schedule: %d %s", r.code, r.body)
	}
	if r := e.get("/api/schedules/nope"); r.code != 404 {
		t.Fatalf("a missing schedule: %d %s", r.code, r.body)
	}
	if r := e.post(su+"/delete", url.Values{}, false); r.code != 403 {
		t.Fatalf("delete without CSRF: %d", r.code)
	}
	if r := e.post(su+"/delete", url.Values{}, true); r.code != 303 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	wait("the deletion", func(i dx.ScheduleInfo) bool { return i.State == "deleted" })
	if body := e.ok(su); strings.Contains(body, `id="actions"`) {
		t.Fatalf("a deleted schedule offers actions:\n%s", body)
	}

	ro := serve(t, e.p, Config{ReadOnly: true})
	ro.t = t
	if body := ro.ok(su); strings.Contains(body, `id="actions"`) {
		t.Fatalf("read-only page shows actions:\n%s", body)
	}
	for _, a := range scheduleActions {
		if r := ro.post(su+"/"+a, url.Values{}, true); r.code != 403 {
			t.Fatalf("read-only POST %s: %d", a, r.code)
		}
	}
}
