package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// A run is a session of one turn: the same output of the CLI gives the
// same outcome through Invoke and through Session.Turn. Each case scripts
// Claude Code's fake once, and runs it both ways: a run prints the turn
// and exits, a session prints it in answer to a user message and waits for
// the next. What differs between the two is stated in the case (a session
// that had to be stopped is closed; a run's CLI exits).
func TestOutcomesRunAndTurn(t *testing.T) {
	type want struct {
		is   []error // the error matches each, through both paths
		not  []error // and none of these
		as   any     // a pointer to a typed error errors.As must find, or nil
		text string  // Result.Text, when not empty
	}
	tests := []struct {
		name   string
		script fakeagent.Script
		req    invoker.Request
		opts   invoker.Options
		// deadline, when positive, is the turn's context's timeout.
		deadline time.Duration
		want     want
		// sessionIs are errors a session's turn matches besides want.is,
		// and sessionErr those Session.Err matches once it is closed
		// (nil: the session lives on after the turn).
		sessionIs, sessionErr []error
		// runText, when not empty, is Invoke's Result.Text.
		runText string
	}{
		{
			name:   "answer",
			script: fakeagent.Script{Tool: true, Chunks: 2, Answer: "It prints hello."},
			want:   want{text: "It prints hello."},
		},
		{
			// The bug of the old session layer: a turn reported success
			// although a line of it was skipped. A run reads on to the
			// CLI's exit, and keeps the answer that came after; a
			// session's turn fails at once, and ends the session,
			// whose protocol lost a line (what came after the line
			// until the CLI stopped is in Result.Text, or not).
			name:       "a line over the cap mid-turn",
			script:     fakeagent.Script{HugeLine: 256 << 10, Answer: "done"},
			opts:       invoker.Options{MaxLineSize: 64 << 10},
			want:       want{is: []error{invoker.ErrLineTooLong}, not: []error{invoker.ErrNoResult}},
			runText:    "done",
			sessionIs:  []error{invoker.ErrSessionClosed},
			sessionErr: []error{invoker.ErrLineTooLong},
		},
		{
			name:   "a failure reported in the stream",
			script: fakeagent.Script{Fail: "API Error: 529 overloaded"},
			want:   want{as: new(*invoker.StreamError)},
		},
		{
			name:   "the turn limit",
			script: fakeagent.Script{Tool: true, Answer: "never reached"},
			req:    invoker.Request{MaxTurns: 1},
			want:   want{is: []error{invoker.ErrMaxTurns}, as: new(*invoker.LimitError)},
		},
		{
			name:   "an answer that does not satisfy the schema",
			script: fakeagent.Script{Answer: `{"y":1}`},
			req:    invoker.Request{OutputSchema: json.RawMessage(`{"type":"object","required":["x"],"properties":{"x":{"type":"integer"}}}`)},
			want:   want{as: new(*invoker.SchemaError), text: `{"y":1}`},
		},
		{
			name:   "no first event in time",
			script: fakeagent.Script{SilentFor: time.Hour},
			opts:   invoker.Options{FirstEventTimeout: time.Second},
			want:   want{is: []error{invoker.ErrFirstEventTimeout}, not: []error{context.Canceled, context.DeadlineExceeded}},
		},
		{
			name:   "silence mid-turn",
			script: fakeagent.Script{Answer: "half", StallFor: time.Hour},
			opts:   invoker.Options{IdleTimeout: time.Second},
			want:   want{is: []error{invoker.ErrIdleTimeout}, not: []error{context.Canceled, context.DeadlineExceeded}},
		},
		{
			// The other bug: the session reported context.Canceled,
			// which nobody had called, instead of why it ended.
			name:       "a deadline the CLI ignores",
			script:     fakeagent.Script{Answer: "half", StallFor: time.Hour, IgnoreInterrupt: true, IgnoreSignals: true},
			opts:       invoker.Options{TurnInterruptGrace: 300 * time.Millisecond},
			deadline:   time.Second,
			want:       want{is: []error{context.DeadlineExceeded}, not: []error{context.Canceled}},
			sessionIs:  []error{invoker.ErrInterruptIgnored, invoker.ErrSessionClosed},
			sessionErr: []error{invoker.ErrInterruptIgnored, context.DeadlineExceeded},
		},
	}
	check := func(t *testing.T, how string, res *invoker.Result, err error, w want, extra []error) {
		t.Helper()
		if res == nil {
			t.Fatalf("%s: Result = nil", how)
		}
		if len(w.is) == 0 && w.as == nil && err != nil {
			t.Errorf("%s: error = %v, want nil", how, err)
		}
		for _, target := range append(append([]error{}, w.is...), extra...) {
			if !errors.Is(err, target) {
				t.Errorf("%s: error = %v, want it to match %v", how, err, target)
			}
		}
		for _, target := range w.not {
			if errors.Is(err, target) {
				t.Errorf("%s: error = %v, want it not to match %v", how, err, target)
			}
		}
		if w.as != nil && !errors.As(err, w.as) {
			t.Errorf("%s: error = %v, want a %T", how, err, w.as)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "claude: ") {
			t.Errorf("%s: error = %q, want it to name the CLI", how, err)
		}
		if w.text != "" && res.Text != w.text {
			t.Errorf("%s: Result.Text = %q, want %q", how, res.Text, w.text)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.script
			s.Flavor, s.Tag = fakeagent.Claude, fakeagent.NewTag()
			opts := []invoker.Options{
				{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond},
				tt.opts,
			}
			inv := claude.New(opts...)
			req := tt.req
			req.Prompt, req.Workdir, req.Env = "What does `echo hello` print?", t.TempDir(), s.Env()
			turnCtx := func() (context.Context, context.CancelFunc) {
				if tt.deadline > 0 {
					return context.WithTimeout(context.Background(), tt.deadline)
				}
				return context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
			}

			ctx, cancel := turnCtx()
			res, err := inv.Invoke(ctx, req)
			cancel()
			check(t, "Invoke", res, err, tt.want, nil)
			if tt.runText != "" && res.Text != tt.runText {
				t.Errorf("Invoke: Result.Text = %q, want %q", res.Text, tt.runText)
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("Invoke: processes survived: %v", left)
			}

			sess, err := inv.OpenSession(context.Background(), req.Session())
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			ctx, cancel = turnCtx()
			res, err = sess.Turn(ctx, req.Turn())
			cancel()
			check(t, "Session.Turn", res, err, tt.want, tt.sessionIs)
			if tt.sessionErr == nil {
				select {
				case <-sess.Done():
					t.Errorf("the session ended after the turn: %v", sess.Err())
				default:
				}
				if cerr := sess.Close(); cerr != nil {
					t.Errorf("Close() = %v, want nil", cerr)
				}
			} else {
				<-sess.Done()
				for _, e := range []struct {
					name string
					err  error
				}{{"Err", sess.Err()}, {"Close", sess.Close()}} {
					for _, target := range tt.sessionErr {
						if !errors.Is(e.err, target) {
							t.Errorf("Session.%s() = %v, want it to match %v", e.name, e.err, target)
						}
					}
					if errors.Is(e.err, context.Canceled) {
						t.Errorf("Session.%s() = %v: nobody cancelled the session", e.name, e.err)
					}
				}
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("Session: processes survived Close: %v", left)
			}
		})
	}
}

