package driver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// A backend without a long-lived mode refuses to open a session before
// anything starts, with an error that says what to do instead.
func TestOpenSessionUnsupported(t *testing.T) {
	s := fakeagent.Script{RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := driver.New(testBackend{}, invoker.Options{Binary: os.Args[0]})
	if caps := inv.Capabilities(); caps.Sessions {
		t.Fatalf("test backend reports Sessions")
	}
	sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
	if !errors.Is(err, invoker.ErrUnsupported) || sess != nil {
		t.Fatalf("OpenSession() = %v, %v; want nil and ErrUnsupported", sess, err)
	}
	if !strings.HasPrefix(err.Error(), "fake: ") {
		t.Errorf("OpenSession() error = %v, want it to name the CLI", err)
	}
	if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil && len(rec.Procs) > 0 {
		t.Errorf("a refused session started processes: %v", rec.Procs)
	}
}

// Close between turns of a CLI that does not exit at the end of its input
// (a wedged CLI) stops it with the ladder once the interrupt grace has
// passed, and returns nil, as for a turn in flight: the caller asked for
// the end of the session, the session ended, and its tree is gone. Err
// says the same.
func TestCloseCLIIgnoringEOF(t *testing.T) {
	for _, c := range []struct {
		flavor string
		new    func(...invoker.Options) invoker.Invoker
	}{{fakeagent.Claude, claude.New}, {fakeagent.Codex, codex.New}, {fakeagent.Gemini, gemini.New}} {
		t.Run(c.flavor, func(t *testing.T) {
			s := fakeagent.Script{Flavor: c.flavor, IgnoreEOF: true, Answer: "answered", RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
			inv := c.new(invoker.Options{Binary: os.Args[0], TurnInterruptGrace: 200 * time.Millisecond,
				InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
			sess, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: s.Env()})
			if err != nil {
				t.Fatalf("OpenSession() error = %v", err)
			}
			if res, err := sess.Turn(context.Background(), invoker.TurnRequest{Prompt: "hi"}); err != nil || res.Text != "answered" {
				t.Errorf("Turn() = %+v, %v; want the answer", res, err)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
			if err := sess.Err(); err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
			rec, err := fakeagent.ReadRecord(s.RecordDir)
			if err != nil {
				t.Fatal(err)
			}
			if alive := rec.Alive(); len(alive) > 0 {
				t.Errorf("processes of the session alive after Close: %v", alive)
			}
			if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
				t.Errorf("processes carrying the session's tag alive after Close: %v", left)
			}
		})
	}
}
