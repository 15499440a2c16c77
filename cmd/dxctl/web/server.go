// Package web is dxctl web: a browser console for one dxredis namespace. The pages (Go html/template,
// a little plain JS, assets embedded) are one client of a JSON API under /api/ that serves the
// same data. Nothing here is imported by the core packages (dx, provider, redisprovider).
//
// Safety: every request passes the Host check (DNS rebinding) and, when a token is set, the token
// check (header or cookie, compared in constant time); every POST carries the server's CSRF token;
// read-only mode refuses every POST with 403. Templates escape every value.
package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis/redisprovider"
)

//go:embed templates/* static/*
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Provider is the namespace's store.
	Provider *redisprovider.Provider
	// ReadOnly removes every action: no forms, and every POST is refused with 403.
	ReadOnly bool
	// Token, when set, is required on every request: "Authorization: Bearer <token>", the
	// X-Dxctl-Token header, or the cookie the login form (or ?token= once) sets.
	Token string
	// AllowedHosts are the Host header values accepted (host:port, compared case-insensitively).
	// Empty accepts any Host only when AnyHost is set; otherwise every request is refused.
	AllowedHosts []string
	// AnyHost disables the Host check (a non-loopback wildcard bind, where a token is required).
	AnyHost bool
	// SampleEvery is how often the overview chart samples completions and failures (default 5 s).
	SampleEvery time.Duration
	// ScanLimit bounds the instances one list page examines for filters the store does not index
	// (default 500).
	ScanLimit int
	// RequestTimeout bounds the store calls of one request (default 30 s).
	RequestTimeout time.Duration
	// Logger receives request failures (default: discard).
	Logger *slog.Logger
}

// Server serves the console. Create it with New; Handler serves requests, Serve also runs the
// chart's sampler.
type Server struct {
	cfg     Config
	p       *redisprovider.Provider
	csrf    string
	mux     *http.ServeMux
	hosts   map[string]bool
	tmpl    *templates
	samples *sampler
	log     *slog.Logger
}

const (
	cookieName  = "dxctl_token"
	csrfField   = "csrf"
	csrfHeader  = "X-Csrf-Token"
	tokenHeader = "X-Dxctl-Token"
)

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Provider == nil {
		return nil, errors.New("web: no provider")
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 5 * time.Second
	}
	if cfg.ScanLimit <= 0 {
		cfg.ScanLimit = 500
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	t, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, p: cfg.Provider, csrf: hex.EncodeToString(b[:]), hosts: map[string]bool{},
		tmpl: t, samples: newSampler(120), log: cfg.Logger}
	for _, h := range cfg.AllowedHosts {
		s.hosts[strings.ToLower(h)] = true
	}
	s.routes()
	return s, nil
}

// AllowedHostsFor returns the Host values a browser sends for a server listening on addr
// (host:port as bound): the address itself and, for a loopback address, localhost, 127.0.0.1
// and [::1] with the same port.
func AllowedHostsFor(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	hosts := []string{net.JoinHostPort(host, port)}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		hosts = append(hosts, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)
	}
	return hosts
}

// CSRFToken is the token every POST must carry (form field "csrf" or the X-Csrf-Token header).
func (s *Server) CSRFToken() string { return s.csrf }

