package fakeagent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Prompts that change what one turn of a session does (see "Sessions" in
// the package documentation). They are matched anywhere in the prompt.
const (
	// PromptStall makes the turn stall after its answer, before its
	// result, until it is interrupted (for ten minutes otherwise): a model
	// stream that stalls mid-turn.
	PromptStall = "fakeagent:stall"
	// PromptDie makes the fake exit with status 3 after the first piece of
	// the turn's answer, without a result: a CLI that dies mid-turn.
	PromptDie = "fakeagent:die"
)

// RefusedModel is a model Claude Code's fake refuses to switch to in a
// session (set_model answered with an error), as Claude Code refuses a
// model it cannot use; it takes any other model, and every permission
// mode (set_permission_mode).
const RefusedModel = "fakeagent-refused-model"

// isClaudeSession reports whether args ask Claude Code for stream-json
// input: the long-lived mode that reads one user message per line.
func isClaudeSession(flavor string, args []string) bool {
	if flavor != Claude {
		return false
	}
	v, ok := flagValue(args, "--input-format")
	return ok && v == "stream-json"
}

// sessionLine is one line a session client writes: a user message or a
// control request.
type sessionLine struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   *struct {
		Subtype string `json:"subtype"`
		Model   string `json:"model"`
	} `json:"request"`
	Message *struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	Response json.RawMessage `json:"response"`
}

