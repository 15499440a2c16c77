package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// DeadLetter is a parked activity (redisprovider.DeadLetter) in the JSON of GET /api/dead and
// dxctl dead --json.
type DeadLetter struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"` // "activity", or "orchestration": an orchestration item held as poison
	Instance    string          `json:"instance_id"`
	ExecutionID uint64          `json:"execution_id"`
	ActivityID  uint64          `json:"activity_id"`
	Name        string          `json:"activity_name"`
	Tag         string          `json:"tag,omitempty"`
	Session     string          `json:"session_id,omitempty"`
	Attempts    uint32          `json:"attempts"`
	ParkedAt    time.Time       `json:"parked_at"`
	Error       string          `json:"error"`   // the failure, as text
	Failure     json.RawMessage `json:"failure"` // the failure it would record, duroxide's ErrorDetails JSON
}

// DeadLetterOf converts a provider's dead letter.
func DeadLetterOf(d redisprovider.DeadLetter) DeadLetter {
	if d.Orchestration {
		return DeadLetter{ID: d.ID, Kind: "orchestration", Instance: d.Instance, Name: d.Name, ParkedAt: d.ParkedAt,
			Error: d.Reason, Failure: json.RawMessage("null")}
	}
	f, _ := json.Marshal(d.Failure)
	return DeadLetter{d.ID, "activity", d.Instance, d.ExecutionID, d.ActivityID, d.Name, d.Tag, d.Session, d.Attempts, d.ParkedAt,
		(&dx.Error{Details: d.Failure}).Error(), f}
}

// What names the dead letter's work: "Name#id" for an activity, "orchestration Name" else.
func (d DeadLetter) What() string {
	if d.Kind == "orchestration" {
		return "orchestration " + d.Name
	}
	return fmt.Sprintf("%s#%d", d.Name, d.ActivityID)
}

// deadLimit is how many dead letters the page and the API list.
const deadLimit = 200

// DeadLetters is GET /api/dead: the oldest dead letters, at most 200.
type DeadLetters struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
}

func (s *Server) deadLetters(ctx context.Context) (DeadLetters, error) {
	ds, err := s.p.ListDeadLetters(ctx, deadLimit)
	if err != nil {
		return DeadLetters{}, err
	}
	out := DeadLetters{DeadLetters: make([]DeadLetter, len(ds))}
	for i, d := range ds {
		out.DeadLetters[i] = DeadLetterOf(d)
	}
	return out, nil
}

func (s *Server) apiDead(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d, err := s.deadLetters(ctx)
	if err != nil {
		s.apiFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) pageDead(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d, err := s.deadLetters(ctx)
	if err != nil {
		code, msg := s.errorOf(err)
		s.fail(w, r, code, msg)
		return
	}
	s.render(w, r, http.StatusOK, "dead.html", page{Title: "Dead letters", Data: d})
}

// deadActions are the POST actions on a dead letter.
var deadActions = []string{"redrive", "discard"}

// deadAct redrives or discards dead letter id and says what it did.
func (s *Server) deadAct(ctx context.Context, action, id string) (string, error) {
	if action == "redrive" {
		return "redriven: the next worker that takes it runs it with a fresh delivery count", s.p.RedriveDeadLetter(ctx, id)
	}
	return "discarded: the activity failed with its poison error", s.p.DiscardDeadLetter(ctx, id)
}

// apiDeadAction is POST /api/dead/{id}/redrive|discard.
func (s *Server) apiDeadAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		ctx, cancel := s.ctx(r)
		defer cancel()
		msg, err := s.deadAct(ctx, action, id)
		if err != nil {
			s.apiFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			ID      string `json:"id"`
			Action  string `json:"action"`
			Message string `json:"message"`
		}{id, action, msg})
	}
}

// pageDeadAction is the page's form POST: it acts and goes back to the list with the outcome.
func (s *Server) pageDeadAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		ctx, cancel := s.ctx(r)
		defer cancel()
		msg, err := s.deadAct(ctx, action, id)
		if err != nil {
			code, m := s.errorOf(err)
			s.fail(w, r, code, fmt.Sprintf("%s of %s failed: %s", action, id, m))
			return
		}
		http.Redirect(w, r, "/dead?"+url.Values{"msg": {id + " " + msg}}.Encode(), http.StatusSeeOther)
	}
}
