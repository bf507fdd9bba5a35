package invoker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of sessions, wrapped so that errors.Is finds them.
var (
	// ErrTurnInProgress is returned at once by Session.Turn when another
	// turn of the same session is running: a session runs one turn at a
	// time, and does not queue them.
	ErrTurnInProgress = errors.New("a turn is already running in this session: wait for it to return, or open another session")

	// ErrSessionClosed is returned by Session.Turn when the session has
	// ended (Close, its context, the CLI's exit, or the ladder after an
	// ignored interrupt), and by a turn that was running when it ended.
	// The error also says why the session ended.
	ErrSessionClosed = errors.New("session closed")

	// ErrInterruptIgnored is returned by a cancelled Session.Turn when the
	// CLI did not end the turn within the interrupt grace after it was
	// asked to in its own protocol. The CLI was then stopped with the
	// signal ladder and the session is closed: the error also matches
	// ErrSessionClosed and the turn context's error.
	ErrInterruptIgnored = errors.New("the CLI did not end the turn within the interrupt grace after its own interrupt request; it was stopped with the signal ladder")
)

// DefaultTurnInterruptGrace is the default of WithTurnInterruptGrace. The
// pinned CLIs end an interrupted turn within 0.3 s on an idle machine,
// tools included, but Gemini took 2.5 s to end a turn whose shell tool it
// was killing on a loaded one (docs/session-protocols.md): past the grace
// the session is lost, so it is generous.
const DefaultTurnInterruptGrace = 5 * time.Second

// WithTurnInterruptGrace sets how long a session's turn waits, after its
// context is done and the CLI was asked to end the turn in its own
// protocol, for the turn to end; a CLI that has not ended it by then is
// stopped with the signal ladder (WithInterruptGrace, WithTerminateGrace)
// and the session is closed. It is also how long Close waits for the CLI
// to exit at the end of its input. The default is
// DefaultTurnInterruptGrace. Zero skips the request: a cancelled turn then
// closes the session with the ladder at once. Invoke does not use it.
func WithTurnInterruptGrace(d time.Duration) Option {
	return func(c *config) { c.turnGrace = max(d, 0) }
}

// A Sessioner is an Invoker that can open sessions: conversations held by
// one warm CLI process, whose turns skip the CLI's start-up and are
// interrupted in the CLI's own protocol. Every Invoker of this module's
// backends is one; OpenSession returns an error matching ErrUnsupported
// when the CLI has no reliable long-lived mode (Capabilities.Sessions is
// false).
type Sessioner interface {
	Invoker

	// OpenSession starts the CLI in its long-lived mode, under the same
	// containment as Invoke, and completes the protocol's handshake. req
	// fixes the session's Workdir, Permission, Model, SessionID (resume),
	// SystemPrompt, Env and ExtraArgs; its Prompt, Images and OnEvent
	// must be empty (they belong to each turn, see TurnRequest).
	// WithFirstEventTimeout, when set, also bounds the handshake.
	//
	// ctx bounds the whole session, not only the opening: when it is
	// cancelled, the CLI's tree is stopped with the signal ladder as
	// Invoke's would be, and the session ends. Otherwise the CLI runs
	// until Close, which the caller must call.
	OpenSession(ctx context.Context, req Request) (*Session, error)
}

// OpenSession opens a session on inv (see Sessioner). An Invoker that
// cannot open sessions gives an error matching ErrUnsupported.
func OpenSession(ctx context.Context, inv Invoker, req Request) (*Session, error) {
	s, ok := inv.(Sessioner)
	if !ok {
		return nil, &Error{CLI: inv.Name(), Err: sessionsUnsupported("")}
	}
	return s.OpenSession(ctx, req)
}

