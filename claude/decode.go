package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// line is one event of `claude --print --output-format=stream-json
// --verbose`. Every type's fields are decoded in one pass; absent fields
// stay zero.
type line struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	Message         *message `json:"message"` // assistant, user
	ParentToolUseID *string  `json:"parent_tool_use_id"`
	// assistant: "authentication_failed", ...; api_retry: the error
	// (a string or an object, depending on the version).
	Error json.RawMessage `json:"error"`

	// system api_retry
	Attempt      int             `json:"attempt"`
	MaxRetries   int             `json:"max_retries"`
	RetryDelayMS float64         `json:"retry_delay_ms"`
	ErrorStatus  json.RawMessage `json:"error_status"`

	// rate_limit_event
	RateLimitInfo *rateLimitInfo `json:"rate_limit_info"`

	// user: a message of ours echoed back (--replay-user-messages), with
	// the uuid it was sent with.
	IsReplay bool   `json:"isReplay"`
	UUID     string `json:"uuid"`

	// result
	IsError        bool            `json:"is_error"`
	Result         *string         `json:"result"`
	Errors         []string        `json:"errors"`
	APIErrorStatus json.RawMessage `json:"api_error_status"`
	StopReason     *string         `json:"stop_reason"`
	TotalCostUSD   float64         `json:"total_cost_usd"`
	Usage          *usage          `json:"usage"`
	NumTurns       int             `json:"num_turns"`
	// StructuredOutput is the StructuredOutput tool's input under
	// --json-schema (absent when the model never called the tool).
	StructuredOutput json.RawMessage `json:"structured_output"`

	Event *streamEvent `json:"event"` // stream_event
}

// rateLimitInfo is a rate_limit_event's state of one limit, as the Claude
// Agent SDK types it (SDKRateLimitEvent): resetsAt in Unix seconds,
// utilization a fraction of 1.
type rateLimitInfo struct {
	Status        string   `json:"status"`
	ResetsAt      float64  `json:"resetsAt"`
	RateLimitType string   `json:"rateLimitType"`
	Utilization   *float64 `json:"utilization"`
}

type message struct {
	ID      string  `json:"id"`
	Model   string  `json:"model"`
	Content content `json:"content"`
}

// content is a message's content: a list of blocks, or a plain string
// (user prompts), which is kept as one text block.
type content []block

func (c *content) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = content{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(b, (*[]block)(c))
}

type block struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"` // tool_use
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`

	ToolUseID string          `json:"tool_use_id"` // tool_result
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"` // message_start
	Delta *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"` // content_block_delta
}

type call struct {
	name  string
	input json.RawMessage
}

// decoder holds what one run established. A new one is made per run.
type decoder struct {
	sessionID string
	usage     invoker.Usage
	done      bool
	success   bool
	result    string // the result's text
	resultErr *invoker.StreamError
	apiError  string // the error kind of the last synthetic assistant message
	// limit is the sentinel of the limit the result reports reached
	// ("MaxTurns", "MaxBudgetUSD"), or "".
	limit      error
	turns      int
	structured json.RawMessage
	// resetsAt is when the limit a rate_limit_event reported rejected
	// resets.
	resetsAt time.Time
	// prior is what earlier results of the same turn reported: a session
	// turn that was steered can span several of the CLI's turns (see
	// session.go).
	prior invoker.Usage
	// priorTurns is the num_turns of those earlier results, and
	// priorText the answer they showed last, the partial text of a turn
	// that shows none after them.
	priorTurns int
	priorText  string

	// Partial text: the text blocks of the latest top-level message that
	// had any (textID), and the deltas streamed since the message streamID
	// started that no whole block has superseded yet.
	textID    string
	msgText   strings.Builder
	streamID  string
	deltaText strings.Builder

	calls map[string]call
}

var _ driver.Decoder = (*decoder)(nil)

func newDecoder() *decoder { return &decoder{calls: make(map[string]call)} }

