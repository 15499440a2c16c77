package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

// scheduleActions are the POST actions on a schedule.
var scheduleActions = []string{"pause", "resume", "trigger", "backfill", "delete"}

// Schedules is GET /api/schedules: every schedule (dx.Client.ListSchedules).
type Schedules struct {
	Schedules []dx.ScheduleInfo `json:"schedules"`
}

func scheduleURL(id string) string { return "/schedules/" + IDSegment(id) }

func (s *Server) schedules(ctx context.Context) (Schedules, error) {
	list, err := dx.NewClient(s.p).ListSchedules(ctx)
	if list == nil {
		list = []dx.ScheduleInfo{}
	}
	return Schedules{list}, err
}

func (s *Server) schedule(ctx context.Context, r *http.Request) (dx.ScheduleInfo, error) {
	id, err := pathID(r)
	if err != nil {
		return dx.ScheduleInfo{}, err
	}
	info, err := dx.NewClient(s.p).GetSchedule(ctx, id)
	if errors.Is(err, dx.ErrNotFound) {
		return info, notFoundSchedule{}
	}
	return info, err
}

// notFoundSchedule is a schedule that does not exist (404).
type notFoundSchedule struct{}

func (notFoundSchedule) Error() string { return "schedule not found" }

func (s *Server) scheduleErr(err error) (int, string) {
	var nf notFoundSchedule
	if errors.As(err, &nf) || errors.Is(err, dx.ErrNotFound) {
		return http.StatusNotFound, "schedule not found (or deleted)"
	}
	return s.errorOf(err)
}

// scheduleAct runs a control action on a schedule and says what it did.
func (s *Server) scheduleAct(ctx context.Context, r *http.Request, action string) (string, string, error) {
	id, err := pathID(r)
	if err != nil {
		return "", "", err
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<16)
	c := dx.NewClient(s.p)
	switch action {
	case "pause":
		reason := r.PostFormValue("reason")
		if reason == "" {
			reason = "paused from dxctl web"
		}
		err = c.PauseSchedule(ctx, id, reason)
	case "resume":
		err = c.ResumeSchedule(ctx, id, "")
	case "trigger":
		err = c.TriggerSchedule(ctx, id)
	case "backfill":
		from, ferr := time.Parse(time.RFC3339, r.PostFormValue("from"))
		to, terr := time.Parse(time.RFC3339, r.PostFormValue("to"))
		if ferr != nil || terr != nil {
			return id, "", badf("backfill needs from and to as RFC 3339 times (2026-03-01T00:00:00Z)")
		}
		err = c.BackfillSchedule(ctx, id, from, to)
	case "delete":
		err = c.DeleteSchedule(ctx, id)
	}
	if errors.Is(err, dx.ErrInvalidInput) {
		return id, "", badf("%s", err.Error())
	}
	if err != nil {
		return id, "", err
	}
	return id, action + " sent: the schedule applies it at its next turn", nil
}

func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.schedules(ctx)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) apiSchedule(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.schedule(ctx, r)
	if err != nil {
		code, msg := s.scheduleErr(err)
		writeJSON(w, code, apiError{msg})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ScheduleActionResult is the reply of POST /api/schedules/{id}/{action}.
type ScheduleActionResult struct {
	Schedule string `json:"schedule"`
	Action   string `json:"action"`
	Message  string `json:"message"`
}

func (s *Server) apiScheduleAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.ctx(r)
		defer cancel()
		id, msg, err := s.scheduleAct(ctx, r, action)
		if err != nil {
			code, m := s.scheduleErr(err)
			writeJSON(w, code, apiError{m})
			return
		}
		writeJSON(w, http.StatusOK, ScheduleActionResult{id, action, msg})
	}
}

func (s *Server) pageScheduleAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.ctx(r)
		defer cancel()
		id, msg, err := s.scheduleAct(ctx, r, action)
		if err != nil {
			code, m := s.scheduleErr(err)
			s.fail(w, r, code, action+" failed: "+m)
			return
		}
		http.Redirect(w, r, scheduleURL(id)+"?"+url.Values{"msg": {msg}}.Encode(), http.StatusSeeOther)
	}
}

func (s *Server) pageSchedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.schedules(ctx)
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	s.render(w, r, http.StatusOK, "schedules.html", page{Title: "Schedules", Data: v})
}

func (s *Server) pageSchedule(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	v, err := s.schedule(ctx, r)
	if err != nil {
		code, msg := s.scheduleErr(err)
		s.fail(w, r, code, msg)
		return
	}
	s.render(w, r, http.StatusOK, "schedule.html", page{Title: fmt.Sprintf("Schedule %s", v.ID), Data: v})
}
