package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/google/jsonschema-go/jsonschema"
)

// session is the second driver of the engine's run: one warm CLI process
// holding a conversation, whose turns are spoken in the CLI's protocol
// (SessionProtocol). It implements invoker.Session.
type session struct {
	cli    string
	cfg    *config
	e      *engine
	sreq   invoker.SessionRequest
	schema *jsonschema.Resolved // SessionRequest.OutputSchema, resolved
	proto  SessionProtocol
	r      *run
	ctx    context.Context         // the context given to OpenSession
	stop   context.CancelCauseFunc // starts the signal ladder, with the cause
	// stopCause is why the session stopped itself (an ignored interrupt,
	// Close with a turn in flight), if it did: Err reports it rather than
	// the context.Canceled of the ladder it started.
	stopCause atomic.Pointer[error]

	busy atomic.Bool // a Turn is running
	// oneTurn: the session carries one run of Invoke (invokeInSession),
	// whose errors read as a one-shot run's: the caller opened no
	// session. Set before the tree starts.
	oneTurn bool

	mu      sync.Mutex
	cur     *turnState // the turn whose events are being delivered
	id      string     // the latest session id seen
	queue   []byte     // bytes waiting to be written to standard input
	eof     bool       // close standard input once queue is written
	closing bool       // Close was called

	wake      chan struct{} // something was queued, or eof set
	started   chan struct{} // the tree has started (closed by feed)
	ready     chan struct{} // the handshake is complete
	readyOnce sync.Once
	done      chan struct{} // the tree is gone and reaped
	err       error         // why the session ended, without the CLI's name; set before done is closed
	closeOnce sync.Once
	closeErr  error
	// tools hosts the session's Go MCP servers; calls counts the
	// goroutines delivering in-band MCP messages to them.
	tools *tools
	calls sync.WaitGroup
	// pending are the approvals of the line being delivered, asked once
	// its events are (only the stdout reader uses it, under the decoder
	// lock).
	pending []pendingAsk
	// lineTurn is the turn in flight when the line being delivered was
	// decoded (nil between turns); only the stdout reader uses it.
	lineTurn *turnState
}

