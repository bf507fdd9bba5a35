package invoker

import (
	"context"
	"errors"
	"iter"
)

// A Stream runs one turn for callers who prefer to pull its events with a
// range loop rather than receive them in Request.OnEvent:
//
//	s := invoker.NewStream(ctx, inv, req)
//	for ev, err := range s.Events() {
//		if err != nil {
//			return err // the run failed: ev is the zero Event
//		}
//		fmt.Println(ev.Kind, ev.Text)
//	}
//	res, _ := s.Result()
//
// It runs on the same engine, through Invoker.Invoke, with the same
// guarantees; in particular, when the loop ends early (break, return, a
// panic or runtime.Goexit in its body), the run is cancelled and its
// process tree reaped before the range statement ends.
//
// A Stream runs its turn once. It is not safe for concurrent use: range
// over Events and call Result from one goroutine.
type Stream struct {
	ctx context.Context
	inv Invoker
	req Request

	ran  bool
	done bool
	res  *Result
	err  error
}

// errStreamBreak is the cause with which a Stream cancels its run when the
// loop over Events ends before the run does; the run's error names it.
var errStreamBreak = errors.New("the loop over Stream.Events ended before the run")

// NewStream returns a Stream of one turn of inv for req, run under ctx.
// Nothing starts until the Stream's Events are ranged over. req.OnEvent
// must be nil: the loop receives the events.
func NewStream(ctx context.Context, inv Invoker, req Request) *Stream {
	return &Stream{ctx: ctx, inv: inv, req: req}
}

// Events returns an iterator that runs the turn and yields its events, in
// order, as they arrive, each with a nil error. The CLI waits while the
// loop's body runs, as it waits for OnEvent. If the run fails, the last
// pair yielded is the zero Event and Invoke's error (which the Result
// method returns too); after a success, the last event is the CLI's
// terminal event (KindDone) and no error follows.
//
// Ending the loop early cancels the run and waits until Invoke has
// returned: when the range statement ends, the CLI and every process it
// started are gone, and Result reports the cancelled run (an error
// matching context.Canceled, whose message says the loop ended).
//
// The turn runs once: ranging over Events again yields only an error.
func (s *Stream) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if s.ran {
			yield(Event{}, errors.New("invoker: Stream.Events ranged over twice: a Stream runs one turn; make a new one"))
			return
		}
		s.ran = true
		if s.req.OnEvent != nil {
			s.res = &Result{ExitCode: -1}
			s.err = &Error{CLI: s.inv.Name(), Err: invalid("Request.OnEvent is set: with a Stream, the range loop over Events receives the events; leave it nil")}
			s.done = true
			yield(Event{}, s.err)
			return
		}

		ctx, cancel := context.WithCancelCause(s.ctx)
		defer cancel(nil)
		events := make(chan Event)  // unbuffered: the run waits for the loop
		gone := make(chan struct{}) // closed when the loop will take no more
		finished := make(chan struct{})
		req := s.req
		req.OnEvent = func(ev Event) {
			select {
			case events <- ev:
			case <-gone: // the loop ended: the run is being cancelled
			}
		}
		go func() {
			defer close(finished)
			s.res, s.err = s.inv.Invoke(ctx, req)
		}()

		// However the loop ends (break, return, panic, Goexit), stop the
		// run and wait for Invoke, which reaps the tree, before returning.
		defer func() {
			if s.done {
				return
			}
			close(gone)
			cancel(errStreamBreak)
			<-finished
			s.done = true
		}()
		for {
			select {
			case ev := <-events:
				if !yield(ev, nil) {
					return
				}
			case <-finished:
				// OnEvent has returned for every event: none is pending.
				s.done = true
				if s.err != nil {
					yield(Event{}, s.err)
				}
				return
			}
		}
	}
}

// Result returns what Invoke returned for the turn: a non-nil *Result and
// the run's error. It is meant to be called once the range statement over
// Events has ended; before that, it returns a nil *Result and an error.
func (s *Stream) Result() (*Result, error) {
	if !s.done {
		return nil, errors.New("invoker: Stream.Result called before the loop over Events ended")
	}
	return s.res, s.err
}