// An Invoke that runs as a session of one turn (two-way control takes
// Claude Code's long-lived mode) ends as a one-shot run does: for the
// same cancel or deadline, the same error, read the same way. Before, a
// cancelled one read "claude: session closed: context canceled: context
// canceled": the caller opened no session, and the cause came twice.
func TestRoutedInvokeErrorsReadAsOneShot(t *testing.T) {
	cause := errors.New("the user went away")
	tests := []struct {
		name string
		// ctx returns the run's context and, for a cancel, the function
		// OnEvent calls at the first text.
		ctx  func() (context.Context, func())
		want error
	}{
		{"cancel", func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancel
		}, context.Canceled},
		{"cancel with a cause", func() (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(context.Background())
			return ctx, func() { cancel(cause) }
		}, context.Canceled},
		{"deadline", func() (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			t.Cleanup(cancel)
			return ctx, func() {}
		}, context.DeadlineExceeded},
	}
	approve := func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []string
			for _, routed := range []bool{false, true} {
				s := fakeagent.Script{Flavor: fakeagent.Claude, Tag: fakeagent.NewTag(), Chunks: 2, Answer: "partial words", StallFor: time.Hour}
				inv := claude.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
				ctx, stop := tt.ctx()
				req := invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), OnEvent: func(ev invoker.Event) {
					if ev.Kind == invoker.KindMessage {
						stop()
					}
				}}
				how := "one-shot"
				if routed {
					how, req.Approve = "with Approve", approve
				}
				res, err := inv.Invoke(ctx, req)
				if !errors.Is(err, tt.want) {
					t.Errorf("%s: Invoke() error = %v, want %v", how, err, tt.want)
				}
				if errors.Is(err, invoker.ErrSessionClosed) || errors.Is(err, cause) {
					t.Errorf("%s: Invoke() error = %v, want it to match only %v", how, err, tt.want)
				}
				if err != nil && strings.Count(err.Error(), tt.want.Error()) != 1 {
					t.Errorf("%s: Invoke() error = %q, want %q in it once", how, err, tt.want)
				}
				if res.SessionID == "" || res.Text == "" {
					t.Errorf("%s: Result = %+v, want the session id and the partial text", how, res)
				}
				if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
					t.Errorf("%s: processes survived: %v", how, left)
				}
				msgs = append(msgs, fmt.Sprint(err))
			}
			if msgs[0] != msgs[1] {
				t.Errorf("the same stop reads %q one-shot and %q with Approve, want them alike", msgs[0], msgs[1])
			}
		})
	}
}

