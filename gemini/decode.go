package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// line is one event of `gemini --output-format=stream-json`. Every type's
// fields are decoded in one pass; absent fields stay zero.
type line struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	SessionID string `json:"session_id"` // init

	Role    string `json:"role"` // message
	Content string `json:"content"`
	Delta   bool   `json:"delta"`

	ToolName   string          `json:"tool_name"` // tool_use
	ToolID     string          `json:"tool_id"`   // tool_use, tool_result
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"` // tool_result, result
	Output     string          `json:"output"`

	Severity string    `json:"severity"` // error
	Message  string    `json:"message"`
	Error    *errorObj `json:"error"` // tool_result, result
	Stats    *stats    `json:"stats"` // result
}

type errorObj struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type stats struct {
	TotalTokens  int64 `json:"total_tokens"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
}

type call struct {
	name  string
	input json.RawMessage
}

// decoder holds what one run established. A new one is made per run.
type decoder struct {
	sessionID string
	text      strings.Builder // assistant deltas, concatenated
	usage     invoker.Usage
	done      bool // a result line was seen
	success   bool
	failure   *errorObj // the failed result's error
	resetsAt  time.Time // when the rate limit that failed the turn resets
	lastError string    // the last error line's message
	calls     map[string]call
	afterTool bool // a tool call came after the last assistant text
	// msg is the assistant message being streamed, sent whole as one
	// KindMessage before the next event of another kind.
	msg strings.Builder
	// retries holds what stderr said of the retries of model requests,
	// reported with the next line of stdout.
	retries retryLog
}

var _ driver.Decoder = (*decoder)(nil)

func newDecoder() *decoder { return &decoder{calls: make(map[string]call)} }

// Decode turns one line into events. An assistant message arrives in
// chunks, each a KindDelta; the whole message follows as one KindMessage
// before the events of the next line of another type (a tool call, the
// result), so that a consumer of whole messages sees each message once.
// Retries that stderr reported since the last line come first, as
// warnings.
func (d *decoder) Decode(b []byte) ([]invoker.Event, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		if err := stallSignature(b); err != nil {
			return nil, err
		}
		return []invoker.Event{driver.Malformed(b, err)}, nil
	}
	raw := json.RawMessage(b)
	evs := d.retries.events(raw)
	if l.Type != "message" {
		// A line of another type ends the message being streamed (the
		// echo of the prompt comes before any answer).
		evs = d.endMessage(evs, raw)
	}
	more, err := d.decode(&l, raw)
	return append(evs, more...), err
}

// endMessage appends the message being streamed, whole, to evs.
func (d *decoder) endMessage(evs []invoker.Event, raw json.RawMessage) []invoker.Event {
	if d.msg.Len() == 0 {
		return evs
	}
	evs = append(evs, invoker.Event{Kind: invoker.KindMessage, Text: d.msg.String(), Raw: raw})
	d.msg.Reset()
	return evs
}

func (d *decoder) decode(l *line, raw json.RawMessage) ([]invoker.Event, error) {
	switch l.Type {
	case "init":
		if l.SessionID != "" {
			d.sessionID = l.SessionID
		}
		return []invoker.Event{{Kind: invoker.KindSession, SessionID: l.SessionID, Raw: raw}}, nil

	case "message":
		if l.Role != "assistant" {
			// The echo of the user's prompt: nothing the caller did not
			// send.
			return nil, nil
		}
		if d.afterTool && d.text.Len() > 0 && l.Content != "" {
			// A new assistant message after a tool call: keep the
			// messages apart instead of gluing "...tests.All pass.".
			d.text.WriteString("\n\n")
		}
		if l.Content == "" {
			return nil, nil
		}
		d.afterTool = false
		d.text.WriteString(l.Content)
		if !l.Delta {
			// A message sent whole (0.61.0 streams every one).
			evs := d.endMessage(nil, raw)
			return append(evs, invoker.Event{Kind: invoker.KindMessage, Text: l.Content, Raw: raw}), nil
		}
		d.msg.WriteString(l.Content)
		return []invoker.Event{{Kind: invoker.KindDelta, Delta: invoker.KindMessage, Text: l.Content, Raw: raw}}, nil

	case "tool_use":
		d.afterTool = true
		input := driver.ValidJSON(l.Parameters)
		d.calls[l.ToolID] = call{name: l.ToolName, input: input}
		return []invoker.Event{{Kind: invoker.KindToolCall, Tool: &invoker.Tool{Name: l.ToolName, ID: l.ToolID, Input: input}, Raw: raw}}, nil

	case "tool_result":
		c := d.calls[l.ToolID]
		delete(d.calls, l.ToolID)
		out := l.Output
		if out == "" && l.Error != nil {
			out = l.Error.Message
		}
		return []invoker.Event{{Kind: invoker.KindToolResult, Tool: &invoker.Tool{
			Name: c.name, ID: l.ToolID, Input: c.input, Output: out, Status: l.Status,
		}, Raw: raw}}, nil

	case "error":
		if l.Severity == "warning" || l.Severity == "info" {
			return []invoker.Event{{Kind: invoker.KindWarning, Text: l.Message, Raw: raw}}, nil
		}
		d.lastError = l.Message
		return []invoker.Event{{Kind: invoker.KindError, Text: l.Message, Raw: raw}}, nil

	case "result":
		d.done = true
		d.success = l.Status == "success"
		var evs []invoker.Event
		if !d.success {
			d.failure = &errorObj{Message: d.lastError}
			if l.Error != nil {
				d.failure.Type = l.Error.Type
				if l.Error.Message != "" {
					d.failure.Message = l.Error.Message
					evs = append(evs, invoker.Event{Kind: invoker.KindError, Text: l.Error.Message, Raw: raw})
				}
			}
			if at, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
				d.resetsAt = resetTime(d.failure.Message, at)
			}
		}
		if l.Stats != nil {
			d.usage = invoker.Usage{
				InputTokens:       l.Stats.InputTokens,
				CachedInputTokens: l.Stats.Cached,
				OutputTokens:      l.Stats.OutputTokens,
				TotalTokens:       l.Stats.TotalTokens,
			}
			u := d.usage
			evs = append(evs, invoker.Event{Kind: invoker.KindUsage, Usage: &u, Raw: raw})
		}
		return append(evs, invoker.Event{Kind: invoker.KindDone, Raw: raw}), nil
	}
	return []invoker.Event{{Kind: invoker.KindRaw, Raw: raw}}, nil
}

// Stderr stops the run when Gemini waits for an interactive Google login,
// which it would otherwise do for up to five minutes (browser flow) or
// forever (authorization code read from a closed stdin). It notes the
// retries of model requests Gemini reports there (see retryLog). Everything
// else on its stderr — colour warnings, "[STARTUP]" lines, stack traces of
// retried API errors — is noise.
func (d *decoder) Stderr(b []byte) error {
	d.retries.stderr(b, time.Now())
	return stallSignature(b)
}

// Lines Gemini prints when it starts an interactive OAuth login
// (packages/core/src/code_assist/oauth2.ts); they go to stdout or stderr
// depending on the version.
var loginPrompts = [][]byte{
	[]byte("Waiting for authentication..."),
	[]byte("Please visit the following URL to authorize the application"),
	[]byte("Enter the authorization code"),
	[]byte("Attempting to open authentication page in your browser"),
}

// stallSignature matches a login prompt only at the start of a line, so a
// tool's output that Gemini copies to stderr ("Error executing tool ...")
// cannot mention one and kill a healthy run.
func stallSignature(b []byte) error {
	b = trimLeadingANSI(bytes.TrimSpace(b))
	for _, p := range loginPrompts {
		if bytes.HasPrefix(b, p) {
			return fmt.Errorf("%w: gemini is waiting for an interactive Google login; log in once with `gemini` in a terminal, or set GEMINI_API_KEY and security.auth.selectedType \"gemini-api-key\" in settings", invoker.ErrAuthRequired)
		}
	}
	return nil
}

// trimLeadingANSI drops the terminal control sequences (ESC [ ... final
// byte) a line starts with, such as the screen clear before a login prompt.
func trimLeadingANSI(b []byte) []byte {
	for len(b) >= 2 && b[0] == 0x1b && b[1] == '[' {
		i := 2
		for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
			i++
		}
		if i == len(b) {
			return nil
		}
		b = b[i+1:]
	}
	return b
}

func (d *decoder) Outcome(exitCode int, stderr string) driver.Outcome {
	out := driver.Outcome{
		SessionID: d.sessionID,
		Text:      d.text.String(),
		Usage:     d.usage,
		Success:   d.success,
	}
	switch {
	case d.success:
	case d.done:
		out.ResetsAt = d.resetsAt
		if out.ResetsAt.IsZero() {
			out.ResetsAt = d.retries.resetsAt
		}
		sentinel := classify(d.failure.Message)
		if sentinel == nil {
			sentinel = exitSentinel(exitCode)
		}
		out.Err = &invoker.StreamError{
			Message: d.failure.Message,
			Type:    d.failure.Type,
			Err:     sentinel,
		}
		if d.failure.Type == "FatalTurnLimitedError" {
			// model.maxSessionTurns of the user's settings (exit 53): the
			// same condition as a turn limit set by Request.MaxTurns.
			out.Err = &invoker.LimitError{Limit: invoker.ErrMaxTurns, SessionID: d.sessionID, Err: out.Err}
		}
	case exitCode > 0:
		expl := explainExit(exitCode)
		if msg := stderrError(stderr); msg != "" {
			if expl != "" {
				expl += ": "
			}
			expl += msg
		}
		if expl == "" {
			break
		}
		out.Err = &invoker.ExitError{ExitCode: exitCode, Stderr: stderr, Explanation: expl, Err: exitSentinel(exitCode)}
	}
	return out
}

// explainExit says what a Gemini exit status means.
func explainExit(code int) string {
	switch code {
	case 1:
		return ""
	case 41:
		return "authentication is not configured: set security.auth.selectedType in settings (\"gemini-api-key\" with GEMINI_API_KEY) or log in once interactively"
	case 42:
		return "input error: gemini got no prompt or an invalid argument (for example an unknown --resume session)"
	case 44:
		return "sandbox error"
	case 52:
		return "configuration error in gemini's settings"
	case 53:
		return "the session reached its turn limit (model.maxSessionTurns)"
	case 54:
		return "a tool failed fatally"
	case 55:
		return "the workdir is not a trusted folder: trust it in gemini, pass --skip-trust in Request.ExtraArgs or set GEMINI_CLI_TRUST_WORKSPACE=true"
	case 130:
		return "cancelled"
	}
	if status, ok := httpStatus(code); ok {
		return fmt.Sprintf("the model API answered HTTP %d (gemini exits with the status modulo 256)", status)
	}
	return ""
}

// httpStatus maps an exit status back to the HTTP status Gemini exited
// with, for the statuses its API clients report.
func httpStatus(code int) (int, bool) {
	for _, s := range []int{400, 401, 403, 404, 408, 409, 413, 429, 500, 501, 502, 503, 504} {
		if s%256 == code {
			return s, true
		}
	}
	return 0, false
}

func exitSentinel(code int) error {
	switch code {
	case 41, 401 % 256, 403 % 256:
		return invoker.ErrAuthRequired
	case 429 % 256:
		return invoker.ErrRateLimited
	}
	return nil
}

// stderrError returns the message of the JSON error object Gemini prints
// on stderr for fatal errors in JSON output modes, such as
// {"error":{"type":"FatalTurnLimitedError","message":"...","code":53}}.
func stderrError(stderr string) string {
	for l := range strings.Lines(stderr) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, `{"error"`) {
			continue
		}
		var v struct {
			Error *errorObj `json:"error"`
		}
		if json.Unmarshal([]byte(l), &v) == nil && v.Error != nil && v.Error.Message != "" {
			return v.Error.Message
		}
	}
	return ""
}

var (
	authRE = regexp.MustCompile(`(?i)\b401\b|unauthori[sz]ed|unauthenticated|invalid[ _]api[ _]key|api key not valid|permission_denied|not logged in|authentication (failed|required)`)
	rateRE = regexp.MustCompile(`(?i)\b429\b|rate[ _-]?limit|too many requests|quota|resource_exhausted`)
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