// A TurnRequest is one turn of a session.
type TurnRequest struct {
	// Prompt is the user's message. It must not be empty.
	Prompt string
	// Images are absolute paths of images to attach, for CLIs that take
	// them (see Request.Images).
	Images []string
	// OnEvent, if not nil, is called for every event of the turn, as
	// Request.OnEvent is for a run. A panic in it (or runtime.Goexit)
	// kills the session's tree at once, and is re-raised on the goroutine
	// that called Turn once the tree is reaped.
	OnEvent func(Event)
}

// A Session is one warm CLI process holding a conversation, opened with
// OpenSession. Its turns run one at a time. A Session is safe for
// concurrent use: Close, ID, Done and Err may be called at any time, from
// any goroutine, and a Turn while another is running fails at once with
// ErrTurnInProgress.
//
// The session's processes are held exactly as a run's: when Close
// returns, when the context given to OpenSession is done, when the host
// exits or crashes, the CLI and every process it started are gone (see
// Containment).
type Session struct {
	cli        string
	cfg        *config
	caps       Capabilities
	imagesHint string // what to do instead of TurnRequest.Images, for CLIs without
	proto      SessionProtocol
	r          *run
	stop       context.CancelCauseFunc // starts the signal ladder, with the cause

	busy atomic.Bool // a Turn is running

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
}

// turnState is one turn's link between the reader and Turn.
type turnState struct {
	req       *TurnRequest
	first     chan struct{} // closed at the turn's first event that is not a warning
	firstOnce sync.Once
	ended     chan struct{} // closed after the turn's last event was delivered
	out       Outcome       // set by the reader before ended is closed
	// last is set by the reader when the protocol reported the end of the
	// turn: the next KindDone event delivered is the turn's last.
	last bool
}

// OpenSession implements Sessioner for every backend; backends without a
// long-lived mode refuse with ErrUnsupported.
func (e *engine) OpenSession(ctx context.Context, req Request) (*Session, error) {
	fail := func(err error) (*Session, error) { return nil, &Error{CLI: e.b.Name(), Err: err} }
	sb, ok := e.b.(SessionBackend)
	if !ok || !e.b.Capabilities().Sessions {
		hint := ""
		if h, ok := e.b.(Hinter); ok {
			hint = h.UnsupportedHint("Sessions")
		}
		return fail(sessionsUnsupported(hint))
	}
	switch {
	case req.Prompt != "":
		return fail(invalid("Request.Prompt is set: a session's prompts are sent with Session.Turn; leave it empty"))
	case len(req.Images) > 0:
		return fail(invalid("Request.Images is set: a session's images are sent with Session.Turn; leave it empty"))
	case req.OnEvent != nil:
		return fail(invalid("Request.OnEvent is set: a session's events go to TurnRequest.OnEvent; leave it nil"))
	}
	// validate checks everything a run shares with a session; it insists
	// on a prompt, which a session gets per turn.
	v := req
	v.Prompt = "session"
	if err := validate(&v); err != nil {
		return fail(err)
	}
	if err := checkCapabilities(e.b, &req); err != nil {
		return fail(err)
	}
	cmd, err := sb.SessionCommand(&req)
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return fail(err)
	}
	cmd.Stdin = ""
	path, err := e.lookPath()
	if err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}

	s := &Session{
		cli:        e.b.Name(),
		caps:       e.b.Capabilities(),
		imagesHint: "this CLI takes no images",
		proto:      sb.NewSessionProtocol(&req),
		wake:       make(chan struct{}, 1),
		started:    make(chan struct{}),
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
	}
	if h, ok := e.b.(Hinter); ok && h.UnsupportedHint("Images") != "" {
		s.imagesHint = h.UnsupportedHint("Images")
	}
	// The run is the engine's, with its start, streams, ladder and sweep;
	// the session supplies the decoder (the protocol), the writer of
	// standard input and the delivery of events to the turn in flight.
	// First-event and idle timeouts apply to each turn (see Turn), not to
	// the process, which waits for its next turn in silence.
	scfg := e.cfg
	s.cfg = &scfg
	cfg := e.cfg
	cfg.firstEventTimeout, cfg.idleTimeout = 0, 0
	req.OnEvent = s.dispatch
	runCtx, stop := context.WithCancelCause(ctx)
	s.stop = stop
	r := &run{
		e:     &engine{b: sessionRunBackend{Backend: e.b, dec: &sessionDecoder{s: s}}, cfg: cfg},
		ctx:   runCtx,
		req:   &req,
		cmd:   cmd,
		path:  path,
		start: time.Now(),
		res:   &Result{ExitCode: -1},
	}
	r.feed = s.feed
	s.r = r
	lines, ready := s.proto.Open()
	s.write(lines...)
	if ready {
		s.markReady()
	}
	go func() {
		s.err = r.execute()
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
		err := fmt.Errorf("%w (%v): the CLI did not complete the session's handshake", ErrFirstEventTimeout, e.cfg.firstEventTimeout)
		stop(err)
		<-s.done
		return fail(err)
	}
	if s.err != nil {
		return fail(s.err)
	}
	return fail(fmt.Errorf("%w: the CLI exited before the session was ready (exit status %d): %s",
		ErrSessionClosed, r.res.ExitCode, lastLines(r.res.Stderr, 3, 512)))
}

