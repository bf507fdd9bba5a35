package mcpadapter

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// DefaultWarmIdleTimeout is how long a warm session waits for its next
// call before it is closed, when WarmSessions.IdleTimeout is zero.
const DefaultWarmIdleTimeout = 5 * time.Minute

// WarmSessions keeps conversations warm between calls (Options.WarmSessions):
// the CLI of a call of the single-run tool stays running after the call,
// held as an [invoker.Session], and the next call that passes its
// session_id is a turn of that session instead of a new process resuming
// the conversation. Such a call skips the CLI's start-up (the real CLIs'
// cold first event in BENCHMARKS.md), and a client's cancel of it is sent to
// the CLI in its own protocol (an interrupt request), which ends the turn
// the way the CLI's own clients do and keeps the session for the next
// call; only a CLI that ignores the request gets the signal ladder.
//
// The price is memory: a warm session holds its CLI's whole process tree
// while it waits (hundreds of MiB for the real CLIs: warm-rss-MiB in
// BENCHMARKS.md, rendered into docs/sessions.md). MaxSessions bounds how many
// are held (the least recently used idle one is closed to make room), and
// IdleTimeout how long one waits for its next call.
//
// Which calls run warm:
//
//   - Calls of the single-run tool of a CLI whose invoker declares
//     Capabilities.Sessions, without output_schema, max_turns or
//     max_budget_usd (limits that a session cannot apply per turn; note
//     that Options.MaxTurns and Options.MaxBudgetUSD give every call of
//     the CLIs that take them a limit). The parallel tool never runs warm.
//   - A call without session_id opens a session; once its first turn ends
//     the session is kept under the session id it reported. A call with
//     the session_id of a warm session runs a turn in it. A call with a
//     session_id that is not warm opens a session that resumes it, where
//     the CLI can (Claude Code, Codex); Gemini CLI cannot resume in a
//     session, and such a call runs as a cold run, as do calls that find
//     every warm session busy and MaxSessions reached, and calls whose
//     session fails to open.
//   - A warm session is used only by a call with the same workdir,
//     permission, model, system prompt and identity (see [HTTPAccess]) as
//     the call that opened it;
//     another call continuing the conversation closes it and opens one
//     with its own.
//   - A session answers one call at a time: a call whose session is
//     answering another is refused at once (nothing is queued). A cold
//     run (the parallel tool, or a call that does not run warm) of a
//     warm session's conversation closes the session first, and while it
//     runs no call opens a warm session of that conversation (such a call
//     is refused as busy), so that one conversation never has two
//     processes, one of them warm.
//   - A warm session whose CLI died is dropped; the call runs in a new
//     one. A turn whose CLI dies mid-turn fails, as a run would, and the
//     session is dropped.
//
// A turn counts towards Options.MaxConcurrent as a run does; an idle warm
// session does not (MaxSessions bounds those). Each turn writes the same
// transcript lines as a run. [Tools.Shutdown] closes every warm session
// (its CLI stopped with the ladder the invoker's StopGraces gives
// ErrShuttingDown, as a run's would be) and, like [Tools.Wait], waits
// until they are reaped. Without a Shutdown, warm sessions end only when
// idle for IdleTimeout, or with the host (the containment of a run holds
// for them).
type WarmSessions struct {
	// MaxSessions is the most sessions held warm at once, across the
	// CLIs of one Register call, busy or idle. Zero (the default) keeps
	// none: every call starts its CLI and the call's end stops it.
	MaxSessions int

	// IdleTimeout is how long a warm session waits for its next call
	// before it is closed. If zero, DefaultWarmIdleTimeout is used.
	IdleTimeout time.Duration
}

func (w *WarmSessions) check() error {
	switch {
	case w.MaxSessions < 0:
		return fmt.Errorf("MaxSessions is %d: give a positive number of sessions, or 0 to keep none", w.MaxSessions)
	case w.IdleTimeout < 0:
		return fmt.Errorf("IdleTimeout is %v: give a positive duration, or 0 for %v", w.IdleTimeout, DefaultWarmIdleTimeout)
	case w.IdleTimeout == 0:
		w.IdleTimeout = DefaultWarmIdleTimeout
	}
	return nil
}

// A warmPool holds the warm sessions of one Register call.
type warmPool struct {
	cfg   *config
	calls *callSet // counts the sessions alive, for Tools.Wait

	mu     sync.Mutex
	byKey  map[warmKey]*warmSession // the sessions whose id is known
	lru    list.List                // every session held, least recently used first
	closed bool                     // the server is shutting down
	// noResume holds the CLIs that refused to resume a conversation in a
	// session (Gemini CLI): their calls resuming one that is not warm run
	// cold without trying, and without evicting a warm session first.
	noResume map[string]bool
	// cold counts the cold runs in flight of each conversation.
	cold map[warmKey]int
}