// Handler serves the pages and the API.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Serve serves on ln and samples the chart until ctx ends, then shuts the server down and
// returns once both have stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.RunSampler(sctx)
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(shut)
		cancel()
		<-errc
	case err = <-errc:
	}
	stop()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.pageOverview)
	m.HandleFunc("GET /chart.svg", s.chartSVG)
	m.HandleFunc("GET /instances", s.pageInstances)
	m.HandleFunc("GET /instances/{id}", s.pageInstance)
	m.HandleFunc("GET /instances/{id}/confirm", s.pageConfirm)
	m.HandleFunc("GET /partitions", s.pagePartitions)
	m.HandleFunc("GET /login", s.pageLogin)
	m.HandleFunc("POST /login", s.postLogin)
	m.HandleFunc("GET /api/overview", s.apiOverview)
	m.HandleFunc("GET /api/instances", s.apiInstances)
	m.HandleFunc("GET /api/instances/{id}", s.apiInstance)
	m.HandleFunc("GET /api/instances/{id}/history", s.apiHistory)
	m.HandleFunc("GET /api/partitions", s.apiPartitions)
	m.HandleFunc("GET /api/stats", s.apiStats)
	m.HandleFunc("GET /versions", s.pageVersions)
	m.HandleFunc("GET /api/versions", s.apiVersions)
	m.HandleFunc("GET /schedules", s.pageSchedules)
	m.HandleFunc("GET /schedules/{id}", s.pageSchedule)
	m.HandleFunc("GET /api/schedules", s.apiSchedules)
	m.HandleFunc("GET /api/schedules/{id}", s.apiSchedule)
	for _, a := range scheduleActions {
		m.HandleFunc("POST /api/schedules/{id}/"+a, s.apiScheduleAction(a))
		m.HandleFunc("POST /schedules/{id}/"+a, s.pageScheduleAction(a))
	}
	for _, a := range actionNames {
		m.HandleFunc("POST /api/instances/{id}/"+a, s.apiAction(a))
		m.HandleFunc("POST /instances/{id}/"+a, s.pageAction(a))
	}
	m.HandleFunc("GET /dead", s.pageDead)
	m.HandleFunc("GET /api/dead", s.apiDead)
	for _, a := range deadActions {
		m.HandleFunc("POST /api/dead/{id}/"+a, s.apiDeadAction(a))
		m.HandleFunc("POST /dead/{id}/"+a, s.pageDeadAction(a))
	}
	m.HandleFunc("/", s.notFound)
	s.mux = m
}

// guard wraps every request: security headers, panic recovery, the Host check, the token, and
// for POSTs read-only mode and the CSRF token.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("dxctl web: panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v))
				s.fail(w, r, http.StatusInternalServerError, "internal error (see the server's log)")
			}
		}()
		if !s.cfg.AnyHost && !s.hosts[strings.ToLower(r.Host)] {
			http.Error(w, "dxctl web: unexpected Host header (DNS rebinding protection): open the console by the address it listens on", http.StatusMisdirectedRequest)
			return
		}
		if s.cfg.Token != "" && !s.authorized(w, r) {
			return
		}
		if r.Method == http.MethodPost && r.URL.Path != "/login" {
			if s.cfg.ReadOnly {
				s.fail(w, r, http.StatusForbidden, "read-only console: actions are disabled")
				return
			}
			got := r.Header.Get(csrfHeader)
			if got == "" {
				r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
				got = r.PostFormValue(csrfField)
			}
			if !equal(got, s.csrf) {
				s.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authorized checks the token. A valid ?token= on a GET sets the cookie and redirects to the same
// URL without it (so that the token leaves the address bar and the history).
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if q := r.URL.Query(); q.Has("token") && r.Method == http.MethodGet {
		if equal(q.Get("token"), s.cfg.Token) {
			s.setCookie(w)
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return false
		}
	}
	tok := r.Header.Get(tokenHeader)
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		tok = b
	}
	if tok == "" {
		if c, err := r.Cookie(cookieName); err == nil {
			tok = c.Value
		}
	}
	if equal(tok, s.cfg.Token) {
		return true
	}
	if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
		return true // the login form and its stylesheet
	}
	if strings.HasPrefix(r.URL.Path, "/api/") || r.Method != http.MethodGet {
		writeJSON(w, http.StatusUnauthorized, apiError{"a token is required: Authorization: Bearer <token>"})
		return false
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return false
}

func (s *Server) setCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.cfg.Token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
}

func (s *Server) pageLogin(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login.html", page{Title: "Log in"})
}

func (s *Server) postLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if s.cfg.Token == "" || !equal(r.PostFormValue("token"), s.cfg.Token) {
		s.render(w, r, http.StatusUnauthorized, "login.html", page{Title: "Log in", Error: "wrong token"})
		return
	}
	s.setCookie(w)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// ctx bounds a request's store calls.
func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}
