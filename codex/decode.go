package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// line is one event of `codex exec --json`. Every type's fields are
// decoded in one pass; absent fields stay zero.
type line struct {
	Type     string    `json:"type"`
	ThreadID string    `json:"thread_id"`
	Item     *item     `json:"item"`
	Usage    *usage    `json:"usage"`
	Error    *errorObj `json:"error"`
	Message  string    `json:"message"`
}

type errorObj struct {
	Message string `json:"message"`
}

type usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

// item is a thread item. Which fields are set depends on Type.
type item struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status"`

	Text    string `json:"text"`    // agent_message, reasoning
	Message string `json:"message"` // error

	Command          string `json:"command"` // command_execution
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`

	Changes json.RawMessage `json:"changes"` // file_change

	Server    string          `json:"server"` // mcp_tool_call
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *mcpResult      `json:"result"`
	Error     *errorObj       `json:"error"`

	Query  string          `json:"query"` // web_search
	Action json.RawMessage `json:"action"`

	Items json.RawMessage `json:"items"` // todo_list
}

type mcpResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content"`
}

// decoder holds what one run established. A new one is made per run.
type decoder struct {
	sessionID string
	text      string // the last completed agent_message
	partial   string // the text of an agent_message not completed yet
	usage     invoker.Usage
	done      bool // turn.completed or turn.failed seen
	success   bool
	failure   string // turn.failed's message
	lastError string // the last error notice that was not a retry notice
	called    map[string]bool
}

var _ driver.Decoder = (*decoder)(nil)

func newDecoder() *decoder { return &decoder{called: make(map[string]bool)} }

func (d *decoder) Decode(b []byte) ([]invoker.Event, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return []invoker.Event{driver.Malformed(b, err)}, nil
	}
	raw := json.RawMessage(b)
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			d.sessionID = l.ThreadID
		}
		return []invoker.Event{{Kind: invoker.KindSession, SessionID: l.ThreadID, Raw: raw}}, nil

	case "item.started", "item.updated", "item.completed":
		if l.Item == nil {
			return []invoker.Event{{Kind: invoker.KindWarning, Text: l.Type + " without an item", Raw: raw}}, nil
		}
		return d.item(l.Type, l.Item, raw), nil

	case "turn.completed":
		d.done, d.success = true, true
		evs := make([]invoker.Event, 0, 2)
		if l.Usage != nil {
			d.usage = invoker.Usage{
				InputTokens:       l.Usage.InputTokens,
				CachedInputTokens: l.Usage.CachedInputTokens,
				OutputTokens:      l.Usage.OutputTokens,
				ReasoningTokens:   l.Usage.ReasoningOutputTokens,
			}
			u := d.usage
			evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw})
		}
		return append(evs, invoker.Event{Kind: invoker.KindDone, Raw: raw}), nil

	case "turn.failed":
		d.done, d.success = true, false
		msg := ""
		if l.Error != nil {
			msg = l.Error.Message
		}
		if msg == "" {
			msg = d.lastError
		}
		d.failure = msg
		return []invoker.Event{
			{Kind: invoker.KindError, Text: msg, Raw: raw},
			{Kind: invoker.KindDone, Raw: raw},
		}, nil

	case "error":
		// Non-fatal notices: retries ("Reconnecting... 1/5 (...)") and the
		// last error before turn.failed. turn.failed decides the outcome.
		ev := invoker.Event{Kind: invoker.KindWarning, Text: l.Message, Raw: raw}
		if ev.Retry = retryOf(l.Message); ev.Retry != nil {
			// "Reconnecting... 1/5 (exceeded retry limit, last status:
			// 429 Too Many Requests)": the status of the failed attempt.
			if m := statusRE.FindStringSubmatch(l.Message); m != nil {
				ev.Retry.HTTPStatus, _ = strconv.Atoi(m[1])
			}
		} else {
			d.lastError = l.Message
		}
		return []invoker.Event{ev}, nil

	case "turn.started":
		return nil, nil // carries nothing
	}
	// Types this decoder does not know.
	return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}, nil
}

// item maps one thread item event.
func (d *decoder) item(typ string, it *item, raw json.RawMessage) []invoker.Event {
	completed := typ == "item.completed"
	switch it.Type {
	case "agent_message":
		if !completed {
			// A message in progress (Codex prints agent messages whole
			// today): keep its text as the partial answer, and report it
			// whole when it completes.
			if it.Text == "" {
				return nil
			}
			d.partial = it.Text
			return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
		}
		d.text, d.partial = it.Text, ""
		return []invoker.Event{{Kind: invoker.KindMessage, Text: it.Text, Raw: raw}}
	case "reasoning":
		if !completed {
			if it.Text == "" {
				return nil
			}
			return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
		}
		return []invoker.Event{{Kind: invoker.KindReasoning, Text: it.Text, Raw: raw}}
	case "error":
		// For example "Model metadata for `gpt-5` not found": the turn
		// goes on.
		return []invoker.Event{{Kind: invoker.KindWarning, Text: it.Message, Raw: raw}}
	}

	tool, ok := toolOf(it)
	if !ok {
		return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}
	}
	if !completed {
		// A call reports its input; output belongs to the result (an
		// item.updated's partial output stays in Raw).
		d.called[it.ID] = true
		tool.Output = ""
		return []invoker.Event{{Kind: invoker.KindToolCall, Tool: tool, Raw: raw}}
	}
	var evs []invoker.Event
	if !d.called[it.ID] {
		// Some items (web_search, mcp_tool_call in some versions) arrive
		// only completed: report the call too, so every result has one.
		call := *tool
		call.Output = ""
		evs = append(evs, invoker.Event{Kind: invoker.KindToolCall, Tool: &call, Raw: raw})
	}
	delete(d.called, it.ID)
	return append(evs, invoker.Event{Kind: invoker.KindToolResult, Tool: tool, Raw: raw})
}