// A turn of a session whose own context is cancelled (the same context as
// the turn's, as a caller often passes) says once why: the session closed
// because its context was cancelled.
func TestSessionCancelledByItsContextSaysItOnce(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Claude, Tag: fakeagent.NewTag(), Chunks: 2, Answer: "partial words", StallFor: time.Hour}
	inv := claude.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := inv.OpenSession(ctx, invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	_, err = sess.Turn(ctx, invoker.TurnRequest{Prompt: "hi", OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, invoker.ErrSessionClosed) {
		t.Errorf("Turn() error = %v, want context.Canceled and ErrSessionClosed", err)
	}
	var se *invoker.StreamError
	if errors.As(err, &se) {
		t.Errorf("Turn() error = %v, want no *StreamError: the CLI ended the turn because it was asked to", err)
	}
	if err != nil && strings.Count(err.Error(), context.Canceled.Error()) != 1 {
		t.Errorf("Turn() error = %q, want %q in it once", err, context.Canceled)
	}
	if cerr := sess.Close(); !errors.Is(cerr, context.Canceled) {
		t.Errorf("Close() = %v, want the session's end: context.Canceled", cerr)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived: %v", left)
	}
}

// A stdout line over the line limit in the long-lived mode fails the turn
// at once with ErrLineTooLong, as a one-shot run fails, for every CLI:
// before, Claude Code's answer over the limit (its assistant line and its
// result, the turn's end, both skipped) made the turn wait for the
// deadline or the idle timeout. The session ends with it: its protocol
// lost a line, which may have been the end of the turn or a request the
// CLI waits on. A run of Invoke carried by a session (Approve) says so
// as a one-shot run does, without a session.
func TestLineOverLimitInSession(t *testing.T) {
	approve := func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }
	for _, c := range []struct {
		flavor string
		new    func(...invoker.Options) invoker.Invoker
	}{{fakeagent.Claude, claude.New}, {fakeagent.Codex, codex.New}, {fakeagent.Gemini, gemini.New}} {
		t.Run(c.flavor, func(t *testing.T) {
			const limit = 64 << 10
			s := fakeagent.Script{Flavor: c.flavor, SessionID: "sess-over-limit", Answer: "lost", AnswerSize: 2 * limit, Tag: fakeagent.NewTag()}
			inv := c.new(invoker.Options{Binary: os.Args[0], MaxLineSize: limit, InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
			// A guard against the hang, not a timing: the turn fails as
			// soon as the line is skipped.
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
			defer cancel()
			check := func(how string, res *invoker.Result, err error) {
				t.Helper()
				if !errors.Is(err, invoker.ErrLineTooLong) || !strings.Contains(fmt.Sprint(err), "Options.MaxLineSize") {
					t.Errorf("%s: error = %v, want ErrLineTooLong saying how to raise the limit", how, err)
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s: error = %v: the turn waited for the deadline", how, err)
				}
				if res == nil || res.SessionID != s.SessionID {
					t.Errorf("%s: Result = %+v, want the session id %q", how, res, s.SessionID)
				}
			}

			sess, err := inv.OpenSession(ctx, invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			res, err := sess.Turn(ctx, invoker.TurnRequest{Prompt: "hi"})
			check("Session.Turn", res, err)
			if !errors.Is(err, invoker.ErrSessionClosed) {
				t.Errorf("Session.Turn: error = %v, want ErrSessionClosed too: the session ended", err)
			}
			select {
			case <-sess.Done():
			default:
				t.Error("the session is still open after a turn that lost a line")
			}
			if err := sess.Err(); !errors.Is(err, invoker.ErrLineTooLong) {
				t.Errorf("Session.Err() = %v, want ErrLineTooLong", err)
			}
			if err := sess.Close(); !errors.Is(err, invoker.ErrLineTooLong) {
				t.Errorf("Session.Close() = %v, want ErrLineTooLong, as Err", err)
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("Session: processes survived: %v", left)
			}

			res, err = inv.Invoke(ctx, invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), Approve: approve})
			check("Invoke with Approve", res, err)
			if errors.Is(err, invoker.ErrSessionClosed) {
				t.Errorf("Invoke with Approve: error = %v, want no ErrSessionClosed: the caller opened no session", err)
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("Invoke: processes survived: %v", left)
			}
		})
	}
}
