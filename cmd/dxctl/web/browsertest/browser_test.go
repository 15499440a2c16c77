package browsertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/duroxide-go/dxredis/cmd/dxctl/web"
	"github.com/duroxide-go/dxredis/cmd/dxctl/web/webfixture"
	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// chromium finds the browser: $DXCTL_CHROMIUM, else chromium (Debian's package) on PATH. Without
// one the test skips, unless DXCTL_WEB_REQUIRE_BROWSER=1 (set by CI) makes it fail.
func chromium(t *testing.T) string {
	if p := os.Getenv("DXCTL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (install Debian's chromium package, or set DXCTL_CHROMIUM to a Chromium binary)"
	if os.Getenv("DXCTL_WEB_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; DXCTL_WEB_REQUIRE_BROWSER=1 makes this a failure")
	}
	t.Skip(msg)
	return ""
}

// screenshot saves a PNG of the whole page under $DXCTL_WEB_SCREENSHOTS (docs/web-console.md's pictures:
// DXCTL_WEB_SCREENSHOTS=$PWD/docs), else under the test's temporary directory.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleInChromium(t *testing.T) {
	bin := chromium(t)
	shots := os.Getenv("DXCTL_WEB_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}

	// The namespace: the fixture (a fan-out with a failing activity, a timer and a child; two
	// instances waiting for an event, one under a hostile id) plus a few more fan-outs between
	// chart samples, so that the chart has bars.
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: mr.Addr(), Namespace: "shop",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	fx, err := webfixture.Fill(fctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	srv := httptest.NewUnstartedServer(nil)
	s, err := web.New(web.Config{Provider: p, AllowedHosts: web.AllowedHostsFor(srv.Listener.Addr().String())})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s.Handler()
	srv.Start()
	defer srv.Close()
	if err := s.Sample(fctx); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		for k := range round + 1 {
			id, err := fx.Client.Start(fctx, "FanOut", 3, dx.WithInstanceID(fmt.Sprintf("batch-%d-%d", round, k)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fx.Client.Wait(fctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Sample(fctx); err != nil {
			t.Fatal(err)
		}
	}

	// Worker items tagged "gpu" (which the fixture's runtime does not run), one of them locked.
	enqueueTagged := func(tag string, id uint64) {
		t.Helper()
		if err := p.EnqueueForWorker(fctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "render-farm", ExecutionID: 1,
			ID: id, Name: "Render", Input: "{}", Tag: &tag}}); err != nil {
			t.Fatal(err)
		}
	}
	for id := range uint64(3) {
		enqueueTagged("gpu", id+1)
	}
	gpu, err := provider.TagFilterTags("gpu")
	if err != nil {
		t.Fatal(err)
	}
	if it, err := p.FetchWorkItem(fctx, time.Hour, 0, nil, gpu); err != nil || it == nil {
		t.Fatalf("fetch a gpu item: %+v, %v", it, err)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var dialogs []string
	browser, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			mu.Lock()
			dialogs = append(dialogs, d.Message)
			mu.Unlock()
		}
	}))
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // starts the browser, with no deadline
		t.Fatalf("starting %s: %v", bin, err)
	}
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return n
	}
	base := srv.URL
	// waitURL waits until a navigation the page started has reached a URL holding want.
	waitURL := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			loc, err := chromedp.Run(ctx, chromedp.Location())
			if err == nil && strings.Contains(loc, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page is at %q (%v), want a URL holding %q", loc, err, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Overview: counts, the chart's bars, the pause button.
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#counts")))
	if got := text(`[data-field="instances"]`); got != "24" {
		t.Fatalf("overview: %s instances, want 24 (4 of the fixture, 10 fan-outs with their children)", got)
	}
	do("chart", chromedp.Poll[chromedp.Void](`document.getElementById("chart").complete && document.getElementById("chart").naturalWidth > 0`,
		chromedp.WithPollingTimeout(10*time.Second)))
	do("pause", chromedp.Click(chromedp.CSS("#pause")))
	if got := text("#pause"); got != "Resume auto-refresh" {
		t.Fatalf("after pause the button reads %q", got)
	}
	// The worker queue per tag; a tag that appears later is drawn by the refresh.
	if got := text("#worker-tags tbody"); got != "gpu2001" {
		t.Fatalf("worker tags: %q, want the gpu row (2 ready, 1 locked)", got)
	}
	enqueueTagged("tpu", 9)
	do("resume", chromedp.Click(chromedp.CSS("#pause")))
	// Resuming refreshes at once from /api/overview.
	do("refresh", chromedp.Poll[chromedp.Void](`document.getElementById("refresh-state").textContent.startsWith("refreshed")`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if got := text("#worker-tags tbody"); got != "gpu2001tpu1000" {
		t.Fatalf("worker tags after the refresh: %q, want the gpu and tpu rows", got)
	}
	screenshot(t, ctx, shots, "web-overview.png")

	// The list, filtered through the form.
	do("list", chromedp.Navigate(base+"/instances"), chromedp.WaitVisible(chromedp.CSS("#filters")),
		chromedp.SetValue(chromedp.CSS(`input[name="prefix"]`), "order-"),
		chromedp.Submit(chromedp.CSS(`input[name="prefix"]`)))
	waitURL("prefix=order-")
	do("filtered", chromedp.WaitVisible(chromedp.CSS("#instances")))
	if n := eval(`document.querySelectorAll("#instances tbody td.id a[href^='/instances/']").length`); n != 3 {
		t.Fatalf("filtered list: %d links (rows and parent links), want 3 (the fan-out, its child and the child's parent link)", n)
	}
	if got := text("#instances tbody tr:first-child td.id a"); got != webfixture.FanOut {
		t.Fatalf("first row %q", got)
	}
	do("all", chromedp.Navigate(base+"/instances?limit=20"), chromedp.WaitVisible(chromedp.CSS("#instances")))
	screenshot(t, ctx, shots, "web-instances.png")

	// The fan-out's page: the timeline draws its bars, events expand to JSON, the child is linked.
	do("fan-out", chromedp.Navigate(base+"/instances?prefix=order-"), chromedp.WaitVisible(chromedp.CSS("#instances")),
		chromedp.Click(chromedp.CSS(`a[href="/instances/order-fanout"]`)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if n := eval(`Array.from(document.querySelectorAll("#timeline rect.bar:not(.turn)")).filter(r => r.getBoundingClientRect().width > 0 && r.getBoundingClientRect().height > 0).length`); n != 7 {
		t.Fatalf("%d visible bars, want 7 (5 activities, a timer, a sub-orchestration)", n)
	}
	// The turns, in one lane: the start, 5 completions, the timer, the child's completion.
	if n := eval(`Array.from(document.querySelectorAll("#turns rect.bar.turn")).filter(r => r.getBoundingClientRect().width > 0 && r.getBoundingClientRect().height > 0).length`); n != 8 {
		t.Fatalf("%d visible turn bars, want 8", n)
	}
	if n := eval(`document.querySelectorAll("#timeline rect.bar.suborchestration, #timeline rect.bar.failed, #timeline rect.bar.timer").length`); n != 3 {
		t.Fatalf("%d sub-orchestration, failed and timer bars, want 3", n)
	}
	if n := eval(`document.querySelector("#events details pre").checkVisibility() ? 1 : 0`); n != 0 {
		t.Fatal("a collapsed event shows its JSON")
	}
	do("expand", chromedp.Click(chromedp.CSS("#events details summary")))
	if n := eval(`document.querySelector("#events details pre").checkVisibility() ? 1 : 0`); n != 1 {
		t.Fatal("an expanded event hides its JSON")
	}
	if js := text("#events details[open] pre"); !strings.Contains(js, `"type": "OrchestrationStarted"`) {
		t.Fatalf("expanded event: %s", js)
	}
	screenshot(t, ctx, shots, "web-instance.png")
	do("child", chromedp.Click(chromedp.CSS(`#children a`)), chromedp.WaitVisible(chromedp.CSS("#details")))
	if got := text("#instance-id"); got != webfixture.Child {
		t.Fatalf("child link opened %q", got)
	}

	// Cancel through the form: the confirmation page, then the status changes to Failed.
	do("cancel", chromedp.Navigate(base+"/instances/"+webfixture.Waiter), chromedp.WaitVisible(chromedp.CSS("#cancel-form")),
		chromedp.SetValue(chromedp.CSS(`#cancel-form input[name="reason"]`), "stopped from the browser test"),
		chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("#confirm-button")))
	if got := text("h1"); got != "Confirm: cancel" {
		t.Fatalf("confirmation page %q", got)
	}
	do("confirm", chromedp.Click(chromedp.CSS("#confirm-button")), chromedp.WaitVisible(chromedp.CSS("#msg")))
	if got := text("#msg"); !strings.Contains(got, "cancellation requested") {
		t.Fatalf("after the cancel: %q", got)
	}
	deadline := time.Now().Add(15 * time.Second)
	for text("#status") != "Failed" {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled instance is still %s", text("#status"))
		}
		do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#status")))
	}
	if body := text("#details"); !strings.Contains(body, "stopped from the browser test") {
		t.Fatalf("the error does not give the reason: %s", body)
	}

	// The hostile id is text: in the heading, in the list, and no script of it ran.
	do("hostile", chromedp.Navigate(base+"/instances/"+url.PathEscape(webfixture.Hostile)), chromedp.WaitVisible(chromedp.CSS("#instance-id")))
	if got := text("#instance-id"); got != webfixture.Hostile {
		t.Fatalf("hostile id shown as %q", got)
	}
	if n := eval(`document.querySelectorAll("script").length`); n != 1 {
		t.Fatalf("%d script elements on the hostile instance's page, want 1 (app.js)", n)
	}
	do("hostile in list", chromedp.Navigate(base+"/instances?status=Running&sort=status"), chromedp.WaitVisible(chromedp.CSS("#instances")))
	if n := eval(fmt.Sprintf(`Array.from(document.querySelectorAll("#instances td.id a")).filter(a => a.textContent === %q).length`, webfixture.Hostile)); n != 1 {
		t.Fatalf("the hostile id is not a link text in the list (%d)", n)
	}
	if n := eval(`document.querySelectorAll("script").length`); n != 1 {
		t.Fatalf("%d script elements on the list", n)
	}
	// Partitions: one row per partition (this namespace has one), reached from the navigation.
	do("partitions", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("nav")),
		chromedp.Click(chromedp.CSS(`nav a[href="/partitions"]`)), chromedp.WaitVisible(chromedp.CSS("#partitions")))
	if n := eval(`document.querySelectorAll("#partitions tbody tr").length`); n != 1 {
		t.Fatalf("%d partition rows, want 1", n)
	}
	if got := text("#partitions tbody td:nth-child(2)"); got != "shop:0" {
		t.Fatalf("partition 0's tag shown as %q", got)
	}
	// Dead letters: two activities parked past their attempts; one is redriven from its button.
	for _, id := range []uint64{40, 41} {
		tag := "pay"
		if err := p.EnqueueForWorker(fctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "invoice-7", ExecutionID: 1,
			ID: id, Name: "ChargeCard", Input: "{}", Tag: &tag}}); err != nil {
			t.Fatal(err)
		}
		pay, _ := provider.TagFilterTags("pay")
		it, err := p.FetchWorkItem(fctx, time.Hour, 0, nil, pay)
		if err != nil || it == nil {
			t.Fatalf("fetch pay: %v %v", it, err)
		}
		d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 11, MaxAttempts: 10, Message: "{}",
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: "invoice-7", ExecutionID: 1, ActivityName: "ChargeCard", ActivityID: id}}}}
		if err := p.ParkWorkItem(fctx, it.LockToken, d); err != nil {
			t.Fatal(err)
		}
	}
	do("dead", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("nav")),
		chromedp.Click(chromedp.CSS(`nav a[href="/dead"]`)), chromedp.WaitVisible(chromedp.CSS("#dead")))
	if n := eval(`document.querySelectorAll("#dead tbody tr").length`); n != 2 {
		t.Fatalf("%d dead letter rows, want 2", n)
	}
	screenshot(t, ctx, shots, "web-dead.png")
	do("redrive", chromedp.Click(chromedp.CSS(`#dead tbody tr:first-child button`)), chromedp.WaitVisible(chromedp.CSS("#msg")))
	if got := text("#msg"); !strings.Contains(got, "redriven") {
		t.Fatalf("after the redrive: %q", got)
	}
	if n := eval(`document.querySelectorAll("#dead tbody tr").length`); n != 1 {
		t.Fatalf("%d dead letter rows after the redrive, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) > 0 {
		t.Fatalf("a script of the data ran: dialogs %q", dialogs)
	}
}
