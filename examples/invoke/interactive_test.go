package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// syncBuffer is a bytes.Buffer written by the loop and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fakeClaude(t *testing.T, s fakeagent.Script) (invoker.Invoker, invoker.Request, fakeagent.Script) {
	s.Flavor, s.RecordDir, s.Tag = fakeagent.Claude, t.TempDir(), fakeagent.NewTag()
	inv := claude.New(invoker.Options{Binary: os.Args[0]})
	return inv, invoker.Request{Workdir: t.TempDir(), Env: s.Env()}, s
}

func assertNoSurvivors(t *testing.T, s fakeagent.Script) {
	t.Helper()
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes survived invoke -i: %v", left)
	}
}

// Two prompts, one process; end of input ends the session.
func TestInteractiveTwoTurns(t *testing.T) {
	inv, req, s := fakeClaude(t, fakeagent.Script{})
	var out, errw syncBuffer
	code := interactive(inv, req, strings.NewReader("first\n\nsecond\n"), &out, &errw, nil, true)
	if code != 0 {
		t.Fatalf("interactive() = %d, want 0; stderr:\n%s", code, errw.String())
	}
	want := "Turn 1: " + fakeagent.DefaultAnswer + "\nTurn 2: " + fakeagent.DefaultAnswer + "\n"
	if out.String() != want {
		t.Errorf("standard output = %q, want %q", out.String(), want)
	}
	assertNoSurvivors(t, s)
}

// The first Ctrl-C interrupts the turn and the loop goes on; at the
// prompt, Ctrl-C exits.
func TestInteractiveCtrlC(t *testing.T) {
	inv, req, s := fakeClaude(t, fakeagent.Script{Grandchild: true})
	pr, pw := io.Pipe()
	defer pw.Close()
	sigs := make(chan os.Signal, 1)
	errw := &syncBuffer{}
	streaming := make(chan struct{}, 1)
	answered := make(chan struct{}, 1)
	// The printer writes "» " for whole messages (the stalled turn is
	// streaming) and "✓" when a turn has returned (the loop is back at
	// its prompt).
	watch := writerFunc(func(p []byte) (int, error) {
		for _, w := range []struct {
			mark string
			ch   chan struct{}
		}{{"» ", streaming}, {"✓", answered}} {
			if bytes.Contains(p, []byte(w.mark)) {
				select {
				case w.ch <- struct{}{}:
				default:
				}
			}
		}
		return errw.Write(p)
	})
	var out syncBuffer
	codec := make(chan int, 1)
	go func() { codec <- interactive(inv, req, pr, &out, watch, sigs, false) }()
	io.WriteString(pw, fakeagent.PromptStall+"\n")
	<-streaming
	sigs <- os.Interrupt          // interrupts the turn
	io.WriteString(pw, "again\n") // read once the interrupted turn has ended
	<-answered
	sigs <- os.Interrupt // at the prompt: exit
	if code := <-codec; code != 130 {
		t.Errorf("interactive() = %d, want 130; stderr:\n%s", code, errw.String())
	}
	if !strings.Contains(errw.String(), "interrupted; the session goes on") {
		t.Errorf("stderr does not report the interrupted turn:\n%s", errw.String())
	}
	assertNoSurvivors(t, s)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