// warmKey names a conversation: a CLI and its session id.
type warmKey struct{ cli, id string }

// warmParams are what a session fixes for all its turns.
type warmParams struct {
	workdir    string
	permission invoker.Permission
	model      string
	system     string
	identity   string // of the call: one client's turn never runs in another's process
}

func paramsOf(req *invoker.Request) warmParams {
	return warmParams{workdir: req.Workdir, permission: req.Permission, model: req.Model, system: req.SystemPrompt}
}

// A warmSession is one session of the pool. Its fields are guarded by the
// pool's lock, except s, set before the session is first released.
type warmSession struct {
	key     warmKey // id "" until the CLI reported it
	params  warmParams
	s       invoker.Session // nil while the session opens
	busy    bool            // a call has it
	gone    bool            // removed from the pool; whoever removed it closes it
	elem    *list.Element
	reaper  *time.Timer // while idle
	idleGen uint64      // counts the releases, so that a stale reaper does nothing
	cancel  context.CancelFunc
	release func() // ends the session's count in Tools.Wait

	// The Approve callback of the session dispatches to the one of the
	// call whose turn runs (approve, nil when that call's questions are
	// allowed without asking); inTurn says whether one runs. Guarded by
	// amu, not the pool's lock: the callback runs during a turn.
	amu     sync.Mutex
	inTurn  bool
	approve func(context.Context, invoker.Approval) invoker.Decision
}

// setTurn makes approve the Approve callback of the turn that starts, or
// with on false, ends the turn.
func (w *warmSession) setTurn(on bool, approve func(context.Context, invoker.Approval) invoker.Decision) {
	w.amu.Lock()
	w.inTurn, w.approve = on, approve
	w.amu.Unlock()
}

// dispatchApprove is the Approve callback of the session: it hands the
// question to the call whose turn runs.
func (w *warmSession) dispatchApprove(ctx context.Context, a invoker.Approval) invoker.Decision {
	w.amu.Lock()
	inTurn, approve := w.inTurn, w.approve
	w.amu.Unlock()
	switch {
	case !inTurn:
		return invoker.Decision{Message: "denied: no call of the MCP server is in progress"}
	case approve == nil:
		return invoker.Decision{Allow: true}
	}
	return approve(ctx, a)
}

// newWarmPool returns the pool of sh, or nil when warm sessions are off.
func newWarmPool(sh *shared) *warmPool {
	if sh.cfg.warm.MaxSessions <= 0 {
		return nil
	}
	p := &warmPool{cfg: sh.cfg, calls: sh.calls, byKey: map[warmKey]*warmSession{}, noResume: map[string]bool{}, cold: map[warmKey]int{}}
	// AfterFunc starts no goroutine until Shutdown is called.
	context.AfterFunc(sh.life, p.shutdown)
	return p
}

// errWarmBusy refuses a call whose session is answering another call.
func errWarmBusy(id string) error {
	return refusef("session %s is answering another call of this server, and a session answers one call at a time: wait for that call to return (or cancel it), then call again", id)
}

// warmable reports whether a call of req may run in a warm session: the
// invoker's CLI can hold sessions, and the call sets no per-call limit
// and forks nothing (a fork is a new conversation from a copy: the warm
// session of the original would go on with the original instead).
func (t *tool) warmable(req *invoker.Request) bool {
	caps := t.inv.Capabilities()
	return caps.Sessions && len(req.OutputSchema) == 0 && req.MaxTurns == 0 && req.MaxBudgetUSD == 0 && !req.Fork
}

// call runs req: a turn of a warm session when the call may run warm,
// else a run of the invoker. single is false for the tasks of a parallel
// call.
func (t *tool) call(ctx context.Context, req invoker.Request, single bool) (*invoker.Result, error) {
	p := t.warm
	if p == nil {
		return t.invoke(ctx, req)
	}
	if single && t.warmable(&req) {
		w, err := p.acquire(t.name, identityFrom(ctx), &req)
		if err != nil {
			return nil, err
		}
		if w != nil {
			if res, ran, err := t.turn(ctx, w, req); ran {
				return res, err
			}
		}
	}
	end, err := p.coldRun(t.name, req.SessionID)
	if err != nil {
		return nil, err
	}
	defer end()
	return t.invoke(ctx, req)
}

