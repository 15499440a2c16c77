package redisprovider_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestMeasureCapCommands counts the Redis commands of 1000 fetches and acks of a tag's items
// without caps, with a concurrency cap, a rate limit and both (INFO commandstats of a throw-away
// server; docs/operations.md, "Caps per tag"): DXREDIS_CAPS_MEASURE=1 go test -run
// TestMeasureCapCommands -v ./redisprovider/. It reports; it checks nothing.
func TestMeasureCapCommands(t *testing.T) {
	if os.Getenv("DXREDIS_CAPS_MEASURE") == "" {
		t.Skip("a measurement: DXREDIS_CAPS_MEASURE=1")
	}
	for _, mode := range []string{"none", "conc", "rate", "both"} {
		srv := redistest.Start(t)
		ctx := context.Background()
		p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Namespace: "m", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		l := redisprovider.TagLimits{}
		switch mode {
		case "conc":
			l.Concurrency = 1000
		case "rate":
			l.Rate = 1e6
			l.Burst = 1000
		case "both":
			l.Concurrency, l.Rate, l.Burst = 1000, 1e6, 1000
		}
		if mode != "none" {
			if err := p.SetTagLimits(ctx, "api", l); err != nil {
				t.Fatal(err)
			}
		}
		const n = 1000
		for i := range n {
			wEnqueue(t, p, wAct("m", uint64(i+1), "api", ""))
		}
		p.Client().ConfigResetStat(ctx)
		f := wFilter(t, provider.TagFilterTags, "api")
		for range n {
			it := wFetch(t, p, wLongLock, nil, f)
			if it == nil {
				t.Fatal("none")
			}
			if err := p.AckWorkItem(ctx, it.LockToken, &provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "m", ExecutionID: 1, ID: 1, Result: "1"}}); err != nil {
				t.Fatal(err)
			}
		}
		info := p.Client().Info(ctx, "commandstats").Val()
		total := 0
		var lines []string
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				var calls int
				name, rest, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
				c, _, _ := strings.Cut(rest, ",")
				for _, ch := range c {
					calls = calls*10 + int(ch-'0')
				}
				total += calls
				lines = append(lines, name+"="+c)
			}
		}
		t.Logf("%s: %.2f commands per fetch+ack (%v)", mode, float64(total)/n, lines)
		p.Close()
		srv.Kill()
	}
}