// OpenSession implements invoker.Invoker for every backend; backends
// without a long-lived mode refuse with ErrUnsupported.
func (e *engine) OpenSession(ctx context.Context, req invoker.SessionRequest) (invoker.Session, error) {
	s, err := e.open(ctx, req, false)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open opens a session for OpenSession, or, with oneTurn, to carry one
// run of Invoke. When the session's tree started but the opening failed,
// it returns the session too, ended, whose run holds the CLI's exit status
// and stderr.
func (e *engine) open(ctx context.Context, req invoker.SessionRequest, oneTurn bool) (*session, error) {
	var s *session
	fail := func(err error) (*session, error) { return s, &cliError{CLI: e.b.Name(), Err: err} }
	sb, ok := e.b.(SessionBackend)
	if !ok || !e.b.Capabilities().Sessions {
		return fail(sessionsUnsupported(e.b.Hint("Sessions")))
	}
	schema, err := e.checkSession(&req)
	if err != nil {
		return fail(err)
	}
	full := req.Request(invoker.TurnRequest{})
	if err := e.checkSupported(&full); err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return fail(ctxError(ctx))
	}
	// The Go servers are hosted before the CLI starts, which must be
	// told where they are; a panic of a handler is the caller's, as one
	// of OnEvent is, and a call's context is its turn's. (Calls begin
	// once the CLI runs, when s is set.) A reply in band goes to the CLI
	// on one line: the line limit bounds it, and a longer one fails its
	// call alone.
	tl, breq, err := e.startTools(req, &mcphost.Options{
		OnPanic:     func(p any, goexit bool) { s.r.recordPanic("an MCP tool handler", p, goexit) },
		CallContext: func() context.Context { return s.callContext() },
		MaxReply:    e.cfg.maxLineSize,
	})
	if err != nil {
		return fail(err)
	}
	cmd, err := sb.SessionCommand(&breq)
	if err != nil {
		tl.close()
		if !errors.Is(err, invoker.ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", invoker.ErrInvalidRequest, err)
		}
		return fail(err)
	}
	cmd.Stdin = ""
	path, err := e.lookPath()
	if err != nil {
		tl.close()
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		return fail(err)
	}

	// The protocol judges what the CLI asks with the environment the CLI
	// runs with (a configuration home set in Options.Env), not
	// Request.Env alone.
	preq := breq
	preq.Env = environ(&e.cfg, cmd, breq.Env, "", nil)
	s = &session{
		cli:     e.b.Name(),
		cfg:     &e.cfg,
		e:       e,
		sreq:    req,
		schema:  schema,
		proto:   sb.NewSessionProtocol(&preq),
		tools:   tl,
		ctx:     ctx,
		oneTurn: oneTurn,
		wake:    make(chan struct{}, 1),
		started: make(chan struct{}),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	// The run is the engine's, with its start, streams, ladder and sweep;
	// the session supplies the decoder (the protocol), the writer of
	// standard input and the receiver of events. First-event and idle
	// timeouts apply to each turn (see Turn), not to the process, which
	// waits for its next turn in silence: the run itself has none.
	runCtx, stop := context.WithCancelCause(ctx)
	s.stop = stop
	rcfg := e.cfg
	rcfg.firstEventTimeout, rcfg.idleTimeout = 0, 0
	r := &run{
		cli:       e.b.Name(),
		cfg:       &rcfg,
		ctx:       runCtx,
		workdir:   req.Workdir,
		env:       req.Env,
		cmd:       cmd,
		path:      path,
		start:     time.Now(),
		res:       &invoker.Result{ExitCode: -1},
		dec:       &sessionDecoder{s: s},
		onEvent:   s.dispatch,
		deltas:    req.Deltas,
		input:     s.feed,
		afterLine: s.askPending,
		onSkip:    s.skippedLine,
		tel:       e.cfg.tel.session(ctx, e.b.Name(), &req),
	}
	s.r = r
	lines, ready := s.proto.Open()
	s.write(lines...)
	if ready {
		s.markReady()
	}
	go func() {
		err := r.execute()
		// The tree is gone: end the tool calls it made, and wait for
		// their handlers before the session counts as ended.
		s.tools.close()
		s.calls.Wait()
		if cmd.Cleanup != nil {
			cmd.Cleanup()
		}
		if p := s.stopCause.Load(); p != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
			// The session stopped itself: say why, not that its ladder
			// was started by a cancel; Close's stop of a turn in flight
			// is what the caller asked for.
			err = *p
			if err == errClosedInFlight || err == errClosedPastEOF {
				err = nil
			}
		}
		if err == nil && r.panicked.Load() {
			// A callback of the caller's panicked (re-raised by the
			// turn that waits, if any): the session did not end well.
			err = fmt.Errorf("the CLI was killed because %s", r.panicCause())
		}
		s.err = err
		r.tel.end(r.res, err, r.panicked.Load())
		stop(nil)
		close(s.done)
	}()

	// The tree must have started before the session is handed out (Turn
	// reads what the start established), and the handshake be complete.
	select {
	case <-s.started:
	case <-s.done:
	}
	// The first-event timeout bounds the handshake.
	var timeout <-chan time.Time
	if d := e.cfg.firstEventTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-s.ready:
		select {
		case <-s.done:
		default:
			return s, nil
		}
	case <-s.done:
	case <-ctx.Done():
		<-s.done // the run's context is ctx's child: the ladder is on its way
		return fail(ctxError(ctx))
	case <-timeout:
		err := fmt.Errorf("%w (%v): the CLI did not complete the session's handshake", invoker.ErrFirstEventTimeout, e.cfg.firstEventTimeout)
		s.halt(err)
		<-s.done
		return fail(err)
	}
	if s.err != nil {
		return fail(s.err)
	}
	return fail(fmt.Errorf("%w: the CLI exited before the session was ready (exit status %d): %s",
		invoker.ErrSessionClosed, r.res.ExitCode, jsonl.LastLines(r.res.Stderr, 3, 512)))
}

