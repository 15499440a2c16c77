package web

import (
	"context"
	"sync"
	"time"
)

// Sample is one point of the overview chart: how many instances completed and failed during the
// interval that ended at At (differences of the status counts; a purge can hide some).
type Sample struct {
	At        time.Time `json:"at"`
	Completed uint64    `json:"completed"`
	Failed    uint64    `json:"failed"`
}

// sampler keeps the last n samples, in memory only: the chart starts empty with each server.
type sampler struct {
	mu       sync.Mutex
	n        int
	samples  []Sample
	primed   bool
	lastDone uint64
	lastFail uint64
}

func newSampler(n int) *sampler { return &sampler{n: n} }

// add records the counts read at t; the first call only sets the baseline.
func (s *sampler) add(t time.Time, completed, failed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.primed {
		d := Sample{At: t.UTC()}
		if completed > s.lastDone {
			d.Completed = completed - s.lastDone
		}
		if failed > s.lastFail {
			d.Failed = failed - s.lastFail
		}
		s.samples = append(s.samples, d)
		if len(s.samples) > s.n {
			s.samples = s.samples[len(s.samples)-s.n:]
		}
	}
	s.primed, s.lastDone, s.lastFail = true, completed, failed
}

func (s *sampler) all() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample{}, s.samples...)
}

// Sample reads the status counts once and records a chart point (RunSampler calls it on every
// tick; tests call it directly).
func (s *Server) Sample(ctx context.Context) error {
	_, by, err := s.statusCounts(ctx)
	if err != nil {
		return err
	}
	s.samples.add(time.Now(), by["Completed"], by["Failed"])
	return nil
}

// RunSampler samples every SampleEvery until ctx ends.
func (s *Server) RunSampler(ctx context.Context) {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	for {
		if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("dxctl web: sampling the status counts failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
