package invokertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// Schemas of the structured-answer cases.
const (
	seenSchema   = `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`
	personSchema = `{"type":"object","properties":{"name":{"type":"string"},"languages":{"type":"array","items":{"type":"string"}}},"required":["name"]}`
)

// A testCase checks one rule of the contract.
type testCase struct {
	name string
	rule string // the sentence of the contract the case checks
	run  func(r *report, k *kase)
}

var cases = []testCase{
	{
		name: "Complete",
		rule: "a turn that ends with the CLI's terminal success event returns a nil error, the session id and the final answer, and events in order from Session to Done",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-session-1", Answer: "The answer is 42."}
			var kinds []invoker.EventKind
			var rawMissing int
			res, err := k.invoke(r, context.Background(), f, invoker.Request{OnEvent: func(ev invoker.Event) {
				kinds = append(kinds, ev.Kind)
				if ev.Kind != invoker.KindWarning && len(ev.Raw) == 0 {
					rawMissing++
				}
			}})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if res.SessionID != f.SessionID {
				r.errorf("Result.SessionID = %q, want %q", res.SessionID, f.SessionID)
			}
			if strings.TrimSpace(res.Text) != f.Answer {
				r.errorf("Result.Text = %q, want %q", res.Text, f.Answer)
			}
			if res.ExitCode != 0 {
				r.errorf("Result.ExitCode = %d, want 0", res.ExitCode)
			}
			if i, j := slices.Index(kinds, invoker.KindSession), slices.Index(kinds, invoker.KindDone); i < 0 || j < 0 || i > j || !doneLast(kinds) {
				r.errorf("event kinds = %v, want a session event before a done event that comes last (but for warnings)", kinds)
			}
			if slices.Index(kinds, invoker.KindMessage) < 0 {
				r.errorf("event kinds = %v, want at least one message", kinds)
			}
			if rawMissing > 0 {
				r.errorf("%d events without Raw, want the CLI's line kept on every event", rawMissing)
			}
		},
	},
	{
		name: "EventsCarrySession",
		rule: "once the CLI reported its session, every event carries the session id",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-events", Answer: "events"}
			var events []invoker.Event
			_, err := k.invoke(r, context.Background(), f, invoker.Request{OnEvent: func(ev invoker.Event) { events = append(events, ev) }})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			seen := false
			for i, ev := range events {
				seen = seen || ev.SessionID != ""
				if seen && ev.SessionID != f.SessionID {
					r.errorf("event %d (%v) has SessionID %q, want %q", i, ev.Kind, ev.SessionID, f.SessionID)
				}
			}
			if !seen {
				r.errorf("no event carries the session id %q", f.SessionID)
			}
		},
	},
	{
		name: "EventJSONRoundTrip",
		rule: "every event survives encoding/json: decoding what it encodes and encoding again gives the same bytes, kind included",
		run: func(r *report, k *kase) {
			var events []invoker.Event
			_, err := k.invoke(r, context.Background(), Fake{Answer: "round trip"}, invoker.Request{OnEvent: func(ev invoker.Event) { events = append(events, ev) }})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			for i, ev := range events {
				b, err := json.Marshal(ev)
				if err != nil {
					r.errorf("json.Marshal(event %d, %v) error = %v", i, ev.Kind, err)
					continue
				}
				var back invoker.Event
				if err := json.Unmarshal(b, &back); err != nil {
					r.errorf("json.Unmarshal(event %d) error = %v; the JSON was %.200s", i, err, b)
					continue
				}
				if back.Kind != ev.Kind {
					r.errorf("event %d: kind %v came back as %v", i, ev.Kind, back.Kind)
				}
				if again, _ := json.Marshal(back); !bytes.Equal(again, b) {
					r.errorf("event %d (%v) changed in a JSON round trip: %.200s became %.200s", i, ev.Kind, b, again)
				}
			}
		},
	},
	{
		name: "Resume",
		rule: "Request.SessionID resumes that session, and the Result reports it",
		run: func(r *report, k *kase) {
			const id = "0199a213-81c0-7800-8aa1-bbab2a035a53"
			res, err := k.invoke(r, context.Background(), Fake{Answer: "resumed"}, invoker.Request{SessionID: id})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if res.SessionID != id {
				r.errorf("Result.SessionID = %q, want the resumed %q (was the session id passed to the CLI?)", res.SessionID, id)
			}
		},
	},
	{
		name: "CancelReapsTree",
		rule: "cancelling ctx stops the CLI, returns the context's error with the session id and partial text, and leaves no process of the tree alive, including a grandchild and a process that left the CLI's session",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-cancel", Stream: true, Grandchild: true, Escapee: true}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, err := k.invoke(r, ctx, f, invoker.Request{Deltas: true, OnEvent: func(ev invoker.Event) {
				if isText(ev) {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				r.errorf("Invoke() error = %v, want context.Canceled", err)
			}
			if res.SessionID != f.SessionID {
				r.errorf("Result.SessionID = %q after cancel, want %q", res.SessionID, f.SessionID)
			}
			if res.Text == "" {
				r.errorf("Result.Text is empty after cancel, want the partial text streamed before it")
			}
		},
	},
	{
		name: "CancelCause",
		rule: "a cancel's cause (context.WithCancelCause) is named in the error but never matched by errors.Is or errors.As, before the call as during it: the error matches only context.Canceled",
		run: func(r *report, k *kase) {
			// The cause is an error the run could have had itself: a
			// sibling's exit status, wrapping a sentinel.
			cause := &invoker.ExitError{ExitCode: 7, Err: invoker.ErrRateLimited}
			for _, before := range []bool{true, false} {
				ctx, cancel := context.WithCancelCause(context.Background())
				req := invoker.Request{Deltas: true, OnEvent: func(ev invoker.Event) {
					if isText(ev) {
						cancel(cause)
					}
				}}
				if before {
					cancel(cause)
				}
				_, err := k.invoke(r, ctx, Fake{Stream: true}, req)
				cancel(nil)
				when := "during the call"
				if before {
					when = "before the call"
				}
				var ee *invoker.ExitError
				switch {
				case !errors.Is(err, context.Canceled):
					r.errorf("cancelled %s: Invoke() error = %v, want context.Canceled", when, err)
				case errors.Is(err, invoker.ErrRateLimited) || errors.As(err, &ee):
					r.errorf("cancelled %s: Invoke() error = %v matches the cancel's cause, want only context.Canceled", when, err)
				case !strings.Contains(err.Error(), cause.Error()):
					r.errorf("cancelled %s: Invoke() error = %q does not name the cause %q", when, err, cause)
				}
			}
		},
	},
	{
		name: "DeadlineReapsTree",
		rule: "the deadline of ctx behaves like a cancel and returns context.DeadlineExceeded",
		run: func(r *report, k *kase) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := k.invoke(r, ctx, Fake{Stream: true, Grandchild: true}, invoker.Request{})
			if !errors.Is(err, context.DeadlineExceeded) {
				r.errorf("Invoke() error = %v, want context.DeadlineExceeded", err)
			}
		},
	},
	{
		name: "StreamFailureKeepsSession",
		rule: "a failure the CLI reports in its stream is an error carrying the CLI's message, and the Result keeps the session id and the stderr tail",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-fail", Fail: "the model is overloaded", Stderr: "conformance stderr line\n"}
			res, err := k.invoke(r, context.Background(), f, invoker.Request{})
			if err == nil {
				r.errorf("Invoke() error = nil, want the reported failure")
			} else if !strings.Contains(err.Error(), f.Fail) {
				r.errorf("Invoke() error = %q, want it to carry the CLI's message %q", err, f.Fail)
			}
			var se *invoker.StreamError
			if !errors.As(err, &se) {
				r.errorf("Invoke() error = %v, want an *invoker.StreamError", err)
			}
			if res.SessionID != f.SessionID {
				r.errorf("Result.SessionID = %q, want %q", res.SessionID, f.SessionID)
			}
			if !strings.Contains(res.Stderr, "conformance stderr line") {
				r.errorf("Result.Stderr = %q, want the stderr tail", res.Stderr)
			}
		},
	},
	{
		name: "ExitStatus",
		rule: "a CLI that exits non-zero without its terminal event returns an error and reports the exit code, in the one-shot and the long-lived mode alike",
		run: func(r *report, k *kase) {
			for _, m := range k.modes() {
				ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
				res, err := k.invoke(r, ctx, Fake{ExitCode: 3, Stderr: "fatal: something broke\n"}, m.request())
				cancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					r.errorf("%sInvoke() did not return within %v (error %v), want an error for exit status 3 at once", m.name, hangGuard, err)
				case err == nil:
					r.errorf("%sInvoke() error = nil, want an error for exit status 3", m.name)
				}
				if res.ExitCode != 3 {
					r.errorf("%sResult.ExitCode = %d, want 3", m.name, res.ExitCode)
				}
				if !strings.Contains(res.Stderr, "something broke") {
					r.errorf("%sResult.Stderr = %q, want the stderr tail", m.name, res.Stderr)
				}
			}
		},
	},
	{
		name: "HugeLine",
		rule: "a single 8 MiB event line is delivered intact and streaming goes on after it",
		run: func(r *report, k *kase) {
			const size = 8 << 20
			longest := 0
			res, err := k.invoke(r, context.Background(), Fake{Answer: "after the line", HugeLine: size}, invoker.Request{
				OnEvent: func(ev invoker.Event) { longest = max(longest, len(ev.Raw)) },
			})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if longest < size {
				r.errorf("longest event line = %d bytes, want at least %d", longest, size)
			}
			if strings.TrimSpace(res.Text) != "after the line" {
				r.errorf("Result.Text = %q, want %q", res.Text, "after the line")
			}
		},
	},
	{
		name: "DroppedAnswer",
		rule: "a run whose answer was in a line skipped over the line limit is an error matching ErrLineTooLong that says how to raise the limit, never a success, and comes at once, in the one-shot and the long-lived mode alike",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-dropped", Answer: "lost", AnswerOverLimit: true}
			for _, m := range k.modes() {
				ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
				res, err := k.invoke(r, ctx, f, m.request())
				cancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					r.errorf("%sInvoke() did not return within %v (error %v), want ErrLineTooLong at once", m.name, hangGuard, err)
				case !errors.Is(err, invoker.ErrLineTooLong):
					r.errorf("%sInvoke() error = %v, want ErrLineTooLong", m.name, err)
				case !strings.Contains(err.Error(), "Options.MaxLineSize"):
					r.errorf("%sInvoke() error = %q, want it to say how to raise the limit (Options.MaxLineSize)", m.name, err)
				}
				if res.SessionID != f.SessionID {
					r.errorf("%sResult.SessionID = %q, want %q", m.name, res.SessionID, f.SessionID)
				}
			}
		},
	},
	{
		name: "BadInput",
		rule: "an empty prompt, a relative or missing workdir and an unknown permission are ErrInvalidRequest, returned before any process starts",
		run: func(r *report, k *kase) {
			wd := k.workdir()
			for _, req := range []invoker.Request{
				{Prompt: "   ", Workdir: wd},
				{Prompt: "hi", Workdir: "relative/dir"},
				{Prompt: "hi", Workdir: filepath.Join(wd, "missing")},
				{Prompt: "hi", Workdir: wd, Permission: "everything"},
			} {
				inv := k.newInvoker(Fake{})
				res, err := inv.Invoke(context.Background(), req)
				if !errors.Is(err, invoker.ErrInvalidRequest) {
					r.errorf("Invoke(%+v) error = %v, want ErrInvalidRequest", req, err)
				}
				if res == nil || res.ExitCode != -1 {
					r.errorf("Invoke(%+v) Result = %+v, want non-nil with ExitCode -1 (nothing ran)", req, res)
				}
			}
		},
	},
	{
		name: "SecretsNotQuoted",
		rule: "an environment entry that is not KEY=VALUE, in Request.Env or (where Capabilities.MCPServers is declared) in an MCPServer's Env, is ErrInvalidRequest, returned before any process starts, and its error never quotes the entry's value",
		run: func(r *report, k *kase) {
			const secret = "s3cret-conformance-value"
			wd := k.workdir()
			bad := []string{secret, "=" + secret, "API_KEY=" + secret + "\x00"}
			var reqs []invoker.Request
			for _, kv := range bad {
				reqs = append(reqs, invoker.Request{Prompt: "hi", Workdir: wd, Env: []string{kv}})
			}
			if k.capabilities().MCPServers {
				for _, kv := range bad {
					reqs = append(reqs, invoker.Request{Prompt: "hi", Workdir: wd, MCPServers: []invoker.MCPServer{
						{Name: "conformance", Command: "conformance-mcp", Env: []string{"OK=1", kv}}}})
				}
			}
			for _, req := range reqs {
				res, err := k.newInvoker(Fake{}).Invoke(context.Background(), req)
				switch {
				case !errors.Is(err, invoker.ErrInvalidRequest):
					r.errorf("Invoke() with a bad environment entry: error = %v, want ErrInvalidRequest", err)
				case strings.Contains(err.Error(), secret):
					r.errorf("Invoke() error = %q quotes the value of the bad environment entry", err)
				}
				if res == nil || res.ExitCode != -1 {
					r.errorf("Invoke() with a bad environment entry: Result = %+v, want non-nil with ExitCode -1 (nothing ran)", res)
				}
			}
		},
	},
	{
		name: "Capabilities",
		rule: "an Invoker reports its capabilities; each optional Request field it declares is honoured, and each other one is refused with ErrUnsupported, naming the field, before anything starts",
		run: func(r *report, k *kase) {
			caps := k.newInvoker(Fake{}).Capabilities()
			img := filepath.Join(k.workdir(), "pixel.png")
			if err := os.WriteFile(img, []byte("\x89PNG\r\n\x1a\n"), 0o644); err != nil {
				r.errorf("writing the test image: %v", err)
				return
			}
			// A sample value of each optional field, by the field's name:
			// the fields are those Capabilities lists, every one of them.
			samples := map[string]struct {
				set    func(*invoker.Request)
				answer string // "" means "seen"
			}{
				"Model":        {func(q *invoker.Request) { q.Model = "conformance-model" }, ""},
				"SessionID":    {func(q *invoker.Request) { q.SessionID = "conformance-session-0" }, ""},
				"Images":       {func(q *invoker.Request) { q.Images = []string{img} }, ""},
				"SystemPrompt": {func(q *invoker.Request) { q.SystemPrompt = "Answer briefly." }, ""},
				"OutputSchema": {func(q *invoker.Request) { q.OutputSchema = json.RawMessage(seenSchema) }, `{"answer":"seen"}`},
				"MaxTurns":     {func(q *invoker.Request) { q.MaxTurns = 5 }, ""},
				"MaxBudgetUSD": {func(q *invoker.Request) { q.MaxBudgetUSD = 5 }, ""},
				"Approve": {func(q *invoker.Request) {
					q.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{} }
				}, ""},
				"MCPServers": {func(q *invoker.Request) {
					q.MCPServers = []invoker.MCPServer{{Name: "conformance", URL: "http://127.0.0.1:9/mcp"}}
				}, ""},
				// No sample: Deltas has cases of its own, and Fork needs an
				// earlier conversation to copy.
				"Deltas": {},
				"Fork":   {},
			}
			for _, field := range (invoker.Capabilities{}).Unsupported() {
				f, ok := samples[field]
				if !ok {
					r.errorf("the suite has no sample of Request.%s, an optional field: add one", field)
					continue
				}
				if f.set == nil {
					continue
				}
				var req invoker.Request
				f.set(&req)
				answer := f.answer
				if answer == "" {
					answer = "seen"
				}
				res, err := k.invoke(r, context.Background(), Fake{Answer: answer}, req)
				if caps.Supports(field) {
					if err != nil || strings.TrimSpace(res.Text) != answer {
						r.errorf("Invoke() with Request.%s set (declared supported) = %q, %v; want the answer %q and no error", field, res.Text, err, answer)
					}
					continue
				}
				if !errors.Is(err, invoker.ErrUnsupported) || !errors.Is(err, invoker.ErrInvalidRequest) {
					r.errorf("Invoke() with Request.%s set (declared unsupported) error = %v, want ErrUnsupported (and ErrInvalidRequest)", field, err)
					continue
				}
				if !strings.Contains(err.Error(), "Request."+field) {
					r.errorf("Invoke() with Request.%s set: error %q does not name the field", field, err)
				}
				if res.ExitCode != -1 {
					r.errorf("Invoke() with Request.%s set: Result.ExitCode = %d, want -1 (nothing started)", field, res.ExitCode)
				}
			}
		},
	},
	{
		name: "StructuredAnswer",
		rule: "with Request.OutputSchema (where declared), a turn whose answer satisfies the schema returns it as valid JSON in Result.Structured, and one whose answer does not is a *SchemaError keeping the answer's text",
		run: func(r *report, k *kase) {
			if !k.capabilities().OutputSchema {
				return // refusal is checked by Capabilities
			}
			const answer = `{"name":"Ada","languages":["Go"]}`
			req := invoker.Request{OutputSchema: json.RawMessage(personSchema)}
			res, err := k.invoke(r, context.Background(), Fake{Answer: answer}, req)
			if err != nil {
				r.errorf("Invoke() with a matching answer: error = %v, want nil", err)
			}
			var got, want any
			if !json.Valid(res.Structured) || json.Unmarshal(res.Structured, &got) != nil {
				r.errorf("Result.Structured = %q, want valid JSON", res.Structured)
			} else if json.Unmarshal([]byte(answer), &want); !reflect.DeepEqual(got, want) {
				r.errorf("Result.Structured = %s, want %s", res.Structured, answer)
			}

			const text = "Ada, who wrote Go"
			res, err = k.invoke(r, context.Background(), Fake{Answer: text}, req)
			var se *invoker.SchemaError
			if !errors.As(err, &se) {
				r.errorf("Invoke() with an answer that is not JSON: error = %v, want a *SchemaError", err)
			} else if strings.TrimSpace(se.Text) != text {
				r.errorf("SchemaError.Text = %q, want the answer %q", se.Text, text)
			}
			if res.Structured != nil {
				r.errorf("Result.Structured = %s for an answer that is not JSON, want nil", res.Structured)
			}
		},
	},
	{
		name: "MaxTurnsReached",
		rule: "with Request.MaxTurns (where declared), a CLI that reaches the limit returns a *LimitError matching ErrMaxTurns, and the session id is kept to resume",
		run: func(r *report, k *kase) {
			if !k.capabilities().MaxTurns {
				return // refusal is checked by Capabilities
			}
			f := Fake{SessionID: "conformance-limit", Tool: true, Answer: "never reached"}
			res, err := k.invoke(r, context.Background(), f, invoker.Request{MaxTurns: 1})
			var le *invoker.LimitError
			if !errors.Is(err, invoker.ErrMaxTurns) || !errors.As(err, &le) {
				r.errorf("Invoke() error = %v, want a *LimitError matching ErrMaxTurns", err)
			} else if le.Limit != invoker.ErrMaxTurns || le.SessionID != f.SessionID {
				r.errorf("LimitError = {Limit %v, SessionID %q}, want {ErrMaxTurns, %q}", le.Limit, le.SessionID, f.SessionID)
			}
			if res.SessionID != f.SessionID {
				r.errorf("Result.SessionID = %q, want %q", res.SessionID, f.SessionID)
			}
		},
	},
	{
		name: "Concurrent",
		rule: "an Invoker is safe for concurrent use; each call owns its process tree and returns its own session and answer",
		run: func(r *report, k *kase) {
			inv := k.newInvoker(Fake{Answer: "concurrent answer"})
			const n = 4
			ids := make(chan string, n)
			for range n {
				go func() {
					res, err := k.invokeWith(r, inv, context.Background(), invoker.Request{})
					if err != nil || strings.TrimSpace(res.Text) != "concurrent answer" {
						r.errorf("concurrent Invoke() = %q, %v; want %q, nil", res.Text, err, "concurrent answer")
					}
					ids <- res.SessionID
				}()
			}
			seen := map[string]bool{}
			for range n {
				id := <-ids
				if id == "" || seen[id] {
					r.errorf("concurrent calls returned session ids %v and %q, want each call its own", seen, id)
				}
				seen[id] = true
			}
		},
	},
}