// sessionsUnsupported is the error for a CLI without a long-lived mode.
func sessionsUnsupported(hint string) error {
	if hint == "" {
		hint = "use Invoke, one process per turn, and resume with Request.SessionID"
	}
	return fmt.Errorf("%w: this CLI has no session mode (Capabilities.Sessions is false): %s", ErrUnsupported, hint)
}

// sessionRunBackend hands the run the session's decoder.
type sessionRunBackend struct {
	Backend
	dec Decoder
}

func (b sessionRunBackend) NewDecoder(*Request) Decoder { return b.dec }

// sessionDecoder is the run's Decoder for a session: it feeds the lines to
// the protocol, writes the protocol's replies, and marks the end of turns.
// The run calls it under its decoder lock, which also guards every other
// call into the protocol.
type sessionDecoder struct{ s *Session }

func (d *sessionDecoder) Decode(line []byte) ([]Event, error) {
	s := d.s
	st, err := s.proto.Decode(line)
	s.write(st.Write...)
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
		s.mu.Lock()
		t := s.cur
		s.mu.Unlock()
		if t != nil && !t.last {
			t.out = s.proto.Outcome(s.r.tail.String())
			t.last = true
			if len(evs) == 0 || evs[len(evs)-1].Kind != KindDone {
				evs = append(evs, Event{Kind: KindDone, Raw: safeRaw(line)})
			}
		}
	}
	return evs, err
}

func (d *sessionDecoder) Stderr(line []byte) error { return d.s.proto.Stderr(line) }

// Outcome of the whole process: a CLI that exits 0 at the end of its input
// (Close), with no turn in flight and nothing stopping it, ended well. An
// exit 0 at any other time is not (Gemini exits 0 on the SIGINT that a
// fatal error of the protocol brings).
func (d *sessionDecoder) Outcome(exitCode int, stderr string) Outcome {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return Outcome{SessionID: s.id, Success: exitCode == 0 && s.eof && s.cur == nil && s.r.ctx.Err() == nil}
}

// dispatch is the run's OnEvent: it hands the events to the turn in
// flight, and ends the turn after its last event. Lines printed between
// turns have no one to go to.
func (s *Session) dispatch(ev Event) {
	s.mu.Lock()
	t := s.cur
	s.mu.Unlock()
	if t == nil {
		return
	}
	if ev.Kind != KindWarning {
		t.firstOnce.Do(func() { close(t.first) })
	}
	if t.req.OnEvent != nil {
		t.req.OnEvent(ev)
	}
	if ev.Kind == KindDone && t.last {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		close(t.ended)
	}
}