func (d *decoder) Decode(b []byte) ([]invoker.Event, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return []invoker.Event{driver.Malformed(b, err)}, nil
	}
	raw := json.RawMessage(b)
	if l.SessionID != "" {
		d.sessionID = l.SessionID
	}
	ev := func(k invoker.EventKind) invoker.Event {
		return invoker.Event{Kind: k, SessionID: l.SessionID, Raw: raw}
	}
	top := l.ParentToolUseID == nil || *l.ParentToolUseID == ""

	switch l.Type {
	case "system":
		switch l.Subtype {
		case "init":
			return []invoker.Event{ev(invoker.KindSession)}, nil
		case "api_retry":
			e := ev(invoker.KindWarning)
			e.Text = retryText(l)
			e.Retry = &invoker.Retry{Attempt: l.Attempt, MaxAttempts: l.MaxRetries,
				Delay: time.Duration(l.RetryDelayMS * float64(time.Millisecond)), HTTPStatus: httpStatus(l.ErrorStatus)}
			return []invoker.Event{e}, nil
		}

	case "rate_limit_event":
		if l.RateLimitInfo == nil {
			break
		}
		info := l.RateLimitInfo
		rl := &invoker.RateLimit{Limit: info.RateLimitType, Status: info.Status, ResetsAt: unixTime(info.ResetsAt)}
		if info.Utilization != nil {
			rl.UsedPercent = *info.Utilization * 100
		}
		if info.Status == "rejected" && !rl.ResetsAt.IsZero() {
			d.resetsAt = rl.ResetsAt
		}
		e := ev(invoker.KindRateLimit)
		e.RateLimit = rl
		return []invoker.Event{e}, nil

	case "assistant":
		if l.Message == nil {
			break
		}
		if kind := rawText(l.Error); kind != "" || l.Message.Model == "<synthetic>" {
			// Claude Code's own notice (an API error) dressed as a
			// message: not model output.
			d.apiError = kind
			var texts []string
			for _, c := range l.Message.Content {
				if c.Text != "" {
					texts = append(texts, c.Text)
				}
			}
			e := ev(invoker.KindError)
			e.Text = strings.Join(texts, "\n")
			return []invoker.Event{e}, nil
		}
		var evs []invoker.Event
		for _, c := range l.Message.Content {
			switch c.Type {
			case "text":
				d.addText(top, l.Message.ID, c.Text)
				e := ev(invoker.KindMessage)
				e.Text = c.Text
				evs = append(evs, e)
			case "thinking":
				e := ev(invoker.KindReasoning)
				e.Text = c.Thinking
				evs = append(evs, e)
			case "tool_use", "server_tool_use", "mcp_tool_use":
				input := driver.ValidJSON(c.Input)
				d.calls[c.ID] = call{name: c.Name, input: input}
				e := ev(invoker.KindToolCall)
				e.Tool = &invoker.Tool{Name: c.Name, ID: c.ID, Input: input}
				evs = append(evs, e)
			default: // redacted_thinking, ...
				evs = append(evs, ev(invoker.KindRaw))
			}
		}
		if len(evs) > 0 {
			return evs, nil
		}

	case "user":
		if l.Message == nil {
			break
		}
		var evs []invoker.Event
		for _, c := range l.Message.Content {
			if c.Type != "tool_result" {
				continue
			}
			cl := d.calls[c.ToolUseID]
			delete(d.calls, c.ToolUseID)
			status := "success"
			if c.IsError {
				status = "error"
			}
			e := ev(invoker.KindToolResult)
			e.Tool = &invoker.Tool{Name: cl.name, ID: c.ToolUseID, Input: cl.input, Output: resultText(c.Content), Status: status}
			evs = append(evs, e)
		}
		if len(evs) > 0 {
			return evs, nil
		}

	case "stream_event":
		if l.Event == nil || !top {
			break
		}
		switch l.Event.Type {
		case "message_start":
			if l.Event.Message != nil {
				d.startMessage(l.Event.Message.ID)
			}
		case "content_block_delta":
			if l.Event.Delta == nil {
				break
			}
			switch l.Event.Delta.Type {
			case "text_delta":
				d.deltaText.WriteString(l.Event.Delta.Text)
				e := ev(invoker.KindDelta)
				e.Text, e.Delta = l.Event.Delta.Text, invoker.KindMessage
				return []invoker.Event{e}, nil
			case "thinking_delta":
				e := ev(invoker.KindDelta)
				e.Text, e.Delta = l.Event.Delta.Thinking, invoker.KindReasoning
				return []invoker.Event{e}, nil
			}
		}

	case "result":
		return d.finish(l, ev), nil
	}
	// Other system subtypes (status, thinking_tokens, hooks), user prompt
	// echoes, structural stream events and unknown types.
	return []invoker.Event{ev(invoker.KindRaw)}, nil
}

