package driver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
)

// A session is one warm CLI process holding a conversation, whose turns
// are spoken in the CLI's protocol (SessionProtocol). It implements
// invoker.Session. It is its run's conversation (session_lines.go: the
// protocol's lines in and out) and its turns' carrier (session_turn.go);
// the run and the turns see it through those interfaces only, and it sees
// them through their methods.
//
// Locks: protoMu, then mu; never the other way round. A turn's fields are
// guarded by them as marked there.
type session struct {
	// Set by open, read-only after.
	e       *engine
	cli     string
	cfg     *config
	sreq    invoker.SessionRequest
	schema  *jsonschema.Resolved // SessionRequest.OutputSchema, resolved
	proto   SessionProtocol
	r       *run
	cb      *callbacks
	log     *slog.Logger
	tel     *span           // the session's span: the process's start, ladder and sweep
	ctx     context.Context // the context given to OpenSession: the session ends when it is done
	tools   *tools
	oneTurn bool // the session carries one run of Invoke, whose errors read as a one-shot run's
	// runsPastEOF: the CLI may run on at the end of its input
	// (Command.RunsPastEOF).
	runsPastEOF bool
	// betweenTurns is the context of Go tool calls made between turns:
	// ctx's, cancelled when the session is stopped or over.
	betweenTurns context.Context
	endCalls     context.CancelCauseFunc

	// protoMu guards the protocol: every call of its methods, and of the
	// Answer and Cancel of the Approvals and MCPCalls it hands over, is
	// made under it, from one goroutine at a time. It also guards the
	// turns' fields marked protoMu, and orders an approval's answer
	// against the interrupt of its turn.
	protoMu sync.Mutex
	ids     stamper // the stdout reader's

	// mu guards the fields below, and the turns' fields marked mu.
	mu      sync.Mutex
	cur     *turn  // the turn in flight, whose events are being delivered
	id      string // the latest session id seen
	queue   []byte // bytes waiting to be written to standard input
	eof     bool   // close standard input once queue is written
	closing bool   // Close was called

	busy atomic.Bool // a Turn is running
	// netSeen counts the network rules' attempts that turns have
	// reported (Result.Connections), used by the turn in progress.
	netSeen int
	// drop is the sandbox's state across turns (sandbox.go), used by the
	// turn that holds busy.
	drop      levelDrop
	inBand    sync.WaitGroup // the goroutines delivering in-band MCP messages
	reaped    chan struct{}  // closed once the tree is reaped, before ended waits for inBand
	wake      chan struct{}  // something was queued, or eof set
	ready     chan struct{}  // the handshake is complete
	readyOnce sync.Once
	err       error // why the session ended, not yet named; set before the run is over
	closeOnce sync.Once
	closeErr  error
}

// OpenSession implements invoker.Invoker for every backend; backends
// without a long-lived mode refuse with ErrUnsupported.
func (e *engine) OpenSession(ctx context.Context, req invoker.SessionRequest) (invoker.Session, error) {
	if e.sessions == nil {
		return nil, e.named(sessionsUnsupported(e.b.Hint("Sessions")))
	}
	c, err := e.checkConversation(&req)
	if err != nil {
		return nil, e.named(err)
	}
	s, _, err := e.open(ctx, req, c, false, nil)
	if err != nil {
		return nil, e.named(err)
	}
	return s, nil
}