func (s *Session) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// write queues lines, each with a newline, for standard input.
func (s *Session) write(lines ...[]byte) {
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

func (s *Session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// feed is the run's writer of standard input: it writes what the session
// queues until the session asks for end of file or the CLI exits (the run
// then closes standard input, which ends a blocked write).
func (s *Session) feed() {
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
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Done returns a channel that is closed when the session has ended and its
// process tree is gone and reaped: after Close, the cancellation of the
// context given to OpenSession, the ladder after an ignored interrupt, or
// the CLI's own exit.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, once Done is closed: nil when it was
// closed and the CLI exited by itself at the end of its input, else the
// cause (the context's error, the CLI's exit status, ...). Before Done is
// closed it returns nil.
func (s *Session) Err() error {
	select {
	case <-s.done:
		if s.err == nil {
			return nil
		}
		return &Error{CLI: s.cli, Err: s.err}
	default:
		return nil
	}
}

// Close ends the session and returns once the CLI and every process it
// started are gone. Between turns it closes the CLI's standard input, the
// end of the conversation for every CLI, and waits the interrupt grace
// (WithTurnInterruptGrace) for it to exit; a turn in flight, or a CLI that
// does not exit in time, gets the signal ladder at once, and the turn
// returns an error matching ErrSessionClosed. Close returns nil when the
// tree ended that way; when the session had already ended for another
// reason, it returns that reason (as Err). Close may be called more than
// once, from any goroutine but one: not from a TurnRequest.OnEvent
// callback, which would wait for the tree while the tree's output waits
// for the callback (cancel the turn's context there instead).
func (s *Session) Close() error {
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
			s.stop(errors.New("session closed with a turn in flight"))
		} else {
			s.signal()
			exited := false
			if g := s.cfg.turnGrace; g > 0 {
				t := time.NewTimer(g)
				select {
				case <-s.done:
					exited = true
				case <-t.C:
				}
				t.Stop()
			}
			if !exited {
				s.stop(fmt.Errorf("the CLI did not exit within %v of the end of its input", s.cfg.turnGrace))
			}
		}
		<-s.done
	})
	<-s.done
	return s.closeErr
}

// closedError says why a session can take no more turns.
func (s *Session) closedError() error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	switch {
	case closing:
		return fmt.Errorf("%w by Close", ErrSessionClosed)
	case s.err != nil:
		return fmt.Errorf("%w: %w", ErrSessionClosed, s.err)
	}
	return fmt.Errorf("%w: the CLI exited (status %d)", ErrSessionClosed, s.r.res.ExitCode)
}