// startMessage notes that a new top-level message began streaming.
func (d *decoder) startMessage(id string) {
	d.streamID = id
	d.deltaText.Reset()
}

// addText records a top-level text block as the partial answer. The text
// of an earlier message is kept until a later one brings text, so that a
// message holding only a tool call keeps the text before it.
func (d *decoder) addText(top bool, id, text string) {
	if !top {
		return // a subagent's text is not the answer
	}
	if id != d.textID {
		d.textID = id
		d.msgText.Reset()
	}
	d.msgText.WriteString(text)
	if id == d.streamID {
		d.deltaText.Reset() // the whole block supersedes its deltas
	}
}

func (d *decoder) partial() string {
	switch {
	case d.deltaText.Len() == 0:
		return d.msgText.String()
	case d.streamID == d.textID:
		return d.msgText.String() + d.deltaText.String()
	}
	return d.deltaText.String()
}

// finish handles the terminal result line.
func (d *decoder) finish(l line, ev func(invoker.EventKind) invoker.Event) []invoker.Event {
	d.done = true
	if l.Result != nil {
		d.result = *l.Result
	}
	d.turns = l.NumTurns
	if s := driver.ValidJSON(l.StructuredOutput); len(s) > 0 && string(s) != "null" {
		d.structured = s
	}
	switch l.Subtype {
	case "error_max_turns":
		d.limit = invoker.ErrMaxTurns
	case "error_max_budget_usd":
		d.limit = invoker.ErrMaxBudget
	}
	var evs []invoker.Event
	d.success = !l.IsError && (l.Subtype == "success" || l.Subtype == "")
	if d.success && d.result == "" && (l.StopReason == nil || *l.StopReason != "end_turn") {
		// docs/cli-facts.md: a model stream that ended badly gives exit 0 and an
		// empty result. A turn the model really ended has stop_reason
		// end_turn (every success in the captures does), even when its
		// last message holds no text; anything else is not an answer,
		// whatever tool calls or thinking came before.
		d.success = false
		d.resultErr = &invoker.StreamError{Message: "claude reported success with an empty result, but the model did not end its turn (the model stream ended early)", Type: "empty_result"}
	}
	if !d.success && d.resultErr == nil {
		msg := strings.Join(l.Errors, "; ")
		if msg == "" && l.IsError {
			msg = d.result
		}
		if msg == "" && l.Subtype == "error_max_turns" {
			msg = "reached the maximum number of turns"
		}
		typ := d.apiError
		if typ == "" && l.Subtype != "success" {
			typ = l.Subtype
		}
		se := &invoker.StreamError{Message: msg, Type: typ}
		switch status := strings.TrimSpace(string(l.APIErrorStatus)); {
		case status == "401" || status == "403":
			se.Err = invoker.ErrAuthRequired
		case status == "429":
			se.Err = invoker.ErrRateLimited
		default:
			se.Err = classify(d.apiError + " " + msg)
		}
		d.resultErr = se
	}
	if d.resultErr != nil {
		e := ev(invoker.KindError)
		e.Text = d.resultErr.Message
		if l.Subtype == "error_during_execution" && strings.HasPrefix(e.Text, "[ede_diagnostic]") {
			// Claude Code's diagnostic of a turn it aborted (2.1.197
			// prints it for every interrupted turn): what ended the turn
			// is the interrupt, not a failure to show.
			e.Kind = invoker.KindWarning
		}
		evs = append(evs, e)
	}
	if l.Usage != nil {
		d.usage = invoker.Usage{
			// Anthropic counts cache reads and writes apart from
			// input_tokens; invoker.Usage counts every input token.
			InputTokens:       l.Usage.InputTokens + l.Usage.CacheReadInputTokens + l.Usage.CacheCreationInputTokens,
			CachedInputTokens: l.Usage.CacheReadInputTokens,
			OutputTokens:      l.Usage.OutputTokens,
			CostUSD:           l.TotalCostUSD,
		}
		u := d.usage
		e := ev(invoker.KindUsage)
		e.Usage = &u
		evs = append(evs, e)
	}
	return append(evs, ev(invoker.KindDone))
}

// retryText describes an api_retry notice.
func retryText(l line) string {
	msg := fmt.Sprintf("API retry %d/%d", l.Attempt, l.MaxRetries)
	if s := strings.TrimSpace(string(l.ErrorStatus)); s != "" && s != "null" {
		msg += " (status " + s + ")"
	}
	if text := rawText(l.Error); text != "" {
		msg += ": " + text
	}
	return msg
}