// open opens a session of req, whose check decided c, for OpenSession,
// or, with oneTurn, to carry one run of Invoke, whose KindQueued events go
// to onQueued; it returns how long the session waited for the Budget. When the session's
// tree started but the opening failed, it returns the session too, over,
// whose run holds the CLI's exit status and stderr.
func (e *engine) open(ctx context.Context, req invoker.SessionRequest, c checked, oneTurn bool, onQueued func(invoker.Event)) (*session, time.Duration, error) {
	s := &session{
		e: e, cli: e.b.Name(), cfg: &e.cfg, sreq: req, schema: c.schema, ctx: ctx, oneTurn: oneTurn,
		cb: newCallbacks(), wake: make(chan struct{}, 1), ready: make(chan struct{}), reaped: make(chan struct{}),
	}
	s.betweenTurns, s.endCalls = context.WithCancelCause(ctx)
	cmd, breq, sb, err := s.prepare(c.sandbox)
	if err != nil {
		s.endCalls(err)
		return nil, 0, err
	}
	s.tel = e.cfg.tel.session(ctx, s.cli, &req)
	s.r = e.newRun(runSpec{conv: s, cb: s.cb, tel: s.tel, cmd: cmd, workdir: req.Workdir, env: req.Env, input: true, ctx: ctx,
		turnAfter: oneTurn, limits: e.cfg.limitsFor(req.Limits), sandbox: sb, onQueued: onQueued})
	s.log = e.logger(s.tel)
	// The protocol judges what the CLI asks with the environment the CLI
	// runs with (a configuration home set in Options.Env), not
	// Request.Env alone.
	preq := breq
	preq.Env = environ(&e.cfg, cmd, breq.Env, "", nil)
	preq.MCPServers = withGoServers(breq.MCPServers, req.MCPServers)
	s.proto = e.sessions.NewSessionProtocol(&preq)
	lines, ready := s.opening()
	s.write(lines...)
	if ready {
		s.markReady()
	}
	if err := s.start(ctx); err != nil {
		return nil, s.r.queued, err
	}
	if err := s.handshake(ctx); err != nil {
		return s, s.r.queued, err
	}
	return s, s.r.queued, nil
}

// start starts the session's run (engine.start). On failure, or a panic
// of onQueued while the session waits for the Budget, its Go MCP servers
// are closed and its span ended.
func (s *session) start(ctx context.Context) (err error) {
	started := false
	defer func() {
		if !started {
			s.tools.close()
			s.tel.end(&invoker.Result{ExitCode: -1, Queued: s.r.queued}, err, err == nil)
			s.endCalls(err)
		}
	}()
	if err := s.e.start(ctx, s.r); err != nil {
		return err
	}
	started = true
	return nil
}

// prepare starts hosting the session's Go MCP servers and returns the
// backend's command, the request as the backend sees it (see startTools
// and SandboxNester), and sb, the sandbox its check decided, with the
// MCP servers the CLI must reach. The Go
// servers are hosted before the CLI starts, which must be told where they
// are; a panic of a handler is the caller's, as one of OnEvent is, and a
// call's context is its turn's. A reply in band goes to the CLI on one
// line: the line limit bounds it, and a longer one fails its call alone.
func (s *session) prepare(sb sandboxAsk) (*Command, invoker.SessionRequest, sandboxAsk, error) {
	guard := new(toolsGuard)
	tl, breq, err := s.e.startTools(s.sreq, &mcphost.Options{
		OnPanic:     func(p any, goexit bool) { s.cb.record("an MCP tool handler", p, goexit) },
		CallContext: s.callContext,
		MaxReply:    s.cfg.maxLineSize,
		Admit:       guard.direct,
	})
	if err != nil {
		return nil, breq, sandboxAsk{}, err
	}
	sb.mcp = breq.MCPServers
	if tl.host != nil {
		guard.addr = tl.host.Addr().(*net.TCPAddr).AddrPort()
		sb.tools = guard
	}
	breq.Sandbox = sb.backendSandbox()
	cmd, err := s.e.sessions.SessionCommand(&breq)
	if err != nil {
		tl.close()
		return nil, breq, sb, asInvalid(err)
	}
	cmd.Stdin = ""
	s.tools, s.runsPastEOF = tl, cmd.RunsPastEOF
	return cmd, breq, sb, nil
}

// opening returns the protocol's opening lines, and whether it is ready.
func (s *session) opening() (lines [][]byte, ready bool) {
	defer func() {
		if recover() != nil {
			lines = nil
		}
	}()
	return s.proto.Open()
}

