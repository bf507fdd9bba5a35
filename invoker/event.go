package invoker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of events a backend emits.
const (
	// KindSession reports the session (thread) id; Event.SessionID is set.
	KindSession EventKind = iota + 1
	// KindMessage carries assistant text; Event.Delta tells whether Text
	// is an increment of a streaming message or a whole message.
	KindMessage
	// KindReasoning carries the model's reasoning or thinking text.
	KindReasoning
	// KindToolCall reports a tool invocation; Event.Tool is set.
	KindToolCall
	// KindToolResult reports a tool's result; Event.Tool is set.
	KindToolResult
	// KindUsage reports token usage; Event.Usage is set.
	KindUsage
	// KindWarning reports a non-fatal notice: a retry, an unknown model,
	// a line that could not be decoded or exceeded the line limit.
	KindWarning
	// KindError reports an error the CLI printed in its stream.
	KindError
	// KindDone marks the CLI's terminal event (success or failure).
	KindDone
	// KindRaw passes through a line that carries something the other
	// kinds do not describe, such as an event type the decoder does not
	// know, so that nothing the CLI said is lost; Raw holds the line. A
	// line that carries nothing (Codex's turn.started, Gemini's echo of
	// the prompt) gives no event at all.
	KindRaw
)

var kindNames = [...]string{
	KindSession:    "session",
	KindMessage:    "message",
	KindReasoning:  "reasoning",
	KindToolCall:   "tool_call",
	KindToolResult: "tool_result",
	KindUsage:      "usage",
	KindWarning:    "warning",
	KindError:      "error",
	KindDone:       "done",
	KindRaw:        "raw",
}

// String returns the kind's lower-case name, such as "tool_call".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes the kind as its name, as String does; in JSON an
// Event's kind reads "kind":"tool_call".
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes what MarshalText encodes: a kind's name, or the
// "EventKind(N)" form String gives a value without one. Any other text is
// an error, and k is left unchanged.
func (k *EventKind) UnmarshalText(text []byte) error {
	s := string(text)
	for i, name := range kindNames {
		if name != "" && name == s {
			*k = EventKind(i)
			return nil
		}
	}
	if n, ok := strings.CutPrefix(s, "EventKind("); ok {
		if n, ok := strings.CutSuffix(n, ")"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				*k = EventKind(v)
				return nil
			}
		}
	}
	return fmt.Errorf("invoker: unknown event kind %q: want one of %s", s, strings.Join(kindNames[1:], ", "))
}

// An Event is one decoded item of a CLI's output stream.
type Event struct {
	// Kind says what the event reports.
	Kind EventKind `json:"kind"`
	// SessionID is the session (thread) id. KindSession events report
	// it; from then on the engine sets it on every event of the run, for
	// every backend, so that events of concurrent runs can be told apart.
	// It is "" only on events before the CLI reported its session.
	SessionID string `json:"session_id,omitempty"`
	// Text is the message, reasoning, warning or error text.
	Text string `json:"text,omitempty"`
	// Delta is true when Text is an increment of a streaming message.
	Delta bool `json:"delta,omitempty"`
	// Tool describes the tool for KindToolCall and KindToolResult.
	Tool *Tool `json:"tool,omitempty"`
	// Usage is set on KindUsage events.
	Usage *Usage `json:"usage,omitempty"`
	// Raw is the CLI's original line. It is always kept; events decoded
	// from one line share it.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// A Tool describes a tool call or its result.
type Tool struct {
	// Name is the tool's name as the CLI reports it ("command_execution",
	// "Bash", "run_shell_command", ...).
	Name string `json:"name,omitempty"`
	// ID identifies the call; a result carries the id of its call.
	ID string `json:"id,omitempty"`
	// Input is the call's arguments as raw JSON.
	Input json.RawMessage `json:"input,omitempty"`
	// Output is the tool's output, for results.
	Output string `json:"output,omitempty"`
	// Status is the CLI's status word: "in_progress", "completed",
	// "failed", "success", "error", ...
	Status string `json:"status,omitempty"`
}

// Usage holds token counts as the CLI reports them, in the same terms for
// every backend. Fields the CLI does not report are zero. Codex reports the
// usage of the whole thread, not of one turn (see package codex).
type Usage struct {
	// InputTokens counts every input token, cached ones included.
	InputTokens int64 `json:"input_tokens,omitempty"`
	// CachedInputTokens is the part of InputTokens read from the model
	// provider's prompt cache.
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	// OutputTokens counts the generated tokens, reasoning included.
	OutputTokens int64 `json:"output_tokens,omitempty"`
	// ReasoningTokens is the part of OutputTokens spent on reasoning, for
	// CLIs that report it (Codex).
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
	// TotalTokens is the total the CLI reported, if it reports one
	// (Gemini); it is not computed.
	TotalTokens int64 `json:"total_tokens,omitempty"`
	// CostUSD is the cost the CLI reported, if any (Claude).
	CostUSD float64 `json:"cost_usd,omitempty"`
}
