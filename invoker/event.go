package invoker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of events a backend emits.
const (
	// KindSession reports the session (thread) id; Event.SessionID is set.
	KindSession EventKind = iota + 1
	// KindMessage carries a whole assistant message. A message that was
	// streamed (Request.Deltas) comes whole after its KindDelta events, so
	// a consumer that reads only KindMessage sees the same text either way.
	KindMessage
	// KindReasoning carries the model's reasoning or thinking text, whole,
	// as KindMessage does.
	KindReasoning
	// KindToolCall reports a tool invocation; Event.Tool is set.
	KindToolCall
	// KindToolResult reports a tool's result; Event.Tool is set.
	KindToolResult
	// KindUsage reports token usage; Event.Usage is set.
	KindUsage
	// KindWarning reports a non-fatal notice: a retry of a model request
	// (Event.Retry is set), an unknown model, a line that could not be
	// decoded or exceeded the line limit, or what the run did that its
	// limits or sandbox warn of. A warning of what the run did after the
	// CLI's terminal event (a connection the sandbox refused at the CLI's
	// exit, say) comes after KindDone, before Invoke or Turn returns.
	KindWarning
	// KindError reports an error the CLI printed in its stream.
	KindError
	// KindDone marks the CLI's terminal event (success or failure). It
	// need not be the turn's last event: warnings of what the run did
	// after it follow it (KindWarning).
	KindDone
	// KindRaw passes through a line that carries something the other
	// kinds do not describe, such as an event type the decoder does not
	// know, so that nothing the CLI said is lost; Raw holds the line. A
	// line that carries nothing (Codex's turn.started, Gemini's echo of
	// the prompt) gives no event at all.
	KindRaw
	// KindDelta carries text as the model writes it, for a run or session
	// that asked for it (Request.Deltas, Capabilities.Deltas): Text is an
	// increment of the message (Event.Delta is KindMessage) or reasoning
	// (KindReasoning) being written. The whole message follows as its own
	// event once it is complete.
	KindDelta
	// KindRateLimit reports the state of a rate limit of the model
	// provider, as the CLI relays it; Event.RateLimit is set.
	KindRateLimit
	// KindQueued reports that the run waits to be admitted to the host's
	// Budget (Options.Budget), before anything starts: once when the wait
	// starts and again whenever its place changes. Event.Ahead is how many
	// runs are ahead of it, and Text says the same ("queued: 3 ahead").
	// While it waits at the gate of a rate limit (Budget.WaitRateLimits),
	// Event.RateLimit is set, its ResetsAt the time the gate opens. The
	// run's other events come after the last of them.
	KindQueued
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
	KindDelta:      "delta",
	KindRateLimit:  "rate_limit",
	KindQueued:     "queued",
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
	// Delta, on a KindDelta event, is the kind of the text being
	// written: KindMessage or KindReasoning. It is zero on other events.
	Delta EventKind `json:"delta,omitempty"`
	// Tool describes the tool for KindToolCall and KindToolResult, and
	// on a KindWarning event the tool call it is about: one whose
	// permission request was refused without asking Approve (see
	// Request.Approve), or the tool whose result came as a process of the
	// run was killed at its memory limit or refused a fork at its process
	// limit (see Limits).
	Tool *Tool `json:"tool,omitempty"`
	// Usage is set on KindUsage events.
	Usage *Usage `json:"usage,omitempty"`
	// RateLimit is set on KindRateLimit events, and on KindQueued events
	// of a run waiting at a rate limit's gate (Budget.WaitRateLimits).
	// On a KindQueued event it is the library's, not a CLI's: ResetsAt is
	// when the gate opens, Status is "rejected" (the state of the limit
	// that closed the gate, as a run of the CLI met it), and the other
	// fields are zero. The word is Claude Code's; API v1 fixed it, so it
	// stays, and a KindQueued event is told from a CLI's report by its
	// Kind, not by Status.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Ahead, on a KindQueued event, is how many runs are ahead of this
	// one: in the queue for the Budget, or at the rate limit's gate. At 0
	// the run is at the head, waiting for enough to be released.
	Ahead int `json:"ahead,omitempty"`
	// Retry is set on a KindWarning event that reports a retry of a model
	// request.
	Retry *Retry `json:"retry,omitempty"`
	// Raw is the CLI's original line. It is always kept; events decoded
	// from one line share it.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// A RateLimit is the state of one rate limit of the model provider, as the
// CLI reports it (Claude Code's rate_limit_event, Codex's
// account/rateLimits/updated). Fields the CLI does not report are zero.
type RateLimit struct {
	// Limit names the limit as the CLI does: "five_hour", "seven_day"
	// (Claude Code), "primary", "secondary" (Codex), ...
	Limit string `json:"limit,omitempty"`
	// Status is the CLI's word for the limit's state: "allowed",
	// "allowed_warning", "rejected" (Claude Code). On a KindQueued event
	// it is "rejected" (see Event.RateLimit).
	Status string `json:"status,omitempty"`
	// UsedPercent is how much of the limit is used, from 0 to 100.
	UsedPercent float64 `json:"used_percent,omitempty"`
	// ResetsAt is when the limit resets.
	ResetsAt time.Time `json:"resets_at,omitzero"`
}

// A Retry describes a model request that failed and that the CLI retries.
// Fields the CLI does not report are zero.
type Retry struct {
	// Attempt is the number of the attempt about to be made, counting the
	// first retry as 1.
	Attempt int `json:"attempt,omitempty"`
	// MaxAttempts is how many retries the CLI makes at most.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Delay is how long the CLI waits before the attempt.
	Delay time.Duration `json:"delay,omitempty"`
	// HTTPStatus is the status of the failed request (429 when rate
	// limited, 529 when overloaded, ...).
	HTTPStatus int `json:"http_status,omitempty"`
	// ResetsAt is when the limit that refused the request resets, when
	// the CLI says.
	ResetsAt time.Time `json:"resets_at,omitzero"`
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