// toolOf describes a tool-like item, or reports false for other items.
func toolOf(it *item) (*invoker.Tool, bool) {
	t := &invoker.Tool{Name: it.Type, ID: it.ID, Status: it.Status}
	switch it.Type {
	case "command_execution":
		t.Input = mustJSON(map[string]string{"command": it.Command})
		t.Output = it.AggregatedOutput
	case "file_change":
		t.Input = objectWith("changes", it.Changes)
		t.Output = describeChanges(it.Changes)
	case "mcp_tool_call":
		// Named like Claude Code names MCP tools, so names compare across
		// backends.
		t.Name = "mcp__" + it.Server + "__" + it.Tool
		t.Input = driver.ValidJSON(it.Arguments)
		switch {
		case it.Error != nil && it.Error.Message != "":
			t.Output = it.Error.Message
		case it.Result != nil:
			var parts []string
			for _, c := range it.Result.Content {
				if c.Type == "text" {
					parts = append(parts, c.Text)
				}
			}
			t.Output = strings.Join(parts, "\n")
			if t.Output == "" && len(it.Result.StructuredContent) > 0 {
				t.Output = string(it.Result.StructuredContent)
			}
		}
	case "web_search":
		in := map[string]any{"query": it.Query}
		if len(it.Action) > 0 && json.Valid(it.Action) {
			in["action"] = it.Action
		}
		t.Input = mustJSON(in)
	case "todo_list":
		t.Input = objectWith("items", it.Items)
		t.Output = describeTodos(it.Items)
	default:
		return nil, false
	}
	return t, true
}

func describeChanges(raw json.RawMessage) string {
	var changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &changes) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "%s %s\n", c.Kind, c.Path)
	}
	return b.String()
}

func describeTodos(raw json.RawMessage) string {
	var todos []struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	}
	if json.Unmarshal(raw, &todos) != nil {
		return ""
	}
	var b strings.Builder
	for _, t := range todos {
		mark := "[ ]"
		if t.Completed {
			mark = "[x]"
		}
		fmt.Fprintf(&b, "%s %s\n", mark, t.Text)
	}
	return b.String()
}

// Stderr finds nothing fatal in Codex's standard error. "Reading additional
// input from stdin..." is printed on every run whose stdin is a pipe and is
// harmless, because the engine closes stdin after the prompt; Codex would
// only wait forever on a stdin that is never closed, which cannot happen
// here. Authentication failures arrive as retries and then turn.failed on
// stdout within seconds, so they need no early stop.
func (d *decoder) Stderr([]byte) error { return nil }

func (d *decoder) Outcome(exitCode int, stderr string) driver.Outcome {
	out := driver.Outcome{
		SessionID: d.sessionID,
		Text:      d.text,
		Usage:     d.usage,
		Success:   d.success,
	}
	if !d.done && d.partial != "" {
		// Stopped while a message was in progress: it is the latest
		// text the stream showed.
		out.Text = d.partial
	}
	switch {
	case d.success:
	case d.done:
		out.Err = &invoker.StreamError{
			Message: d.failure,
			Type:    "turn.failed",
			Err:     classify(d.failure),
		}
	case exitCode > 0 && d.lastError != "":
		// An error line and no turn at all: for example a configuration
		// Codex rejected before the turn started.
		out.Err = &invoker.StreamError{Message: d.lastError, Type: "error", Err: classify(d.lastError)}
	case exitCode > 0:
		if expl := explainExit(exitCode, stderr); expl != "" {
			out.Err = &invoker.ExitError{ExitCode: exitCode, Stderr: stderr, Explanation: expl}
		}
	}
	return out
}

// explainExit says what a Codex exit status means when no turn event did.
func explainExit(code int, stderr string) string {
	switch {
	case strings.Contains(stderr, "No prompt provided"):
		return "codex received an empty prompt on stdin"
	case code == 2:
		return "usage error: this codex version rejected the command line (see stderr; --full-auto, for one, no longer exists)"
	case code == 101:
		return "codex panicked (it does when its stdout is closed early)"
	case code == 143:
		return "terminated by SIGTERM"
	case code == 130:
		return "interrupted by SIGINT"
	}
	return ""
}

var (
	// statusRE finds the HTTP status in Codex's description of a failed
	// request ("unexpected status 401 Unauthorized", "last status: 429").
	statusRE = regexp.MustCompile(`\bstatus:? (\d{3})\b`)
	authRE   = regexp.MustCompile(`(?i)\b401\b|unauthori[sz]ed|invalid[ _]api[ _]key|incorrect api key|not logged in|please log ?in|authentication (failed|required)`)
	rateRE   = regexp.MustCompile(`(?i)\b429\b|rate[ _-]?limit|too many requests|quota|usage limit`)
)

// classify recognises authentication and rate-limit failures in a message
// the CLI reported.
func classify(msg string) error {
	switch {
	case authRE.MatchString(msg):
		return invoker.ErrAuthRequired
	case rateRE.MatchString(msg):
		return invoker.ErrRateLimited
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// objectWith returns {"key": raw}, or nil when raw is not valid JSON.
func objectWith(key string, raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		return nil
	}
	return mustJSON(map[string]json.RawMessage{key: raw})
}