// turn runs req as a turn of w, opening its session first if needed. ran
// is false when the session could not be opened for a reason other than
// the call's context: the call then runs cold.
func (t *tool) turn(ctx context.Context, w *warmSession, req invoker.Request) (res *invoker.Result, ran bool, err error) {
	p := t.warm
	defer func() {
		if v := recover(); v != nil { // a bug of this package, or of the invoker
			t.cfg.log.Error("warm session panicked", "cli", t.name, "panic", v, "stack", string(debug.Stack()))
			p.put(w, "internal error")
			res, ran, err = nil, true, fmt.Errorf("internal error: the %s session panicked: %v", t.name, v)
		}
	}()
	if w.s == nil {
		s, cancel, err := t.open(ctx, req, w)
		if err != nil {
			p.put(w, "not opened")
			if req.SessionID != "" && errors.Is(err, invoker.ErrUnsupported) {
				p.mu.Lock()
				p.noResume[t.name] = true
				p.mu.Unlock()
			}
			if ctx.Err() != nil {
				return nil, true, fmt.Errorf("not started: %w", err)
			}
			t.cfg.log.Warn("warm session not opened, running cold", "cli", t.name, "resume", req.SessionID, "error", err)
			return nil, false, nil
		}
		w.s, w.cancel = s, cancel
		t.cfg.log.Info("warm session opened", "cli", t.name, "resume", req.SessionID)
	}
	onEvent := req.OnEvent
	w.setTurn(true, req.Approve)
	res, err = w.s.Turn(ctx, invoker.TurnRequest{Prompt: req.Prompt, Images: req.Images, OnEvent: func(ev invoker.Event) {
		if ev.Kind == invoker.KindSession && ev.SessionID != "" {
			p.name(w, ev.SessionID)
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}})
	w.setTurn(false, nil) // before put, which may give w to another call
	p.put(w, "")
	return res, true, err
}

// open opens the session of w for req. Its context lasts until
// Tools.Shutdown, not the call's, which may end first only while the
// session opens. When the server has an approval policy (Options.Approve,
// or Options.Approvals other than ApprovalsAllow), a CLI that takes an
// approval callback gets w's, which asks as each turn's call says: the
// calls that continue the conversation may come from other clients. The
// session's MCP servers are req's, which are the server's for every call.
func (t *tool) open(ctx context.Context, req invoker.Request, w *warmSession) (invoker.Session, context.CancelFunc, error) {
	sctx, cancel := t.bind(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	sreq := req.Session()
	sreq.Approve = nil
	if (t.cfg.approvals != ApprovalsAllow || t.cfg.approve != nil) && t.inv.Capabilities().Approve {
		sreq.Approve = w.dispatchApprove
	}
	s, err := t.inv.OpenSession(sctx, sreq)
	if !stop() { // the call's context ended: the session is being stopped
		if s != nil {
			s.Close()
		}
		cancel()
		if err == nil {
			err = context.Cause(ctx)
		}
		return nil, nil, err
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return s, cancel, nil
}

// acquire gives a call of cli by identity for req the session it is to
// use: a warm one to run a turn in, a new one to open (w.s is nil), or
// none (nil) when the call is to run cold. Its error refuses the call.
func (p *warmPool) acquire(cli, identity string, req *invoker.Request) (*warmSession, error) {
	key := warmKey{cli, req.SessionID}
	params := paramsOf(req)
	params.identity = identity
	var stale []*warmSession
	defer func() {
		// Closed before the call goes on: the memory is freed before a new
		// session takes it, and a conversation is saved before it resumes.
		for _, w := range stale {
			p.close(w)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil
	}
	if p.cold[key] > 0 && key.id != "" {
		return nil, errWarmBusy(key.id)
	}
	if w := p.byKey[key]; key.id != "" && w != nil {
		switch {
		case w.busy:
			return nil, errWarmBusy(key.id)
		case w.s != nil && isDone(w.s):
			p.removeLocked(w, "its CLI exited")
			stale = append(stale, w)
		case w.params != params:
			p.removeLocked(w, "the call's workdir, permission, model, system prompt or identity differ")
			stale = append(stale, w)
		default:
			p.checkoutLocked(w)
			return w, nil
		}
	}
	if key.id != "" && p.noResume[cli] {
		return nil, nil
	}
	if p.lru.Len() >= p.cfg.warm.MaxSessions {
		var victim *warmSession
		for e := p.lru.Front(); e != nil; e = e.Next() {
			if w := e.Value.(*warmSession); !w.busy {
				victim = w
				break
			}
		}
		if victim == nil {
			return nil, nil // every warm session is answering a call
		}
		p.removeLocked(victim, "evicted: MaxSessions reached")
		stale = append(stale, victim)
	}
	w := &warmSession{params: params, busy: true, release: p.calls.hold()}
	w.elem = p.lru.PushBack(w)
	if key.id != "" {
		w.key = key // reserved: a concurrent call resuming it is refused
		p.byKey[key] = w
	} else {
		w.key.cli = cli
	}
	return w, nil
}

// coldRun prepares a cold run (Invoke) of cli's conversation id: it closes
// the conversation's idle warm session first, and counts the run until
// end is called, so that no call opens a warm session of the conversation
// meanwhile. Its error refuses a call whose session is answering another.
func (p *warmPool) coldRun(cli, id string) (end func(), err error) {
	if id == "" {
		return func() {}, nil
	}
	key := warmKey{cli, id}
	p.mu.Lock()
	w := p.byKey[key]
	if w != nil && w.busy {
		p.mu.Unlock()
		return nil, errWarmBusy(id)
	}
	if w != nil {
		p.removeLocked(w, "a cold run of its conversation")
	}
	p.cold[key]++
	p.mu.Unlock()
	if w != nil {
		p.close(w)
	}
	return func() {
		p.mu.Lock()
		if p.cold[key]--; p.cold[key] == 0 {
			delete(p.cold, key)
		}
		p.mu.Unlock()
	}, nil
}

// name keys w under the session id its CLI reported, as soon as it is
// known, so that a call resuming it meanwhile is refused as busy rather
// than opening a second process of the conversation.
func (p *warmPool) name(w *warmSession, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.gone || w.key.id == id {
		return
	}
	key := warmKey{w.key.cli, id}
	if other := p.byKey[key]; other != nil && other != w {
		return // kept by the other; w is closed when its call ends
	}
	if w.key.id != "" && p.byKey[w.key] == w {
		delete(p.byKey, w.key)
	}
	w.key = key
	p.byKey[key] = w
}

// put ends a call's use of w: w goes back to the pool, idle, when its
// session is alive, has an id and the server is not shutting down, and
// is closed otherwise (why, if not empty, says why).
func (p *warmPool) put(w *warmSession, why string) {
	p.mu.Lock()
	switch {
	case w.gone:
		p.mu.Unlock()
		p.close(w)
		return
	case why != "":
	case p.closed:
		why = "the server is shutting down"
	case w.s == nil:
		why = "not opened"
	case isDone(w.s):
		why = "its CLI exited"
	case w.key.id == "" || p.byKey[w.key] != w:
		if id := w.s.ID(); id == "" {
			why = "no session id"
		} else if other := p.byKey[warmKey{w.key.cli, id}]; other != nil && other != w {
			why = "another warm session holds its id"
		} else {
			w.key.id = id
			p.byKey[w.key] = w
		}
	}
	if why != "" {
		p.removeLocked(w, why)
		p.mu.Unlock()
		p.close(w)
		return
	}
	w.busy = false
	w.idleGen++
	gen := w.idleGen
	w.reaper = time.AfterFunc(p.cfg.warm.IdleTimeout, func() { p.reap(w, gen) })
	p.lru.MoveToBack(w.elem)
	p.mu.Unlock()
}

// reap closes w if it is still idle since release gen.
func (p *warmPool) reap(w *warmSession, gen uint64) {
	p.mu.Lock()
	if w.gone || w.busy || w.idleGen != gen {
		p.mu.Unlock()
		return
	}
	p.removeLocked(w, fmt.Sprintf("idle for %v", p.cfg.warm.IdleTimeout))
	p.mu.Unlock()
	p.close(w)
}

// shutdown closes the idle sessions when Tools.Shutdown is called; the
// busy ones are closed when their calls end (their turns are cancelled
// with ErrShuttingDown).
func (p *warmPool) shutdown() {
	p.mu.Lock()
	p.closed = true
	var idle []*warmSession
	for e := p.lru.Front(); e != nil; e = e.Next() {
		if w := e.Value.(*warmSession); !w.busy {
			idle = append(idle, w)
		}
	}
	for _, w := range idle {
		p.removeLocked(w, "the server is shutting down")
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range idle {
		wg.Go(func() { p.close(w) })
	}
	wg.Wait()
}

// checkoutLocked gives the idle w to a call.
func (p *warmPool) checkoutLocked(w *warmSession) {
	w.busy = true
	if w.reaper != nil {
		w.reaper.Stop() // a reaper already running sees busy, or the new generation
	}
	p.lru.MoveToBack(w.elem)
}

// removeLocked takes w out of the pool; the caller then closes it.
func (p *warmPool) removeLocked(w *warmSession, why string) {
	if w.gone {
		return
	}
	w.gone = true
	if w.reaper != nil {
		w.reaper.Stop()
	}
	if p.byKey[w.key] == w {
		delete(p.byKey, w.key)
	}
	p.lru.Remove(w.elem)
	p.cfg.log.Info("warm session closing", "cli", w.key.cli, "session_id", w.key.id, "why", why)
}

// close ends a removed session and returns once its tree is reaped.
func (p *warmPool) close(w *warmSession) {
	if w.s != nil {
		if err := w.s.Close(); err != nil && !errors.Is(err, context.Canceled) {
			p.cfg.log.Debug("warm session ended", "cli", w.key.cli, "session_id", w.key.id, "error", err)
		}
	}
	if w.cancel != nil {
		w.cancel()
	}
	w.release()
}

func isDone(s invoker.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}