// httpStatus returns an api_retry's error_status, or 0 when it is not a
// number (null before a response came).
func httpStatus(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) != nil {
		return 0
	}
	return n
}

// unixTime returns the time of a Unix timestamp in seconds, or the zero
// time for 0 or a value no clock reaches.
func unixTime(sec float64) time.Time {
	if sec <= 0 || sec > math.MaxInt32*4 {
		return time.Time{}
	}
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9))
}

// rawText returns a JSON string's value, or the JSON itself for any other
// value but null.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// resultText returns a tool_result's content: a string, or the text of its
// text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Stderr finds nothing fatal on Claude Code's standard error: in print mode
// it reports authentication failures ("Not logged in", "Invalid API key")
// as a result line on stdout and exits, and it does not wait for input once
// stdin is closed. Refusals to start are explained by Outcome.
func (d *decoder) Stderr([]byte) error { return nil }

func (d *decoder) Outcome(exitCode int, stderr string) driver.Outcome {
	out := driver.Outcome{
		SessionID: d.sessionID,
		Text:      d.partial(),
		Usage:     addUsage(d.prior, d.usage),
		Success:   d.success,
		Turns:     d.priorTurns + d.turns,
	}
	switch {
	case d.success:
		out.Text = d.result
		out.Structured = d.structured
	case d.resultErr != nil:
		se := *d.resultErr
		out.Err = &se
		if d.limit != nil {
			out.Err = &invoker.LimitError{Limit: d.limit, SessionID: d.sessionID, Err: &se}
		}
		if errors.Is(&se, invoker.ErrRateLimited) {
			// The engine reports it as a *LimitError carrying ResetsAt.
			out.ResetsAt = d.resetsAt
		}
	case exitCode > 0:
		if expl := explainExit(exitCode, stderr); expl != "" {
			out.Err = &invoker.ExitError{ExitCode: exitCode, Stderr: stderr, Explanation: expl}
		}
	}
	if !out.Success && out.Text == "" {
		out.Text = d.priorText
	}
	return out
}

// explainExit says what a Claude Code exit status means when no result
// line did, from the signatures its stderr shows.
func explainExit(code int, stderr string) string {
	switch {
	case strings.Contains(stderr, "requires --verbose"):
		return "stream-json output needs --verbose (this claude version rejected the command line)"
	case strings.Contains(stderr, "inside another Claude Code session"):
		return "claude refused to start nested in another Claude Code session: CLAUDECODE was set again through Request.Env or invoker.Options.Env"
	case strings.Contains(stderr, "No conversation found"):
		return "no session with that id: claude stores sessions per working directory, so resume in the Workdir the session started in"
	case strings.Contains(stderr, "root/sudo"):
		return "claude refuses to bypass permissions as root unless IS_SANDBOX=1 is set"
	case strings.Contains(stderr, "Input must be provided"):
		return "claude received an empty prompt on stdin"
	case code == 143:
		return "terminated by SIGTERM"
	}
	return ""
}

var (
	authRE = regexp.MustCompile(`(?i)\b401\b|authentication_failed|failed to authenticate|not logged in|invalid api key|invalid x-api-key|please run /login|oauth token has expired`)
	rateRE = regexp.MustCompile(`(?i)\b429\b|rate[ _-]?limit|too many requests|usage limit|quota`)
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

// addUsage returns the sum of two turns' usage.
func addUsage(a, b invoker.Usage) invoker.Usage {
	return invoker.Usage{
		InputTokens:       a.InputTokens + b.InputTokens,
		CachedInputTokens: a.CachedInputTokens + b.CachedInputTokens,
		OutputTokens:      a.OutputTokens + b.OutputTokens,
		CostUSD:           a.CostUSD + b.CostUSD,
	}
}

// next returns the decoder of the CLI's next turn within the same turn of
// ours (a steer the CLI answered with a turn of its own): the session id
// and what this one counted carry over.
func (d *decoder) next() *decoder {
	n := newDecoder()
	n.sessionID = d.sessionID
	n.prior = addUsage(d.prior, d.usage)
	n.priorTurns = d.priorTurns + d.turns
	n.resetsAt = d.resetsAt
	n.priorText = d.partial()
	if d.success {
		n.priorText = d.result
	}
	if n.priorText == "" {
		n.priorText = d.priorText
	}
	return n
}