// halt stops the session's tree with the signal ladder, for why; Err then
// reports why (unless the session's context was done first).
func (s *session) halt(why error) {
	s.stopCause.CompareAndSwap(nil, &why)
	s.stop(why)
}

// sessionsUnsupported is the error for a CLI without a long-lived mode.
func sessionsUnsupported(hint string) error {
	if hint == "" {
		hint = "use Invoke, one process per turn, and resume with Request.SessionID"
	}
	return fmt.Errorf("%w: this CLI has no session mode (Capabilities.Sessions is false): %s", invoker.ErrUnsupported, hint)
}

// sessionDecoder is the run's Decoder for a session: it feeds the lines to
// the protocol, writes the protocol's replies, and marks the end of turns.
// The run calls it under its decoder lock, which also guards every other
// call into the protocol.
type sessionDecoder struct{ s *session }

func (d *sessionDecoder) Decode(line []byte) ([]invoker.Event, error) {
	s := d.s
	// The line belongs to the turn in flight now, if any: its events go
	// to that turn only, however late they are delivered (a handshake's
	// answer must not count as the first event of a turn that started
	// meanwhile).
	s.mu.Lock()
	t := s.cur
	s.mu.Unlock()
	s.lineTurn = t
	st, err := s.proto.Decode(line)
	s.write(st.Write...)
	for _, a := range st.Approvals {
		// Asked once the line's events are delivered (see askPending):
		// the program sees the tool call before the question about it.
		s.pending = append(s.pending, pendingAsk{t, a})
	}
	for _, c := range st.Calls {
		s.deliver(t, c)
	}
	for _, ev := range st.Events {
		if ev.SessionID != "" {
			s.mu.Lock()
			s.id = ev.SessionID
			s.mu.Unlock()
		}
	}
	if st.Ready {
		s.markReady()
	}
	evs := st.Events
	if st.TurnEnded {
		if t != nil && !t.last {
			t.out = s.proto.Outcome(s.r.tail.String())
			t.last = true
			if len(evs) == 0 || evs[len(evs)-1].Kind != invoker.KindDone {
				evs = append(evs, invoker.Event{Kind: invoker.KindDone, Raw: safeRaw(line)})
			}
		}
	}
	return evs, err
}

func (d *sessionDecoder) Stderr(line []byte) error { return d.s.proto.Stderr(line) }

// Outcome of the whole process: a CLI that exits at the end of its input
// (Close), with no turn in flight and nothing stopping it, ended well,
// whatever its status (Claude Code exits 1 there after an interrupted
// turn). An exit at any other time is not, status 0 included (Gemini exits
// 0 on the SIGINT that a fatal error of the protocol brings).
func (d *sessionDecoder) Outcome(exitCode int, stderr string) Outcome {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return Outcome{SessionID: s.id, Success: s.eof && s.cur == nil && s.r.ctx.Err() == nil}
}

// errClosedInFlight is why Close stops a session with a turn in flight,
// and errClosedPastEOF why it stops a CLI that did not exit at the end of
// its input: the caller's own doing, so Err and Close report no error for
// them.
var (
	errClosedInFlight = fmt.Errorf("%w by Close with a turn in flight", invoker.ErrSessionClosed)
	errClosedPastEOF  = fmt.Errorf("%w by Close: the CLI did not exit at the end of its input", invoker.ErrSessionClosed)
)

// dispatch is the run's OnEvent: it hands the events to the turn in
// flight, and ends the turn after its last event. Lines printed between
// turns have no one to go to.
func (s *session) dispatch(ev invoker.Event) {
	t := s.lineTurn
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if t == nil || t != cur {
		return // decoded between turns, or for a turn that has ended
	}
	if ev.Kind != invoker.KindWarning {
		t.firstOnce.Do(func() { close(t.first) })
	}
	if t.req.OnEvent != nil {
		t.req.OnEvent(ev)
	}
	if ev.Kind == invoker.KindDone && t.last {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		close(t.ended)
	}
}

