package invoker

import (
	"encoding/json"
	"strconv"
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
	// KindRaw passes through a line that carries nothing the other kinds
	// describe: an event type the decoder does not know, or a structural
	// one (such as Codex's turn.started), so that no line is lost.
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

// MarshalText encodes the kind as its name.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// An Event is one decoded item of a CLI's output stream.
type Event struct {
	// Kind says what the event reports.
	Kind EventKind `json:"kind"`
	// SessionID is set on KindSession events, and on any event whose line
	// carried the session id.
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
