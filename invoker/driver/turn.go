package driver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/internal/detach"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// A turn is the engine's one request, as a request is net/http's: one
// prompt, its events, its timeouts and its verdict, whatever carries it.
// Invoke runs a turn on a one-shot run (oneShot: the prompt on standard
// input, the turn's end the CLI's exit) or on a session of one turn (a
// request only the long-lived mode honours); Session.Turn runs one on its
// session. Each takes the same path, run: begin, await the end
// (interrupting the turn when its context is done or a timeout fires),
// the verdict, end, and the re-raise of a panic of the caller's.
//
// The goroutine that called Invoke or Turn runs the turn. The run's stdout
// reader delivers its events (deliver) and ends it; approvals and Go tool
// calls run on goroutines of their own, which end waits for.
type turn struct {
	// Set when the turn is made, read-only after.
	cfg    *config
	on     carrier
	r      *run // the run that carries it; set before run
	cb     *callbacks
	req    invoker.TurnRequest
	deltas bool // deliver KindDelta events (Request.Deltas)
	schema *jsonschema.Resolved
	start  time.Time
	res    *invoker.Result
	// ctx is the turn's context for Approve and Go tool calls, set by a
	// session's begin: it has the values and deadline of the context Turn
	// was given, and is done once the turn is interrupted (for that
	// context, a timeout or Close) and when Turn returns. It is not done
	// by the caller's context directly: a callback that returns because
	// it was cancelled must find the CLI already asked to end the turn,
	// or its answer could complete the turn as if nothing was cancelled.
	// (A detach.Context: its Err says DeadlineExceeded once the deadline
	// has passed, although the engine, not the deadline, cancels it.)
	ctx *detach.Context
	// caller is the context Turn was given: once it is done, the turn is
	// about to be interrupted for it (await does), and a decision made
	// meanwhile is left to the interrupt's withdrawal (see askApprove).
	caller context.Context

	first     chan struct{} // closed at the turn's first event that is not a warning
	firstOnce sync.Once
	ended     <-chan struct{} // closed when the turn has ended in its carrier's terms; out is set before
	out       Outcome
	approving atomic.Int32 // Approve callbacks deciding: the CLI waits for them, and the timeouts do not count it

	// Only the goroutine that runs the turn (run) uses these.
	cause   error // why the turn was interrupted (its context, a timeout); nil while it is not
	ignored bool  // the CLI let the turn interrupt grace pass
	gone    bool  // the run ended before the turn did

	// A session's turn: its questions (approvals.go), its sweep and what
	// its protocol said, guarded by the session's locks as marked.
	calls       sync.WaitGroup         // the goroutines of its approvals, which end waits for
	waiting     int                    // questions waiting for Approve (mu)
	over        bool                   // the turn is ending: no approval may start (mu)
	skipped     int                    // stdout lines skipped over the line limit (mu)
	skippedMax  int64                  // bytes in the longest of them (mu)
	questions   map[*question]struct{} // not yet answered or withdrawn (protoMu)
	interrupted bool                   // the CLI was asked to end the turn (protoMu)
	last        bool                   // the protocol reported the turn's end: its next KindDone is its last event from the CLI (protoMu)
	end         chan struct{}          // ended: the session closes it after the turn's last event
	base        proc.Baseline          // the tree's members before the turn, for its sweep
	baseOK      bool                   // base was taken (the tree was not reaped)
	mark        proc.Mark              // the start of the turn's accounting (a session's; a one-shot turn's is the run's)
}

// A carrier is what a turn runs on, and all the turn knows of it besides
// its run: a one-shot run (oneShot), whose turn ends with the CLI's exit,
// or a session, whose turns end in its protocol.
type carrier interface {
	// begin starts the turn: a session sends its prompt in the protocol
	// (a one-shot run has sent it on standard input already). ctx is the
	// turn's.
	begin(t *turn, ctx context.Context) error
	// interrupt asks the CLI to end the turn, for why, and returns how
	// long it has to (0 for no wait): a session asks in its protocol, a
	// one-shot run is stopped with the ladder and the graces g.
	interrupt(t *turn, why error, g graces) time.Duration
	// escalate stops the CLI that let the grace interrupt gave pass.
	escalate(t *turn, why error)
	// verdict fills t.res and returns the turn's error, once the turn has
	// ended (t.ended) or its run is over (t.gone).
	verdict(t *turn) error
	// end ends the turn after its verdict: its approvals answered or
	// withdrawn, their callbacks returned.
	end(t *turn)
}

// newTurn returns a turn of req for a run of cfg.
func newTurn(cfg *config, req invoker.TurnRequest, deltas bool, schema *jsonschema.Resolved) *turn {
	return &turn{
		cfg: cfg, req: req, deltas: deltas, schema: schema,
		start: time.Now(), res: &invoker.Result{ExitCode: -1},
		first: make(chan struct{}),
	}
}

// carry sets what carries the turn, before its run can deliver events, and
// the channel closed at the turn's end, by its carrier.
func (t *turn) carry(on carrier, r *run, cb *callbacks, ended <-chan struct{}) {
	t.on, t.r, t.cb, t.ended = on, r, cb, ended
}

// run is the one path of every turn: it begins the turn, waits for its
// end, gives its verdict, ends it, and re-raises a panic of a callback of
// the caller's once the tree it killed is gone. The error is not yet
// named with the CLI.
func (t *turn) run(ctx context.Context) (*invoker.Result, error) {
	if err := t.on.begin(t, ctx); err != nil {
		t.res.Duration = t.elapsed()
		return t.res, err
	}
	t.await(ctx)
	// The turn's events are over: the settings links into hidden paths
	// of a run that gave none, and what the run did after its last event.
	t.deliverOne(t.r.sbx.linkWarnings()...)
	t.deliverLate()
	err := t.on.verdict(t)
	t.cfg.closeGate(err) // rate limited: the backend's next runs wait for the reset
	t.on.end(t)
	if t.cb.failed() {
		<-t.r.over()
		t.cb.reraise()
	}
	t.res.Duration = t.elapsed()
	return t.res, err
}

