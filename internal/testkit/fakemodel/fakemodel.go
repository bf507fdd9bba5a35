// Package fakemodel is a loopback fake of the three model APIs that the real
// agent CLIs talk to: Anthropic Messages (Claude Code), OpenAI Responses
// (Codex) and Gemini generateContent (Gemini CLI). Tests point a real CLI at
// a [Server], script what the "model" answers turn by turn, and afterwards
// read what the CLI sent.
//
// Typical use inside a test:
//
//	srv := fakemodel.New(t) // closed when the test ends
//	srv.Enqueue(fakemodel.Shell("echo hello"), fakemodel.EchoToolResult("done: "))
//	// run the CLI with ANTHROPIC_BASE_URL=srv.AnthropicBaseURL() (or the
//	// OpenAI or Gemini base URL) ...
//	for _, r := range srv.Requests() { ... }
//
// One Server speaks all four APIs on one port; it tells them apart by path:
//
//	HEAD /                                        Anthropic warm-up (200, empty)
//	POST /v1/messages[?beta=true]                 Anthropic Messages, SSE or JSON
//	POST /v1/messages/count_tokens                Anthropic token count
//	POST {OpenAIBaseURL}/responses                OpenAI Responses, SSE
//	                                              (a WebSocket upgrade gets 426)
//	POST {OpenAIBaseURL}/chat/completions         OpenAI Chat Completions, SSE
//	                                              (opencode and other OpenAI-compatible agents)
//	POST /v1beta/models/M:streamGenerateContent   Gemini, data-only SSE (?alt=sse)
//	POST /v1beta/models/M:generateContent         Gemini, JSON (model routing)
//
// # Scripting
//
// The script is one queue of [Turn] values shared by the three APIs (a test
// drives one CLI per Server). Each model request takes the next Turn: an
// answer streamed in several deltas, a shell tool call, a call of a named
// tool (an MCP tool the CLI offers, say), a stall, or an HTTP error with the
// API's own error JSON. A request that finds the queue empty
// gets HTTP 500 with the message "fakemodel: no scripted turn left", so a
// CLI that asks for more than the test expected fails visibly.
//
// Requests that are not model turns are answered without taking a Turn and
// are recorded with Scripted false: the Anthropic warm-up, Claude's side
// requests that carry no tools (session title, quota check), token counts,
// Gemini's routing and other non-streaming generateContent calls (answered
// with a JSON object that passes its routing classifier), and a refused
// WebSocket upgrade.
//
// The wire formats follow what made each real CLI complete a turn, as
// measured in docs/cli-facts.md ("Fake model server protocol"): Anthropic
// events carry "event:" lines and a content_block_stop per block; OpenAI
// events repeat their name in "type" and end with response.completed; the
// last Gemini chunk carries finishReason.
//
// A Server listens on 127.0.0.1 only. Its methods are safe for concurrent
// use. Token usage in answers is fixed (11 input, 5 output tokens).
package fakemodel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// API names one of the model APIs a Server speaks.
type API string

// The APIs a Server speaks.
const (
	Anthropic API = "anthropic" // Anthropic Messages, used by Claude Code
	OpenAI    API = "openai"    // OpenAI Responses, used by Codex
	Gemini    API = "gemini"    // Gemini generateContent, used by Gemini CLI
)

// A Request is what a CLI sent to the Server, as recorded before it was
// answered.
type Request struct {
	// API is the API the path belongs to, or "" for an unknown path
	// (answered with 404).
	API API
	// Method, Path and Query are the request line; Path has no query.
	Method string
	Path   string
	Query  string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the request body, decompressed when it was sent with
	// Content-Encoding gzip.
	Body []byte
	// Scripted reports whether the request was answered from the script
	// (a model turn), as opposed to a warm-up, title, routing or other side
	// request.
	Scripted bool
}

// Contains reports whether the body contains s, for assertions such as "the
// resumed session sent the first turn's answer back".
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// A Server is a running fake model server. Create one with New or Start.
type Server struct {
	ts      *httptest.Server
	closing chan struct{} // closed by Close: stalled handlers return
	once    sync.Once

	mu     sync.Mutex
	script []Turn
	reqs   []Request
	ids    int
}

// New starts a Server and registers its Close with tb.Cleanup.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := Start()
	tb.Cleanup(s.Close)
	return s
}

// Start starts a Server on 127.0.0.1 with an empty script. The caller must
// Close it.
func Start() *Server {
	s := &Server{closing: make(chan struct{})}
	// httptest listens on 127.0.0.1:0 (or [::1]:0 without IPv4 loopback).
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL returns the server's base URL, such as "http://127.0.0.1:40123".
func (s *Server) URL() string { return s.ts.URL }

// AnthropicBaseURL returns the value for Claude Code's ANTHROPIC_BASE_URL.
func (s *Server) AnthropicBaseURL() string { return s.ts.URL }

// OpenAIBaseURL returns the base_url of a Codex model provider (it ends in
// /v1; Codex appends /responses).
func (s *Server) OpenAIBaseURL() string { return s.ts.URL + "/v1" }

// GeminiBaseURL returns the value for Gemini CLI's GOOGLE_GEMINI_BASE_URL.
func (s *Server) GeminiBaseURL() string { return s.ts.URL }

// Enqueue appends turns to the script. Each model request takes the first
// turn left.
func (s *Server) Enqueue(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, turns...)
}

// Pending returns how many scripted turns have not been served yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns the requests received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Scripted returns the requests that were answered from the script, in order
// of arrival: one per model turn the CLI asked for.
func (s *Server) Scripted() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Scripted {
			out = append(out, r)
		}
	}
	return out
}

// Close makes stalled answers return, closes the connections and stops the
// server. It waits for handlers to finish, which never takes long: no handler
// blocks past Close. Close may be called more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// next takes the next scripted turn, or reports false when none is left.
func (s *Server) next() (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return Turn{}, false
	}
	t := s.script[0]
	s.script = s.script[1:]
	return t, true
}

// id returns a new identifier with the given prefix, unique per Server.
func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_fake%04d", prefix, s.ids)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

// maxBody bounds a recorded request body; CLIs send whole histories, a few
// hundred KiB at most in tests.
const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		http.Error(w, "fakemodel: reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
		Body:   body,
	}
	p := r.URL.Path
	switch {
	case p == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		req.API = Anthropic
		s.record(req)
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(p, "/v1/messages"):
		req.API = Anthropic
		s.anthropic(w, r, req)
	case strings.HasSuffix(p, "/chat/completions"):
		req.API = Chat
		s.chat(w, r, req)
	case strings.HasSuffix(p, "/responses"):
		req.API = OpenAI
		s.openai(w, r, req)
	case strings.HasPrefix(p, "/v1beta/models/") || strings.HasPrefix(p, "/v1/models/"):
		req.API = Gemini
		s.gemini(w, r, req)
	default:
		s.record(req)
		http.Error(w, "fakemodel: unknown path "+p, http.StatusNotFound)
	}
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = io.LimitReader(r.Body, maxBody)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		rd = zr
	}
	return io.ReadAll(rd)
}
