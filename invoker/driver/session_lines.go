package driver

import (
	"errors"
	"fmt"
	"os"

	"github.com/clinvoke/clinvoke/invoker"
)

// The session as its run's conversation: the protocol's lines out
// (writeInput, write) and in (stdoutLine, stderrLine, lineSkipped), and
// the end of the session (ended).

// write queues lines, each with a newline, for standard input. It never
// blocks: writeInput writes the queue, so write may be called under
// protoMu.
func (s *session) write(lines ...[]byte) {
	if len(lines) == 0 {
		return
	}
	s.mu.Lock()
	s.enqueue(lines)
	s.mu.Unlock()
	s.signal()
}

// enqueue appends lines, each with a newline, to the stdin queue; the
// caller holds mu and signals the writer once it lets mu go.
func (s *session) enqueue(lines [][]byte) {
	for _, l := range lines {
		s.queue = append(s.queue, l...)
		s.queue = append(s.queue, '\n')
	}
}

func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *session) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// writeInput writes what the session queues until the session asks for
// end of file or the CLI exits (the run then closes standard input, which
// ends a blocked write).
func (s *session) writeInput(w *os.File, exited <-chan struct{}) {
	for {
		s.mu.Lock()
		buf, eof := s.queue, s.eof
		s.queue = nil
		s.mu.Unlock()
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				s.log.Debug("writing to the session's stdin", "err", err)
			}
			continue
		}
		if eof {
			w.Close()
			return
		}
		select {
		case <-s.wake:
		case <-exited:
			return
		}
	}
}

// A line's reading by the protocol: its step, and the turn in flight when
// it was decoded (nil between turns), to which its events and questions
// belong however late they are delivered (a handshake's answer must not
// count as the first event of a turn that started meanwhile).
type reading struct {
	t      *turn
	events []invoker.Event
	asks   []Approval
	err    error
}

// stdoutLine hands one line to the protocol, delivers its events to the
// turn it belongs to, and then asks that turn's Approve about the line's
// questions: the program sees the tool call before the question about it.
func (s *session) stdoutLine(line []byte) error {
	rd := s.read(line)
	s.ids.stamp(rd.events)
	s.deliver(rd.t, rd.events)
	s.askAll(rd.t, rd.asks)
	return rd.err
}

// read has the protocol decode line, under protoMu: it writes the
// protocol's replies, hands its in-band MCP messages to the Go servers,
// marks the session ready, and notes the end of the turn.
func (s *session) read(line []byte) (rd reading) {
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	s.mu.Lock()
	rd.t = s.cur
	s.mu.Unlock()
	var st Step
	rd.events, rd.err = decodeLine(s.log, line, func() ([]invoker.Event, error) {
		var err error
		st, err = s.proto.Decode(line)
		return st.Events, err
	})
	s.write(st.Write...)
	rd.asks = st.Approvals
	for _, c := range st.Calls {
		s.callInBand(rd.t, c)
	}
	for _, ev := range rd.events {
		if ev.SessionID != "" {
			s.mu.Lock()
			s.id = ev.SessionID
			s.mu.Unlock()
		}
	}
	if st.Ready {
		s.markReady()
	}
	if st.TurnEnded && rd.t != nil && !rd.t.last {
		rd.t.out = s.outcome()
		rd.t.last = true
		if n := len(rd.events); n == 0 || rd.events[n-1].Kind != invoker.KindDone {
			rd.events = append(rd.events, invoker.Event{Kind: invoker.KindDone, Raw: safeRaw(line)})
		}
	}
	return rd
}

// deliver hands events to the turn t they belong to, unless it has ended,
// and ends it after its last event. Lines printed between turns have no
// one to go to.
func (s *session) deliver(t *turn, events []invoker.Event) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if t == nil || t != cur || len(events) == 0 {
		return
	}
	t.deliver(events)
	// (t.last is written under protoMu, by this goroutine.)
	if events[len(events)-1].Kind == invoker.KindDone && t.last {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		close(t.end)
	}
}

// outcome asks the protocol what the turn that just ended established; the
// caller holds protoMu.
func (s *session) outcome() (out Outcome) {
	defer func() {
		if recover() != nil {
			out = Outcome{}
		}
	}()
	return s.proto.Outcome(s.r.stderrTail())
}

func (s *session) stderrLine(line []byte) error {
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	return inspectStderr(func() error { return s.proto.Stderr(line) })
}

// lineSkipped ends the session at once with ErrLineTooLong, for a line
// skipped during a turn or during the handshake. A one-shot run reads on
// to the CLI's exit, which comes after its last line; a session's protocol
// cannot go on in step with its CLI after losing a line that may have been
// the end of the turn (Claude Code's result holds the whole answer) or a
// request the CLI waits on: the turn would wait for its deadline. The turn
// in flight fails with the error (see turnVerdict), as the opening does. A
// line skipped between turns belongs to none, and the session goes on.
func (s *session) lineSkipped(size int64) {
	s.mu.Lock()
	t := s.cur
	if t != nil {
		t.skipped++
		t.skippedMax = max(t.skippedMax, size)
	}
	s.mu.Unlock()
	select {
	case <-s.ready:
		if t == nil {
			s.log.Warn("skipped a stdout line over the line limit between turns", "bytes", size, "limit", s.cfg.maxLineSize)
			return
		}
	default: // the handshake
	}
	s.halt(&lineTooLongError{n: 1, longest: size, max: s.cfg.maxLineSize, session: !s.oneTurn})
	s.deliver(t, []invoker.Event{skippedWarning(size, s.cfg.maxLineSize)})
}

// ended ends the session once its tree is reaped: it ends the tool calls
// the tree made and waits for their handlers, and records why the session
// ended (Err).
func (s *session) ended() {
	close(s.reaped)
	s.tools.close()
	s.inBand.Wait()
	err := s.r.verdict(s.processOutcome(), nil, nil, &invoker.Result{})
	if errors.Is(err, errClosedInFlight) || errors.Is(err, errClosedPastEOF) {
		// Close's stop is what the caller asked for.
		err = nil
	}
	if s.cb.failed() {
		// A callback of the caller's panicked (re-raised by the turn
		// that waits, if any): the session did not end well.
		err = fmt.Errorf("the CLI was killed because %s", s.cb.cause())
	}
	s.err = err
	end := s.r.end()
	s.tel.end(&invoker.Result{ExitCode: end.state.Code, Stderr: end.stderr, Containment: s.r.level(), SessionID: s.ID(), OutputCut: end.cut,
		Queued: s.r.queued, Resources: resources(end.usage)}, err, s.cb.failed())
	s.endCalls(errSessionOver)
}

// processOutcome is what the session's process established: a CLI that
// exits at the end of its input (Close), with no turn in flight and
// nothing stopping it, ended well, whatever its status (Claude Code exits
// 1 there after an interrupted turn). An exit at any other time is not,
// status 0 included (Gemini exits 0 on the SIGINT that a fatal error of
// the protocol brings).
func (s *session) processOutcome() *Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Outcome{SessionID: s.id, Success: s.eof && s.cur == nil && !s.r.stopping()}
}

// errSessionOver is the cause of the context of calls between turns once
// the session is over.
var errSessionOver = errors.New("the session is over")
