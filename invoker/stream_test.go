package invoker_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

func TestStreamYieldsEventsThenResult(t *testing.T) {
	f := newFixture(t, fakeagent.Script{SessionID: "thread-s", Answer: "streamed", Tool: true})
	s := invoker.NewStream(context.Background(), f.inv, f.req)
	var kinds []invoker.EventKind
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatalf("Events() yielded error %v, want none", err)
		}
		kinds = append(kinds, ev.Kind)
	}
	if len(kinds) == 0 || kinds[0] != invoker.KindSession || kinds[len(kinds)-1] != invoker.KindDone {
		t.Errorf("event kinds = %v, want session first and done last", kinds)
	}
	res, err := s.Result()
	if err != nil || res.Text != "streamed" || res.SessionID != "thread-s" {
		t.Errorf("Result() = %+v, %v; want the answer, the session and no error", res, err)
	}
	f.assertReaped(1)
}

func TestStreamYieldsTheRunsError(t *testing.T) {
	f := newFixture(t, fakeagent.Script{SessionID: "thread-f", Fail: "model overloaded"})
	s := invoker.NewStream(context.Background(), f.inv, f.req)
	var last error
	n := 0
	for ev, err := range s.Events() {
		n++
		if err != nil {
			if ev.Kind != 0 {
				t.Errorf("error pair carries event %v, want the zero Event", ev.Kind)
			}
			last = err
		} else if last != nil {
			t.Errorf("event %v yielded after the error", ev.Kind)
		}
	}
	var se *invoker.StreamError
	if !errors.As(last, &se) || se.Message != "model overloaded" {
		t.Errorf("last error yielded = %v, want the *StreamError", last)
	}
	if res, err := s.Result(); err != last || res == nil || res.SessionID != "thread-f" {
		t.Errorf("Result() = %+v, %v; want the session and the error yielded", res, err)
	}
	f.assertReaped(1)
}

// Breaking out of the loop cancels the run: when the range statement
// ends, nothing of the tree survives and the goroutine running it is gone.
func TestStreamBreakReapsBeforeTheLoopEnds(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFixture(t, fakeagent.Script{
		SessionID: "thread-b", Chunks: 3, StallFor: time.Hour,
		Grandchild: true, Escapee: true,
	}, fastLadder...)
	s := invoker.NewStream(context.Background(), f.inv, f.req)
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatalf("Events() yielded error %v before the break", err)
		}
		if ev.Kind == invoker.KindMessage {
			break
		}
	}
	f.assertReaped(3) // at once: the CLI, its grandchild and the escapee
	res, err := s.Result()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Result() error = %v, want context.Canceled", err)
	}
	if res == nil || res.SessionID != "thread-b" || res.Text == "" {
		t.Errorf("Result() = %+v, want the session and the partial text", res)
	}
}

// A panic in the loop's body reaches the caller after the tree is reaped.
func TestStreamPanicInLoopReaps(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Chunks: 3, StallFor: time.Hour, Grandchild: true}, fastLadder...)
	s := invoker.NewStream(context.Background(), f.inv, f.req)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recover() = %v, want the loop's panic", p)
			}
		}()
		for ev := range s.Events() {
			if ev.Kind == invoker.KindMessage {
				panic("boom")
			}
		}
	}()
	f.assertReaped(2)
	if _, err := s.Result(); !errors.Is(err, context.Canceled) {
		t.Errorf("Result() error = %v, want context.Canceled", err)
	}
}

func TestStreamMisuse(t *testing.T) {
	f := newFixture(t, fakeagent.Script{})
	req := f.req
	req.OnEvent = func(invoker.Event) {}
	s := invoker.NewStream(context.Background(), f.inv, req)
	if _, err := s.Result(); err == nil {
		t.Errorf("Result() before the loop: error = nil, want one")
	}
	var errs []error
	for _, err := range s.Events() {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], invoker.ErrInvalidRequest) {
		t.Errorf("Events() with Request.OnEvent set yielded %v, want one ErrInvalidRequest", errs)
	}
	for _, err := range s.Events() {
		errs = append(errs, err)
	}
	if len(errs) != 2 || errs[1] == nil {
		t.Errorf("Events() ranged twice yielded %v, want an error", errs[1:])
	}
	if slices.ContainsFunc(errs, func(e error) bool { return e == nil }) {
		t.Errorf("a nil error was yielded with no event")
	}
	if entries, _ := readDirLen(f.script.RecordDir); entries > 0 {
		t.Errorf("a process started for a refused Stream")
	}
}

func readDirLen(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	return len(entries), err
}
