package web

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// Versions is GET /api/versions: the versions in flight (redisprovider.VersionsInFlight; dxctl
// versions --json prints the same rows).
type Versions struct {
	Versions []VersionRow `json:"versions"`
}

// VersionRow is one orchestration version in flight.
type VersionRow struct {
	Orchestration string    `json:"orchestration"`
	Version       string    `json:"version"`
	Running       int       `json:"running"`
	Held          int       `json:"held"`
	OldestStart   time.Time `json:"oldest_start"`
	NewestStart   time.Time `json:"newest_start"`
}

// ListURL is the instances page of the row's running instances.
func (v VersionRow) ListURL() string {
	return "/instances?" + url.Values{"status": {provider.StatusRunning}, "name": {v.Orchestration}, "version": {v.Version}}.Encode()
}

func (s *Server) versions(ctx context.Context) (Versions, error) {
	vs, err := s.p.VersionsInFlight(ctx)
	if err != nil {
		return Versions{}, err
	}
	out := Versions{Versions: make([]VersionRow, 0, len(vs))}
	for _, v := range vs {
		out.Versions = append(out.Versions, VersionRow(v))
	}
	return out, nil
}

func (s *Server) apiVersions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.versions(ctx)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) pageVersions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.versions(ctx)
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	s.render(w, r, http.StatusOK, "versions.html", page{Title: "Versions", Data: v})
}
