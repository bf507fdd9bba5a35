package invokertest

import (
	"context"
	"errors"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// sessionCases check the Session contract of an Invoker whose Capabilities
// declare Sessions; for any other Invoker they check that OpenSession
// refuses with ErrUnsupported and starts nothing.
var sessionCases = []testCase{
	{
		name: "SessionTurns",
		rule: "a session answers its turns one after another in one process, each turn as Invoke answers a run, and Close returns nil once the CLI and every process it started are gone",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-session-turns", Answer: "Turn answered."}
			s, tag, ok := k.openSession(r, f)
			if !ok {
				return
			}
			for i := range 2 {
				var kinds []invoker.EventKind
				res, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "conformance",
					OnEvent: func(ev invoker.Event) { kinds = append(kinds, ev.Kind) }})
				switch {
				case err != nil:
					r.errorf("turn %d: Turn() error = %v, want nil", i+1, err)
				case res == nil:
					r.errorf("turn %d: Turn() returned a nil *Result", i+1)
				case strings.TrimSpace(res.Text) == "":
					r.errorf("turn %d: Result.Text is empty, want the answer", i+1)
				case !doneLast(kinds):
					r.errorf("turn %d: event kinds = %v, want a done event last (but for warnings)", i+1, kinds)
				}
			}
			if id := s.ID(); id != f.SessionID {
				r.errorf("Session.ID() = %q, want %q", id, f.SessionID)
			}
			if err := s.Close(); err != nil {
				r.errorf("Close() = %v, want nil", err)
			}
			k.assertGone(r, tag, "Close")
		},
	},
	{
		name: "SessionCancelTurn",
		rule: "cancelling a turn's context ends that turn with the context's error and the partial result, and the session takes the next turn",
		run: func(r *report, k *kase) {
			f := Fake{SessionID: "conformance-session-cancel", Stream: true}
			s, tag, ok := k.openSession(r, f)
			if !ok {
				return
			}
			defer func() {
				s.Close()
				k.assertGone(r, tag, "Close")
			}()
			for i := range 2 {
				ctx, cancel := context.WithCancel(context.Background())
				res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "conformance",
					OnEvent: func(invoker.Event) { cancel() }})
				cancel()
				if !errors.Is(err, context.Canceled) {
					r.errorf("turn %d: cancelled Turn() error = %v, want context.Canceled", i+1, err)
				}
				if res == nil || res.SessionID != f.SessionID {
					r.errorf("turn %d: cancelled Turn() Result = %+v, want one with the session id %q", i+1, res, f.SessionID)
				}
				select {
				case <-s.Done():
					r.errorf("turn %d: the session ended after a cancelled turn: %v", i+1, s.Err())
					return
				default:
				}
			}
		},
	},
	{
		name: "SessionCloseMidTurn",
		rule: "Close during a turn stops the CLI with the ladder; the turn returns ErrSessionClosed, and when Close returns the CLI and every process it started (a grandchild, a setsid escapee) are gone",
		run: func(r *report, k *kase) {
			f := Fake{Stream: true, Grandchild: true, Escapee: true}
			s, tag, ok := k.openSession(r, f)
			if !ok {
				return
			}
			started, turn := startTurn(context.Background(), s)
			select {
			case <-started:
			case err := <-turn:
				r.errorf("Turn() returned before its first event: %v", err)
				s.Close()
				return
			}
			s.Close()
			if err := <-turn; !errors.Is(err, invoker.ErrSessionClosed) {
				r.errorf("Turn() during Close error = %v, want ErrSessionClosed", err)
			}
			k.assertGone(r, tag, "Close")
		},
	},
	{
		name: "SessionRefusals",
		rule: "a turn with an empty prompt, or one while another runs, is refused at once (ErrInvalidRequest, ErrTurnInProgress) and the session goes on; a closed session refuses turns with ErrSessionClosed",
		run: func(r *report, k *kase) {
			f := Fake{Stream: true}
			s, tag, ok := k.openSession(r, f)
			if !ok {
				return
			}
			if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: " "}); !errors.Is(err, invoker.ErrInvalidRequest) {
				r.errorf("Turn(empty prompt) error = %v, want ErrInvalidRequest", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			started, turn := startTurn(ctx, s)
			select {
			case <-started:
				if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "second"}); !errors.Is(err, invoker.ErrTurnInProgress) {
					r.errorf("Turn() while another runs: error = %v, want ErrTurnInProgress", err)
				}
			case err := <-turn:
				r.errorf("Turn() returned before its first event: %v", err)
				turn = nil
			}
			cancel()
			if turn != nil {
				<-turn
			}
			if err := s.Close(); err != nil {
				r.errorf("Close() = %v, want nil", err)
			}
			k.assertGone(r, tag, "Close")
			if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "after"}); !errors.Is(err, invoker.ErrSessionClosed) {
				r.errorf("Turn() after Close: error = %v, want ErrSessionClosed", err)
			}
		},
	},
}

// startTurn runs a turn of s under ctx in a goroutine of its own. started
// is closed at the turn's first event; turn receives its error.
func startTurn(ctx context.Context, s invoker.Session) (started <-chan struct{}, turn <-chan error) {
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once bool
		_, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "conformance", OnEvent: func(invoker.Event) {
			if !once {
				once = true
				close(first)
			}
		}})
		done <- err
	}()
	return first, done
}

// openSession opens a session of an Invoker for f, with a fresh tag. When
// the Invoker declares no sessions, it checks the refusal instead and
// reports ok false.
func (k *kase) openSession(r *report, f Fake) (s invoker.Session, tag string, ok bool) {
	inv := k.newInvoker(f)
	tag = newTag()
	req := invoker.SessionRequest{Workdir: k.workdir(), Env: []string{TagVar + "=" + tag}}
	// The context of OpenSession bounds the whole session: Close ends it.
	s, err := inv.OpenSession(context.Background(), req)
	if !inv.Capabilities().Sessions {
		if !errors.Is(err, invoker.ErrUnsupported) || s != nil {
			r.errorf("OpenSession() of an Invoker without Sessions = %v, %v; want nil and ErrUnsupported", s, err)
		}
		k.assertGone(r, tag, "a refused OpenSession")
		return nil, tag, false
	}
	if err != nil || s == nil {
		r.errorf("OpenSession() = %v, %v; want a session (Capabilities.Sessions is true)", s, err)
		return nil, tag, false
	}
	return s, tag, true
}

// assertGone reports the live processes that carry tag, after what.
func (k *kase) assertGone(r *report, tag, what string) {
	if alive := survivors(tag); len(alive) > 0 {
		r.errorf("processes alive after %s returned: pids %v", what, alive)
	}
}