// handshake waits for the protocol's handshake, bounded by the first-event
// timeout, and returns why the session ended instead, if it did.
func (s *session) handshake(ctx context.Context) error {
	var timeout <-chan time.Time
	if d := s.cfg.firstEventTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-s.ready:
		select {
		case <-s.r.over():
		default:
			return nil
		}
	case <-s.r.over():
	case <-ctx.Done():
		<-s.r.over() // the run watches ctx: the ladder is on its way
		return ctxError(ctx)
	case <-timeout:
		err := fmt.Errorf("%w (%v): the CLI did not complete the session's handshake", invoker.ErrFirstEventTimeout, s.cfg.firstEventTimeout)
		s.halt(err)
		<-s.r.over()
		return err
	}
	if s.err != nil {
		return s.err
	}
	return fmt.Errorf("%w: the CLI exited before the session was ready (exit status %d): %s",
		invoker.ErrSessionClosed, s.r.end().state.Code, jsonl.LastLines(s.r.end().stderr, 3, 512))
}

// halt stops the session's tree with the signal ladder, for why, which Err
// then reports (unless the session's context was done first). Graces
// come from Options.StopGraces for why, as for a stop for a context.
func (s *session) halt(why error) {
	s.endCalls(why)
	s.r.stop(why, s.cfg.gracesFor(why))
}

// sessionsUnsupported is the error for a CLI without a long-lived mode.
func sessionsUnsupported(hint string) error {
	if hint == "" {
		hint = "use Invoke, one process per turn, and resume with Request.SessionID"
	}
	return fmt.Errorf("%w: this CLI has no session mode (Capabilities.Sessions is false): %s", invoker.ErrUnsupported, hint)
}

// errClosedInFlight is why Close stops a session with a turn in flight,
// and errClosedPastEOF why it stops a CLI that did not exit at the end of
// its input: the caller's own doing, so Err and Close report no error for
// them.
var (
	errClosedInFlight = fmt.Errorf("%w by Close with a turn in flight", invoker.ErrSessionClosed)
	errClosedPastEOF  = fmt.Errorf("%w by Close: the CLI did not exit at the end of its input", invoker.ErrSessionClosed)
)

// ID implements invoker.Session, whose documentation is the contract:
// the id the stdout reader recorded.
func (s *session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Done implements invoker.Session: the run's over channel, closed once
// the tree is reaped.
func (s *session) Done() <-chan struct{} { return s.r.over() }

// Err implements invoker.Session: the session's recorded end, named by
// its CLI, once the run is over.
func (s *session) Err() error {
	select {
	case <-s.r.over():
		return s.e.named(s.err)
	default:
		return nil
	}
}

// Close implements invoker.Session (its documentation is the contract):
// close, with the error named by the CLI.
func (s *session) Close() error { return s.e.named(s.close()) }

// close is Close, with the error not yet named.
func (s *session) close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		busy := s.cur != nil || s.busy.Load()
		if !busy {
			s.eof = true
		}
		s.mu.Unlock()
		select {
		case <-s.r.over():
			s.closeErr = s.err // ended before: say why
			return
		default:
		}
		if busy {
			s.halt(errClosedInFlight)
		} else {
			s.signal()
			s.awaitEOFExit()
		}
		<-s.r.over()
		s.closeErr = s.err // Close and Err agree
	})
	<-s.r.over()
	if !s.oneTurn {
		// What the run did after its last turn's end, until the CLI
		// exited: no turn is left to carry it (Invoke's session of one
		// turn delivers it once closed). Logged once: it is taken.
		s.r.logWarnings()
	}
	return s.closeErr
}

// awaitEOFExit waits the interrupt grace for the CLI to exit at the end of
// its input (at most a second for one that runs past it), and stops it
// with the ladder if it does not. Close still returns nil then: the
// session ended as the caller asked, and its tree is gone. Only the log
// says so, for a CLI expected to exit (one wedged, say).
func (s *session) awaitEOFExit() {
	g := s.cfg.turnGrace
	if s.runsPastEOF {
		g = min(g, time.Second)
	}
	if g > 0 {
		t := time.NewTimer(g)
		defer t.Stop()
		select {
		case <-s.r.over():
			return
		case <-t.C:
		}
	}
	if !s.runsPastEOF {
		s.log.Warn("the CLI did not exit at the end of its input; stopping it with the signal ladder", "grace", g)
	}
	s.halt(errClosedPastEOF)
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
	return fmt.Errorf("%w: the CLI exited (status %d)", invoker.ErrSessionClosed, s.r.end().state.Code)
}
