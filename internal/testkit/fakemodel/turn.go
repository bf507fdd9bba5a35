package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// A Turn is one scripted model response. The fields combine: Text is
// streamed first, then the tool call of Shell or Call; Stall stops after the
// start of the response; Status replaces everything with an HTTP error. The
// zero Turn is an empty answer.
type Turn struct {
	// Text is the answer, streamed in several deltas (one per word).
	Text string

	// EchoToolResult appends to Text the output of the last tool result
	// found in the request (Anthropic tool_result, OpenAI
	// function_call_output, Gemini functionResponse), so a test can see
	// that the tool really ran.
	EchoToolResult bool

	// Shell, when not empty, ends the turn with a call of the CLI's shell
	// tool running this command: Anthropic tool_use Bash {"command"},
	// OpenAI function_call exec_command {"cmd"}, Gemini functionCall
	// run_shell_command {"command"}. The CLI sends the tool's output with
	// its next request, which takes the next Turn.
	Shell string

	// Call, when not nil, ends the turn with a call of the tool it names
	// (an MCP tool the CLI offers, say), in the API's own shape: Anthropic
	// tool_use, OpenAI function_call, Gemini functionCall. The CLI sends
	// the tool's result with its next request, which takes the next Turn.
	// Shell, when set, wins.
	Call *Call

	// Stall sends the response headers, the opening event and the deltas
	// of Text, then nothing more until the client goes away or the Server
	// closes.
	Stall bool

	// Status, when 400 or more, answers with this HTTP status and the API's
	// error JSON carrying Message.
	Status  int
	Message string
	// Pace, when positive, is the pause before each delta of Text after
	// the first, so that a long answer streams over time (a test of text
	// as it is written sees the first delta well before the last).
	Pace time.Duration
	// Header is added to the response's headers, an error's included
	// (retry-after, a provider's rate-limit headers, ...).
	Header http.Header
}

// begin applies t's headers to w; take calls it on each Turn it takes.
func (t Turn) begin(w http.ResponseWriter) {
	for k, vs := range t.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}

// pace waits t.Pace before delta i (none before the first), and reports
// false when the client went away or the server closes meanwhile.
func (s *Server) pace(r *http.Request, t Turn, i int) bool {
	if t.Pace <= 0 || i == 0 {
		return true
	}
	timer := time.NewTimer(t.Pace)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.Context().Done():
	case <-s.closing:
	}
	return false
}

// A Call is a tool call made by the fake model, for tools other than the
// CLI's shell: the tools of an MCP server, for one.
type Call struct {
	// Name is the tool's name as the CLI declares it to the model, such as
	// "mcp__clinvoke__codex" (Claude Code) or "mcp_clinvoke_claude"
	// (Gemini CLI). For a tool inside an OpenAI namespace tool it is the
	// name within the namespace ("claude").
	Name string
	// Namespace is the OpenAI namespace tool that holds Name, such as
	// "mcp__clinvoke", where Codex declares an MCP server's tools; the
	// function_call carries it in its "namespace" field. Empty for a plain
	// function, and ignored by the other APIs.
	Namespace string
	// Input is the tool's arguments; nil sends an empty object.
	Input map[string]any
	// Freeform, when not empty, makes the call one of a freeform tool,
	// whose input is this text and not a JSON object: an OpenAI
	// custom_tool_call, such as Codex's apply_patch with a patch (Codex
	// aborts on a function_call of apply_patch). Input is then ignored.
	// The other APIs have no freeform tools and ignore it.
	Freeform string
}

// CallTool returns a Turn that asks the CLI to call the tool named name
// with input (see [Call]).
func CallTool(name string, input map[string]any) Turn {
	return Turn{Call: &Call{Name: name, Input: input}}
}

// toolCall returns the tool call that ends t, in the terms of api: the
// shell tool of the CLI speaking api, or t.Call. It reports false when t
// calls no tool.
func (t Turn) toolCall(api API) (c Call, ok bool) {
	switch {
	case t.Shell != "":
		switch api {
		case Anthropic:
			return Call{Name: "Bash", Input: obj{"command": t.Shell, "description": "Run a shell command"}}, true
		case OpenAI:
			return Call{Name: "exec_command", Input: obj{"cmd": t.Shell}}, true
		default:
			return Call{Name: "run_shell_command", Input: obj{"command": t.Shell, "description": "Run a shell command"}}, true
		}
	case t.Call != nil:
		c = *t.Call
		if c.Input == nil {
			c.Input = obj{}
		}
		return c, true
	}
	return Call{}, false
}

// Answer returns a Turn that answers text.
func Answer(text string) Turn { return Turn{Text: text} }

// Shell returns a Turn that asks the CLI to run command with its shell tool.
func Shell(command string) Turn { return Turn{Shell: command} }

// EchoToolResult returns a Turn that answers prefix followed by the output
// of the tool result the CLI sent.
func EchoToolResult(prefix string) Turn { return Turn{Text: prefix, EchoToolResult: true} }

// Stall returns a Turn that starts a response, streams partial (which may be
// empty) and then hangs until the client goes away.
func Stall(partial string) Turn { return Turn{Text: partial, Stall: true} }

// Fail returns a Turn that answers with the HTTP status and the API's error
// JSON. With an empty message, the status text is used.
func Fail(status int, message string) Turn {
	if message == "" {
		message = http.StatusText(status)
	}
	return Turn{Status: status, Message: message}
}

// deltas splits text into the pieces streamed one by one: words with their
// trailing space.
func deltas(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" { // SplitAfter ends with "" when text ends with a space
			out = append(out, w)
		}
	}
	return out
}

// Token usage reported in every answer.
const (
	inputTokens  = 11
	outputTokens = 5
)

// sse writes server-sent events and flushes each one.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: http.NewResponseController(w)}
	e.flush()
	return e
}

// event writes "event: name" and the JSON of v as data. An empty name
// writes a data-only event.
func (e *sse) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fakemodel: " + err.Error()) // only our own maps are marshalled
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.flush()
}

func (e *sse) flush() { _ = e.rc.Flush() }

// stall blocks until the client goes away or the server closes.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// writeJSON answers v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// obj is shorthand for the JSON objects the handlers build.
type obj = map[string]any