func (s *session) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// write queues lines, each with a newline, for standard input.
func (s *session) write(lines ...[]byte) {
	if len(lines) == 0 {
		return
	}
	s.mu.Lock()
	for _, l := range lines {
		s.queue = append(s.queue, l...)
		s.queue = append(s.queue, '\n')
	}
	s.mu.Unlock()
	s.signal()
}

func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// feed is the run's writer of standard input: it writes what the session
// queues until the session asks for end of file or the CLI exits (the run
// then closes standard input, which ends a blocked write).
func (s *session) feed() {
	r := s.r
	close(s.started)
	for {
		s.mu.Lock()
		buf, eof := s.queue, s.eof
		s.queue = nil
		s.mu.Unlock()
		if len(buf) > 0 {
			if _, err := r.stdin.Write(buf); err != nil {
				r.log.Debug("writing to the session's stdin", "err", err)
			}
			continue
		}
		if eof {
			r.stdin.Close()
			return
		}
		select {
		case <-s.wake:
		case <-r.tree.Exited():
			return
		}
	}
}

// ID returns the session (thread) id the CLI reported, or "" before it
// reported one (Claude Code reports it in the first turn). Pass it as
// Request.SessionID to resume the conversation with Invoke or in another
// session.
func (s *session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Done returns a channel that is closed when the session has ended and its
// process tree is gone and reaped: after Close, the cancellation of the
// context given to OpenSession, the ladder after an ignored interrupt, or
// the CLI's own exit.
func (s *session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, once Done is closed: nil when Close
// ended it, else the cause (the context's error, the CLI's exit status,
// ...). Before Done is closed it returns nil.
func (s *session) Err() error {
	select {
	case <-s.done:
		if s.err == nil {
			return nil
		}
		return &cliError{CLI: s.cli, Err: s.err}
	default:
		return nil
	}
}

// Close ends the session and returns once the CLI and every process it
// started are gone. Between turns it closes the CLI's standard input, the
// end of the conversation for every CLI, and waits the interrupt grace
// (invoker.Options.TurnInterruptGrace) for it to exit; a turn in flight,
// or a CLI that does not exit in time, gets the signal ladder, and the
// turn returns an error matching ErrSessionClosed. Close returns what Err
// returns then: nil when the tree ended either way (whatever the CLI's
// exit status at the end of its input; a CLI that had to be stopped is
// logged), or the reason when the session had already ended for another
// reason. Close may be called more than once, from any goroutine but one:
// not from a TurnRequest.OnEvent callback, which would wait for the tree
// while the tree's output waits for the callback (cancel the turn's
// context there instead).
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		busy := s.cur != nil || s.busy.Load()
		if !busy {
			s.eof = true
		}
		s.mu.Unlock()
		select {
		case <-s.done:
			s.closeErr = s.Err() // ended before: say why
			return
		default:
		}
		if busy {
			s.halt(errClosedInFlight)
		} else {
			s.signal()
			exited := false
			g := s.cfg.turnGrace
			if s.r.cmd.RunsPastEOF {
				g = min(g, time.Second)
			}
			if g > 0 {
				t := time.NewTimer(g)
				select {
				case <-s.done:
					exited = true
				case <-t.C:
				}
				t.Stop()
			}
			// A CLI that does not exit is stopped with the ladder, and
			// Close still returns nil: the session ended as the caller
			// asked, and its tree is gone. Only the log says so, for a
			// CLI expected to exit (one wedged, say).
			if !exited {
				if !s.r.cmd.RunsPastEOF {
					s.r.log.Warn("the CLI did not exit at the end of its input; stopping it with the signal ladder", "grace", g)
				}
				s.halt(errClosedPastEOF)
			}
		}
		<-s.done
		s.closeErr = s.Err() // Close and Err agree
	})
	<-s.done
	return s.closeErr
}

// closedError says why a session can take no more turns.
func (s *session) closedError() error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	switch {
	case closing:
		return fmt.Errorf("%w by Close", invoker.ErrSessionClosed)
	case s.err != nil:
		return fmt.Errorf("%w: %w", invoker.ErrSessionClosed, s.err)
	}
	return fmt.Errorf("%w: the CLI exited (status %d)", invoker.ErrSessionClosed, s.r.res.ExitCode)
}