// hangGuard bounds a call that must return at once, so that an Invoker
// that hangs fails its case instead of the whole test binary. It is no
// timing: a correct Invoker comes nowhere near it.
var hangGuard = testenv.Timeout(testenv.Hang)

// A mode is a way a case's request runs.
type mode struct {
	name string // "" for the one-shot mode; else it prefixes the case's messages
	set  func(*invoker.Request)
}

func (m mode) request() invoker.Request {
	var req invoker.Request
	if m.set != nil {
		m.set(&req)
	}
	return req
}

// modes are the modes a case runs its request in: as it is, and, for an
// Invoker that declares two-way control, with Request.Approve set (or a
// server of Request.MCPServers), which takes the CLI's long-lived mode:
// Invoke then runs the request as a session of one turn, whose errors
// must be the one-shot mode's.
func (k *kase) modes() []mode {
	modes := []mode{{}}
	switch caps := k.capabilities(); {
	case caps.Approve:
		modes = append(modes, mode{name: "with Request.Approve set (the long-lived mode): ", set: func(q *invoker.Request) {
			q.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
		}})
	case caps.MCPServers:
		modes = append(modes, mode{name: "with Request.MCPServers set (the long-lived mode): ", set: func(q *invoker.Request) {
			q.MCPServers = []invoker.MCPServer{{Name: "conformance", URL: "http://127.0.0.1:9/mcp"}}
		}})
	}
	return modes
}

// doneLast reports whether the last of kinds that is not a warning is
// KindDone: warnings of what the run did after the CLI's terminal event
// may follow it.
func doneLast(kinds []invoker.EventKind) bool {
	for _, k := range slices.Backward(kinds) {
		if k != invoker.KindWarning {
			return k == invoker.KindDone
		}
	}
	return false
}

// isText reports whether ev carries text of the answer: a whole message,
// or a delta of one. The cancel cases stop a run at its first text; they
// ask for deltas (invokeWith drops the request where the CLI cannot stream
// them), since a message that never ends comes only as deltas.
func isText(ev invoker.Event) bool {
	return ev.Kind == invoker.KindMessage || ev.Kind == invoker.KindDelta && ev.Delta == invoker.KindMessage
}