// Turn sends t's prompt and returns when the turn has ended, with the
// same Result and events as Invoke gives for one run. The session stays
// open after a turn that failed in the CLI's own terms (a model error, an
// interrupted turn).
//
// When ctx is cancelled or its deadline passes, Turn asks the CLI to end
// the turn in its own protocol (Claude Code's interrupt request, Codex's
// turn/interrupt, ACP's session/cancel) and waits the turn interrupt
// grace (WithTurnInterruptGrace) for the turn to end. The CLI then records the
// interrupted turn, the session stays usable, and the error matches
// ctx.Err(). A CLI that does not end the turn in time is stopped with the
// signal ladder and the session is closed: the error then also matches
// ErrInterruptIgnored and ErrSessionClosed. A zero turn interrupt grace
// skips the request and goes to the ladder at once.
//
// WithFirstEventTimeout and WithIdleTimeout apply to each turn, counted
// from its start: when one fires, the turn is interrupted as for a
// cancelled ctx, and the error matches ErrFirstEventTimeout or
// ErrIdleTimeout instead of ctx.Err(). Between turns the CLI may be
// silent for any time.
//
// Result.ExitCode is 0 for a turn that ended while the CLI runs on, else
// the CLI's exit status (-1 when killed by a signal). Result.Stderr is the
// tail of the session's standard error; Result.Duration is the turn's.
func (s *Session) Turn(ctx context.Context, t TurnRequest) (*Result, error) {
	start := time.Now()
	res := &Result{ExitCode: -1, Containment: s.r.res.Containment}
	fail := func(err error) (*Result, error) {
		res.Duration = time.Since(start)
		res.SessionID = s.ID()
		return res, &Error{CLI: s.cli, Err: err}
	}
	if !s.busy.CompareAndSwap(false, true) {
		return fail(ErrTurnInProgress)
	}
	defer s.busy.Store(false)
	if strings.TrimSpace(t.Prompt) == "" {
		return fail(invalid("empty prompt: set TurnRequest.Prompt"))
	}
	if len(t.Images) > 0 && !s.caps.Images {
		return fail(fmt.Errorf("%w: %w: TurnRequest.Images: %s", ErrInvalidRequest, ErrUnsupported, s.imagesHint))
	}
	if err := validateImages(&Request{Images: t.Images}); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	select {
	case <-s.done:
		return fail(s.closedError())
	default:
		if closing {
			return fail(s.closedError())
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}

	ts := &turnState{req: &t, first: make(chan struct{}), ended: make(chan struct{})}
	r := s.r
	r.decMu.Lock()
	lines, err := func() (lines [][]byte, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the session protocol failed to start a turn: %v", p)
			}
		}()
		return s.proto.StartTurn(&t)
	}()
	if err == nil {
		s.mu.Lock()
		s.cur = ts
		s.mu.Unlock()
	}
	r.decMu.Unlock()
	if err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			err = fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return fail(err)
	}
	defer func() {
		s.mu.Lock()
		if s.cur == ts {
			s.cur = nil
		}
		s.mu.Unlock()
	}()
	s.write(lines...)

	return s.await(ctx, ts, res, start)
}

// await waits for the end of the turn ts, interrupting it when ctx is done
// or a timeout fires, and fills res.
func (s *Session) await(ctx context.Context, ts *turnState, res *Result, start time.Time) (*Result, error) {
	r := s.r
	fail := func(err error) (*Result, error) {
		res.Duration = time.Since(start)
		res.SessionID = s.ID()
		return res, &Error{CLI: s.cli, Err: err}
	}
	ctxDone := ctx.Done()
	timers := newTurnTimers(s.cfg, r)
	defer timers.stop()
	first := ts.first
	var grace *time.Timer
	var graceC <-chan time.Time
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	// cause is why the turn is being interrupted (the context's error or
	// a timeout), nil while it is not; ignored is set when the CLI let
	// the grace pass.
	var cause error
	ignored := false
	// gone returns once the session has ended, after its tree is reaped,
	// with the turn's partial result. err is what the CLI said about the
	// turn, if it ended it.
	gone := func(err error) (*Result, error) {
		<-s.done
		if r.panicked.Load() {
			if r.goexit {
				runtime.Goexit()
			}
			panic(r.panicVal)
		}
		res.ExitCode = r.res.ExitCode
		res.Stderr = r.res.Stderr
		if out := s.turnOutcome(); out.Text != "" {
			res.Text = out.Text
		}
		closed := s.closedError()
		switch {
		case ignored:
			closed = fmt.Errorf("%w (%v): %w: %w", ErrInterruptIgnored, s.cfg.turnGrace, ErrSessionClosed, cause)
		case cause != nil:
			closed = fmt.Errorf("%w: %w", closed, cause)
		}
		if err != nil {
			closed = fmt.Errorf("%w; the turn ended with: %w", closed, err)
		}
		return fail(closed)
	}
	ended := func() (*Result, error) {
		out := ts.out
		if !out.Success && r.ctx.Err() != nil {
			// The CLI ended the turn because the session is being
			// stopped (Close, the session's context, the ladder after
			// an ignored interrupt): say so, once the tree is gone.
			return gone(out.Err)
		}
		res.ExitCode = 0
		res.SessionID, res.Text, res.Usage = out.SessionID, out.Text, out.Usage
		if res.SessionID == "" {
			res.SessionID = s.ID()
		}
		res.Stderr = r.tail.String()
		res.Duration = time.Since(start)
		switch {
		case out.Success:
			// Finished before the interrupt took effect: nothing
			// of the turn is lost.
			return res, nil
		case cause != nil:
			return res, &Error{CLI: s.cli, Err: cause}
		case out.Err != nil:
			return res, &Error{CLI: s.cli, Err: out.Err}
		}
		return res, &Error{CLI: s.cli, Err: ErrNoResult}
	}
	// interrupt asks the CLI to end the turn, once, for why.
	interrupt := func(why error) {
		if cause != nil {
			return
		}
		cause = why
		timers.stop()
		g := s.cfg.turnGrace
		if g == 0 {
			ignored = true
			s.stop(ErrInterruptIgnored)
			return
		}
		r.decMu.Lock()
		lines := func() (lines [][]byte) {
			defer func() { recover() }()
			return s.proto.Interrupt()
		}()
		r.decMu.Unlock()
		r.log.Debug("interrupting the turn in the CLI's protocol", "reason", why, "grace", g)
		s.write(lines...)
		grace = time.NewTimer(g)
		graceC = grace.C
	}
	for {
		select {
		case <-ts.ended:
			return ended()

		case <-s.done:
			select {
			case <-ts.ended:
				return ended() // the turn was complete before the CLI exited
			default:
			}
			return gone(nil)

		case <-ctxDone:
			ctxDone = nil
			interrupt(ctxError(ctx))

		case <-first:
			first = nil
			timers.firstEvent()

		case <-timers.firstC:
			timers.firstC = nil
			select {
			case <-ts.first: // it came in time after all
			default:
				interrupt(fmt.Errorf("%w (%v)", ErrFirstEventTimeout, s.cfg.firstEventTimeout))
			}

		case <-timers.idleC:
			if timers.idleDue() {
				interrupt(fmt.Errorf("%w (%v)", ErrIdleTimeout, s.cfg.idleTimeout))
			}

		case <-graceC:
			graceC = nil
			ignored = true
			r.log.Debug("the CLI ignored the interrupt; stopping the session", "grace", s.cfg.turnGrace)
			s.stop(ErrInterruptIgnored)
		}
	}
}

