package fakemodel

import (
	"encoding/json"
	"net/http"
)

// noTurnLeft is the message of the error that answers a model request when
// the script has ended.
const noTurnLeft = "fakemodel: no scripted turn left"

// A dialect is one model API, whose requests decode into a B, as the steps
// that every API's handler shares see it: how it refuses a request, which
// of its requests are side requests, and where a request carries a tool's
// result.
type dialect[B any] struct {
	// fail answers a failing Turn (one with an HTTP error Status) with the
	// API's error JSON. The handler's own refusals (a method other than
	// POST, a body that is not JSON, the script's end) are answered as such
	// Turns too.
	fail func(w http.ResponseWriter, t Turn)
	// endHeader, when not nil, is added to the error that answers a model
	// request at the script's end.
	endHeader http.Header
	// side, when not nil, reports whether a request is a side request (a
	// session title, a quota check) rather than a model turn.
	side func(body B) bool
	// toolResult returns the output of the last tool result in a request,
	// which a Turn with EchoToolResult appends to its Text.
	toolResult func(body B) string
}

// turn is how a handler starts on a request. It refuses a request that
// decode refuses. It records a side request as such and gives it the Turn
// Answer("fakemodel"). Any other request is a model turn, which take
// answers. turn reports false when it has answered the request itself.
func (d dialect[B]) turn(s *Server, w http.ResponseWriter, r *http.Request, req Request) (B, Turn, bool) {
	body, ok := d.decode(s, w, r, req)
	if !ok {
		return body, Turn{}, false
	}
	if d.side != nil && d.side(body) {
		s.record(req)
		return body, Answer("fakemodel"), true
	}
	t, ok := d.take(s, w, req, body)
	return body, t, ok
}

// decode returns the request's JSON body. It refuses a method other than
// POST and a body that is not JSON with the API's error, recording the
// request, and reports false; otherwise the request is left for the caller
// to record.
func (d dialect[B]) decode(s *Server, w http.ResponseWriter, r *http.Request, req Request) (body B, ok bool) {
	if r.Method != http.MethodPost {
		s.record(req)
		d.fail(w, Fail(http.StatusMethodNotAllowed, "fakemodel: use POST"))
		return body, false
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		s.record(req)
		d.fail(w, Fail(http.StatusBadRequest, "fakemodel: "+err.Error()))
		return body, false
	}
	return body, true
}

// take records req, whose body is body, as a model turn, then takes the
// next Turn of the script and applies its headers to w. When the Turn is an
// HTTP error, or the script has ended, take answers with the API's error and
// reports false. Otherwise it returns the Turn with the tool result it
// echoes, if any, appended to its Text.
func (d dialect[B]) take(s *Server, w http.ResponseWriter, req Request, body B) (Turn, bool) {
	req.Scripted = true
	s.record(req)
	t, ok := s.next()
	if !ok {
		t = Turn{Status: http.StatusInternalServerError, Message: noTurnLeft, Header: d.endHeader}
	}
	t.begin(w)
	if t.Status >= 400 {
		d.fail(w, t)
		return Turn{}, false
	}
	if t.EchoToolResult {
		t.Text += d.toolResult(body)
	}
	return t, true
}
