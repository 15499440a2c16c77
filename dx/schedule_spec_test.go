package dx

import (
	"testing"
	"time"
)

func TestScheduleSpecInterval(t *testing.T) {
	f, err := compileSpec(ScheduleSpec{Every: time.Hour, Offset: 15 * time.Minute, Jitter: time.Minute}, "s")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC)
	for _, c := range []struct{ after, want time.Time }{
		{at.Add(-time.Nanosecond), at},
		{at, at.Add(time.Hour)},
		{time.Unix(-1, 0), time.Unix(15*60, 0).UTC()}, // before the epoch
	} {
		if got, ok := f.next(c.after); !ok || !got.Equal(c.want) {
			t.Errorf("next(%v) = %v, want %v", c.after, got, c.want)
		}
	}
	j := f.at(at)
	if j.Before(at) || !j.Before(at.Add(time.Minute)) || !f.at(at).Equal(j) {
		t.Fatalf("jitter of %v: %v", at, j)
	}
	g, _ := compileSpec(ScheduleSpec{Every: time.Hour, Start: at.Add(3 * time.Hour), End: at.Add(4 * time.Hour)}, "s")
	if got, _ := g.next(at); !got.Equal(at.Add(3*time.Hour - 15*time.Minute + time.Hour)) {
		t.Fatalf("first after start: %v", got)
	}
	if _, ok := g.next(at.Add(4 * time.Hour)); ok {
		t.Fatal("a fire time after End")
	}
}

func TestScheduleSpecCronSeconds(t *testing.T) {
	f, err := compileSpec(ScheduleSpec{Cron: "*/20 * * * * *"}, "s")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	if got, _ := f.next(at); !got.Equal(at.Add(20 * time.Second)) {
		t.Fatalf("next: %v", got)
	}
	g, err := compileSpec(ScheduleSpec{Cron: "@daily", TimeZone: "Asia/Tokyo"}, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := g.next(at); !got.Equal(time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("@daily in Tokyo: %v", got)
	}
}