// turnTimers are a turn's first-event and idle timeouts.
type turnTimers struct {
	r             *run
	idle          time.Duration
	first, idleT  *time.Timer
	firstC, idleC <-chan time.Time
}

func newTurnTimers(cfg *config, r *run) *turnTimers {
	t := &turnTimers{r: r, idle: cfg.idleTimeout}
	if d := cfg.firstEventTimeout; d > 0 {
		t.first = time.NewTimer(d)
		t.firstC = t.first.C
	}
	if t.idle > 0 {
		t.idleT = time.NewTimer(t.idle)
		t.idleC = t.idleT.C
	}
	return t
}

// firstEvent stops the first-event timeout: the turn's first event came.
func (t *turnTimers) firstEvent() {
	if t.first != nil {
		t.first.Stop()
		t.firstC = nil
	}
}

// idleDue reports whether the CLI has been silent for the idle timeout,
// and if not, sets the timer for the rest of it.
func (t *turnTimers) idleDue() bool {
	quiet := t.r.quiet()
	if quiet >= t.idle {
		t.idleC = nil
		return true
	}
	t.idleT.Reset(t.idle - quiet)
	return false
}

func (t *turnTimers) stop() {
	for _, tm := range []*time.Timer{t.first, t.idleT} {
		if tm != nil {
			tm.Stop()
		}
	}
	t.firstC, t.idleC = nil, nil
}

// turnOutcome asks the protocol what a turn cut short by the end of the
// session established (partial text, session id).
func (s *Session) turnOutcome() (out Outcome) {
	s.r.decMu.Lock()
	defer s.r.decMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{}
		}
	}()
	return s.proto.Outcome(s.r.tail.String())
}