// text returns a user message's text: a string, or its text blocks.
func (l *sessionLine) text() string {
	if l.Message == nil {
		return ""
	}
	var s string
	if json.Unmarshal(l.Message.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(l.Message.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// claudeSession runs Claude Code's stream-json input mode: one turn per user
// message, interrupts by control request, exit 0 at the end of input
// between turns. It returns the exit status.
func (a *agent) claudeSession(rec recorder) int {
	a.limits = limitsOf(Claude, a.args)
	if err := a.claudeSessionSetup(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	defer a.claude.clients.close()
	if err := a.startSession(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	users := make(chan string, 64)
	intr := make(chan string, 64)
	eof := make(chan struct{})
	go a.readSession(rec, users, intr, eof)
	interrupted := false // a turn was aborted: the exit status at the end of input is 1
	for n := 1; ; n++ {
		var prompt string
	wait:
		for {
			select {
			case prompt = <-users:
				break wait
			case id := <-intr:
				if !a.s.IgnoreInterrupt {
					a.controlOK(id) // nothing to stop between turns
				}
			case <-eof:
				select {
				case prompt = <-users:
					break wait
				default:
					// Claude Code 2.1.197 exits 1 at the end of its
					// input after a turn it aborted.
					if a.s.ExitGate == "" {
						a.s.touchAtExit()
					}
					if interrupted {
						return a.endOfInput(1)
					}
					return a.endOfInput(0)
				}
			}
		}
		code, exit := a.sessionTurn(n, prompt, intr)
		if exit {
			return code
		}
		if a.s.ExitGate != "" {
			a.s.touchAtExit()
		}
		interrupted = interrupted || a.aborted
	}
}

// endOfInput returns code, the exit status of a session at the end of its
// input, unless the script ignores the end of input: then it runs until a
// signal ends it.
func (a *agent) endOfInput(code int) int {
	for a.s.IgnoreEOF {
		time.Sleep(time.Hour)
	}
	return code
}

// pauseUnless waits d, or less if intr fires first; it reports whether the
// whole of d passed.
func pauseUnless(d time.Duration, intr <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-intr:
		return false
	}
}

// readInput reads the client's lines from standard input until its end,
// records all of them so far after each one (and appends each to the
// Transcript), and hands each line that holds JSON to handle, decoded into
// a new value of the protocol's type.
func readInput[M any](a *agent, rec recorder, handle func(*M)) {
	in := bufio.NewReader(os.Stdin)
	var transcript io.Writer = io.Discard
	if a.s.Transcript != "" {
		f, err := os.OpenFile(a.s.Transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: transcript:", err)
		} else {
			defer f.Close()
			transcript = f
		}
	}
	var all []byte
	for {
		b, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(b))) > 0 {
			all = append(all, b...)
			rec.writeRun(a.args, all)
			transcript.Write(b)
			m := new(M)
			if jerr := json.Unmarshal(b, m); jerr != nil {
				fmt.Fprintln(os.Stderr, "fakeagent: bad input line:", jerr)
			} else {
				handle(m)
			}
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintln(os.Stderr, "fakeagent: reading stdin:", err)
			}
			return
		}
	}
}

// readSession reads the client's lines until end of input. Interrupts go to
// intr at once, even during a turn; prompts queue in users.
func (a *agent) readSession(rec recorder, users, intr chan<- string, eof chan<- struct{}) {
	defer close(eof)
	readInput(a, rec, func(l *sessionLine) {
		switch {
		case l.Type == "user":
			users <- l.text()
		case l.Type == "control_response":
			a.claudeReply(l.Response)
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "interrupt":
			intr <- l.RequestID
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "initialize":
			// Claude Code answers with its commands, output style and
			// models; the fake has none.
			a.emit(obj{{"type", "control_response"}, {"response", obj{
				{"subtype", "success"}, {"request_id", l.RequestID},
				{"response", obj{{"commands", []obj{}}, {"output_style", "default"}}},
			}}})
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "set_model" && l.Request.Model != RefusedModel:
			m := l.Request.Model
			a.model.Store(&m) // the next turn's system init reports it
			a.controlOK(l.RequestID)
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "set_model":
			a.emit(obj{{"type", "control_response"}, {"response", obj{
				{"subtype", "error"}, {"request_id", l.RequestID},
				{"error", "model " + l.Request.Model + " is not available"},
			}}})
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "set_permission_mode" && !a.s.RefuseModeSwitch:
			a.controlOK(l.RequestID)
		case l.Type == "control_request" && l.Request != nil && l.Request.Subtype == "set_permission_mode":
			a.emit(obj{{"type", "control_response"}, {"response", obj{
				{"subtype", "error"}, {"request_id", l.RequestID},
				{"error", "permission mode not allowed"},
			}}})
		case l.Type == "control_request":
			a.emit(obj{{"type", "control_response"}, {"response", obj{
				{"subtype", "error"}, {"request_id", l.RequestID},
				{"error", "fakeagent: unsupported control request"},
			}}})
		}
	})
}

// controlOK acknowledges a control request.
func (a *agent) controlOK(id string) {
	a.emit(obj{{"type", "control_response"}, {"response", obj{{"subtype", "success"}, {"request_id", id}}}})
}

// sessionTurn prints turn n, answering prompt, and reports whether the
// fake must exit (and with which status) instead of waiting for the next.
func (a *agent) sessionTurn(n int, prompt string, intr <-chan string) (code int, exit bool) {
	s := &a.s
	c := claude{}
	a.prompt = prompt
	a.msgID = ""
	a.turns.Store(0)
	a.beginTurn(n)

	// pause waits d, and reports false when the turn was interrupted
	// meanwhile (unless the script ignores interrupts).
	pause := func(d time.Duration) bool {
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				return true
			case id := <-intr:
				if s.IgnoreInterrupt {
					continue
				}
				a.controlOK(id)
				return false
			}
		}
	}
	a.aborted = false
	interrupted := func() (int, bool) {
		a.aborted = true
		a.emit(obj{{"type", "user"}, {"message", obj{{"role", "user"}, {"content", []obj{{
			{"type", "text"}, {"text", "[Request interrupted by user]"},
		}}}}}, {"parent_tool_use_id", nil}, {"session_id", a.sid}, {"uuid", uuid4()}})
		a.out.line(claudeInterrupted(a))
		return 0, false
	}

	// A silent turn prints nothing, not even its system init, as a run
	// that is silent from its start.
	if !pause(s.SilentFor) {
		return interrupted()
	}
	c.begin(a)
	a.loadInCLI()
	if s.Tool {
		c.tool(a)
		if a.stopped {
			a.stopped = false
			return 0, false // a limit ended the turn, with its own result
		}
	}
	a.claude.denials = nil
	var outs outcomes
	if s.twoWay() {
		var ok bool
		if outs, ok = a.claudeDuring(intr, a.claudeActions); !ok {
			return interrupted()
		}
	}
	if s.StreamFor > 0 {
		end := time.Now().Add(s.StreamFor)
		for k := 0; time.Now().Before(end); k++ {
			c.progress(a, k)
			if !pause(s.interval()) {
				return interrupted()
			}
		}
	}
	if s.HugeLine > 0 {
		c.huge(a, s.HugeLine)
	}
	if s.Fail != "" {
		c.failAnswer(a)
		if !pause(s.StallFor) {
			return interrupted()
		}
		if s.NoTerminal {
			return s.ExitCode, true
		}
		c.fail(a)
		return 0, false
	}
	answer := outs.answer(s, n)
	pieces := split(answer, s.Chunks)
	for i := range pieces {
		if i > 0 && !pause(s.interval()) {
			return interrupted()
		}
		c.chunk(a, pieces, i)
		if strings.Contains(prompt, PromptDie) {
			return 3, true
		}
	}
	if strings.Contains(prompt, PromptStall) && !pause(sleepFor) {
		return interrupted()
	}
	if !pause(s.StallFor) {
		return interrupted()
	}
	if s.NoTerminal {
		// A CLI that dies mid-turn: no result, and its exit status.
		return s.ExitCode, true
	}
	if a.limits.schema != "" {
		c.done(a) // the structured answer, as a run gives it
		return 0, false
	}
	a.emit(claudeResult(a, false, nil, answer, "end_turn", tokens(prompt), tokens(answer)))
	return 0, false
}
