package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// actionNames are the POST actions on an instance.
var actionNames = []string{"cancel", "raise", "enqueue", "delete"}

// actionArgs are an action's parameters (form fields, or a JSON object for the API).
type actionArgs struct {
	Reason string          `json:"reason"` // cancel
	Name   string          `json:"name"`   // raise: the event's name; enqueue: the queue
	Data   json.RawMessage `json:"data"`   // raise, enqueue
}

// conflict is an action that the instance's state refuses (409).
type conflict struct{ msg string }

func (e conflict) Error() string { return e.msg }

func readArgs(r *http.Request) (actionArgs, error) {
	var a actionArgs
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		err := dec.Decode(&a)
		if err == nil {
			if _, more := dec.Token(); more != io.EOF {
				err = errors.New("more after the object")
			}
		}
		if err != nil {
			return a, badf("the body is not one JSON object of reason, name and data: %v", err)
		}
		return a, nil
	}
	a.Reason, a.Name = r.PostFormValue("reason"), r.PostFormValue("name")
	if d := r.PostFormValue("data"); d != "" {
		a.Data = json.RawMessage(d)
	}
	return a, nil
}

// act runs action on instance id and says what it did.
func (s *Server) act(ctx context.Context, action, id string, a actionArgs) (string, error) {
	if action == "delete" {
		res, err := s.p.DeleteInstance(ctx, id, false)
		if errors.Is(err, provider.ErrInstanceRunning) {
			return "", conflict{"the instance (or one of its sub-orchestrations) is still running: cancel it first"}
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("deleted %d instance(s), %d execution(s), %d event(s)", res.InstancesDeleted, res.ExecutionsDeleted, res.EventsDeleted), nil
	}
	if len(a.Data) == 0 {
		a.Data = json.RawMessage("null")
	}
	if !json.Valid(a.Data) {
		return "", badf("data is not valid JSON (a JSON string needs its quotes)")
	}
	if (action == "raise" || action == "enqueue") && a.Name == "" {
		return "", badf("%s needs a name (the event's name or the queue's)", action)
	}
	c := dx.NewClient(s.p)
	st, err := c.Status(ctx, id)
	if err != nil {
		return "", err
	}
	switch {
	case st.State == dx.StateNotFound:
		return "", fmt.Errorf("instance not found: %w", provider.ErrNotFound)
	case st.Terminal():
		return "", conflict{fmt.Sprintf("the instance has already finished (%s)", st.State)}
	}
	switch action {
	case "cancel":
		if a.Reason == "" {
			a.Reason = "cancelled from dxctl web"
		}
		return "cancellation requested: the instance fails at its next turn", c.Cancel(ctx, id, a.Reason)
	case "raise":
		return fmt.Sprintf("raised event %q", a.Name), c.RaiseEvent(ctx, id, a.Name, a.Data)
	default:
		return fmt.Sprintf("enqueued a message on queue %q", a.Name), c.EnqueueEvent(ctx, id, a.Name, a.Data)
	}
}

// ActionResult is the reply of POST /api/instances/{id}/{action}.
type ActionResult struct {
	InstanceID string `json:"instance_id"`
	Action     string `json:"action"`
	Message    string `json:"message"`
}

func (s *Server) apiAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r)
		var args actionArgs
		if err == nil {
			args, err = readArgs(r)
		}
		if err == nil {
			ctx, cancel := s.ctx(r)
			defer cancel()
			var msg string
			if msg, err = s.act(ctx, action, id, args); err == nil {
				writeJSON(w, http.StatusOK, ActionResult{id, action, msg})
				return
			}
		}
		code, msg := s.errorOf(err)
		writeJSON(w, code, apiError{msg})
	}
}

// pageAction is the confirmed form's POST: it acts and redirects to the instance (or, after a
// delete, to the list) with the outcome.
func (s *Server) pageAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r)
		var args actionArgs
		if err == nil {
			args, err = readArgs(r)
		}
		var msg string
		if err == nil {
			ctx, cancel := s.ctx(r)
			defer cancel()
			msg, err = s.act(ctx, action, id, args)
		}
		if err != nil {
			code, m := s.errorOf(err)
			s.fail(w, r, code, action+" failed: "+m)
			return
		}
		target := instanceURL(id)
		if action == "delete" {
			target = "/instances"
		}
		http.Redirect(w, r, target+"?"+url.Values{"msg": {msg}}.Encode(), http.StatusSeeOther)
	}
}