// elapsed is the turn's Duration: the time since it was made, less the
// wait for the Budget (Result.Queued).
func (t *turn) elapsed() time.Duration { return time.Since(t.start) - t.res.Queued }

// await waits for the end of the turn, or of its run, interrupting the
// turn when ctx is done or a timeout fires, and escalating when the CLI
// lets the interrupt's grace pass.
func (t *turn) await(ctx context.Context) {
	timers := newTurnTimers(t.cfg.firstEventTimeout, t.cfg.idleTimeout, t)
	defer timers.stop()
	ctxDone, first := ctx.Done(), t.first
	var grace *time.Timer
	var graceC <-chan time.Time
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	interrupt := func(why error, g graces) {
		if t.cause != nil {
			return
		}
		t.cause = why
		timers.stop()
		if d := t.on.interrupt(t, why, g); d > 0 {
			grace = time.NewTimer(d)
			graceC = grace.C
		}
	}
	for {
		select {
		case <-t.ended:
			return
		case <-t.r.over():
			select {
			case <-t.ended: // the turn was complete before the run ended
			default:
				t.gone = true
			}
			return
		case <-ctxDone:
			ctxDone = nil
			interrupt(ctxError(ctx), t.cfg.stopGraces(ctx))
		case <-first:
			first = nil
			timers.firstEvent()
		case <-timers.firstC:
			if err := timers.firstDue(t.first); err != nil {
				interrupt(err, t.cfg.graces())
			}
		case <-timers.idleC:
			if err := timers.idleDue(); err != nil {
				interrupt(err, t.cfg.graces())
			}
		case <-graceC:
			graceC = nil
			t.ignored = true
			t.on.escalate(t, t.cause)
		}
	}
}

// deliver hands events of the turn to its OnEvent, in order; the run's
// stdout reader calls it. The first that is not a warning is the turn's
// first event; KindDelta events go only to a turn that asked for them.
// Once a callback of the caller's panicked, nothing more is delivered.
//
// After a tool's result, and before the turn's terminal event, it asks
// the run what its limits did meanwhile (limitWarnings): a tool killed at
// the memory limit or refused a fork is a KindWarning event, and the turn
// goes on. So is a connection the sandbox's network rules refused, a
// settings file of the CLI that the run made or changed
// (settingsWarnings), and a connection to the Go tools' endpoint from a
// process that is not the CLI (toolsGuard).
//
// Before the run's first event goes each settings link of the CLI that
// leads into a hidden path (linkWarnings).
func (t *turn) deliver(events []invoker.Event) {
	t.deliverOne(t.r.sbx.linkWarnings()...)
	for _, ev := range events {
		if ev.Kind == invoker.KindDone {
			t.deliverOne(t.r.warnings(nil)...)
		}
		t.deliverOne(ev)
		if ev.Kind == invoker.KindToolResult {
			t.deliverOne(t.r.warnings(ev.Tool)...)
		}
	}
}

// warnings returns a KindWarning event for each thing the run did since
// the last look that a turn warns of (see turn.deliver): what its limits
// did, the connections its network rules refused, the settings files it
// made or changed, the held names below the working directory it made
// (once its tree is gone: walkWarnings), the Go tools' endpoint's
// refusals. tool is the tool
// whose result prompted the look, or nil.
func (r *run) warnings(tool *invoker.Tool) []invoker.Event {
	return slices.Concat(
		r.limitWarnings(tool),
		r.sbx.netRules().warnings(tool),
		r.sbx.settingsWarnings(tool),
		r.sbx.walkWarnings(tool),
		r.sandbox.tools.warnings(tool),
	)
}

// deliverLate delivers, once the turn has ended (a one-shot run's after
// its tree is reaped and its network rules have read their last refusals;
// a session's turn after its terminal event), what is still to be warned
// of: what the run did after its last event, such as a connection a CLI
// tries at exit, which come after KindDone. Where no callback can be
// told of them, a one-shot run's (and Invoke's session of one turn's)
// are logged instead (logWarnings); a session's wait for its next turn.
func (t *turn) deliverLate() {
	if t.req.OnEvent == nil || t.cb.failed() {
		if t.r.turnAfter {
			t.r.logWarnings()
		}
		return
	}
	t.deliverOne(t.r.warnings(nil)...)
}

// logWarnings logs what is still to be warned of once nothing can carry
// it as an event (a session closed after its last turn, a callback that
// panicked, a run without OnEvent).
func (r *run) logWarnings() {
	for _, ev := range r.warnings(nil) {
		r.log.Warn("the run's warning no event could carry", "warning", ev.Text)
	}
}

// deliverOne hands events to OnEvent, in order.
func (t *turn) deliverOne(events ...invoker.Event) {
	for _, ev := range events {
		if ev.Kind != invoker.KindWarning {
			t.firstOnce.Do(func() { close(t.first) })
		}
		if ev.Kind == invoker.KindDelta && !t.deltas {
			continue
		}
		if t.req.OnEvent == nil || t.cb.failed() {
			continue
		}
		t.cb.call("OnEvent", func() { t.req.OnEvent(ev) })
	}
}

// quiet and deciding are what the turn's timers ask (turnTimers).
func (t *turn) quiet() time.Duration { return t.r.quiet() }
func (t *turn) deciding() bool       { return t.approving.Load() > 0 }
