package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// run is the engine's core: one process tree with its line streams. It
// starts the CLI, reads and decodes its output, writes its input, walks the
// ladder when asked to stop, sweeps the tree after the CLI exits and reaps
// it. Two thin drivers use it: Invoke (one turn: the prompt on standard
// input, the turn ends when the CLI exits) and a session (turns spoken in
// the CLI's protocol, see session.go). Each supplies the decoder, the
// writer of standard input and the receiver of events. Nothing in a run is
// shared with other calls.
type run struct {
	cli     string  // the CLI's name, for the log
	cfg     *config // the driver's: a session's has no turn timeouts
	ctx     context.Context
	workdir string
	env     []string // Request.Env
	cmd     *Command
	path    string
	start   time.Time
	res     *invoker.Result
	log     *slog.Logger
	// schema is Request.OutputSchema, resolved; nil when not set.
	schema *jsonschema.Resolved
	// onEvent receives the decoded events, in order, from one goroutine.
	onEvent func(invoker.Event)
	// deltas keeps KindDelta events (Request.Deltas); without it they
	// count as activity but are not delivered.
	deltas bool
	// input writes the CLI's standard input and closes it; nil gives the
	// CLI the null device.
	input func()
	// onSkip, if set, learns of each stdout line skipped over the limit.
	onSkip func(size int64)

	tree   *proc.Tree
	stdout *os.File // our end: a pipe, or the PTY's master
	stderr *os.File
	// stdoutW and stderrW wrap stdout and stderr for the readers.
	stdoutW, stderrW *watchedFile
	stdin            *os.File // our end of the input pipe; nil when there is no input
	pty              *os.File // the PTY's master in PTY mode, else nil

	// waitMu orders the tree's Wait after a session's sweeps of a turn
	// (proc: no Baseline or SweepSince after Wait); waited is set once the
	// tree is reaped.
	waitMu sync.Mutex
	waited bool

	decMu sync.Mutex
	dec   Decoder
	tail  *jsonl.Tail

	fatal      chan error    // first fatal condition found by a reader
	firstEvent chan struct{} // closed at the first event that is not a warning
	firstOnce  sync.Once
	lastActive atomic.Int64 // nanoseconds since start of the last output
	// waitDelayed says that an output stream was still held open at the
	// wait delay after the tree was killed, and was closed.
	waitDelayed bool
	// skipped counts the stdout lines skipped over the line limit, the
	// longest of them skippedMax bytes. Only the stdout reader writes
	// them, before execute reads them.
	skipped    int
	skippedMax int64
	// lines counts the stdout lines that were not blank, and junk holds
	// the start of the first one that was not a JSON object, for
	// ErrNoResult's message. Only the stdout reader writes them.
	lines int
	junk  []byte
	// sessionID is the latest session id an event reported; deliver sets
	// it on the events after. Only the stdout reader uses it.
	sessionID string

	// OnEvent panicked or called runtime.Goexit: panicked is set and
	// panicCh closed once, after panicVal and goexit are written.
	panicked  atomic.Bool
	panicCh   chan struct{}
	panicOnce sync.Once
	panicVal  any
	goexit    bool
	panicWhat string // the callback that panicked: "OnEvent", "Approve", ...

	// afterLine, if not nil, is called by the stdout reader once the
	// events of a line are delivered.
	afterLine func()
	// approving counts the Approve callbacks running: the CLI waits for
	// them, and the turn's timeouts do not count that wait.
	approving atomic.Int32

	tel *span // the run's telemetry (telemetry.go); nil records nothing
}

// execute starts the CLI, streams its output, stops it when asked, sweeps
// its tree and fills r.res. It returns the run's error, if any.
func (r *run) execute() error {
	cfg := r.cfg
	r.log = r.tel.logger(cfg.logger).With("cli", r.cli)
	r.tail = jsonl.NewTail(cfg.stderrTail)
	r.fatal = make(chan error, 1)
	r.firstEvent = make(chan struct{})
	r.panicCh = make(chan struct{})

	if err := r.startTree(); err != nil {
		return err
	}

	var wg sync.WaitGroup
	stdoutDone := make(chan struct{})
	stderrDone := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); defer close(stdoutDone); r.readStdout() }()
	go func() { defer wg.Done(); defer close(stderrDone); r.readStderr() }()
	if r.stdin != nil {
		wg.Add(1)
		go func() { defer wg.Done(); r.input() }()
	}

	stopErr := r.supervise()

	// The root has exited. Sweep whatever is left of its tree right away,
	// after a clean exit too: a grandchild left behind would otherwise live
	// on, and one holding stdout open would keep the readers waiting.
	rep := r.tree.Kill()
	r.tel.swept(rep)
	r.log.Debug("swept process tree", "killed", rep.Killed, "survivors", rep.Survivors, "elapsed", rep.Elapsed)
	if len(rep.Survivors) > 0 {
		r.log.Warn("processes survived SIGKILL", "pids", rep.Survivors)
	}
	if r.stdin != nil {
		r.stdin.Close() // unblocks a prompt the CLI never read
	}
	r.waitDelayed = r.awaitReaders(stdoutDone, stderrDone)
	wg.Wait()
	r.stdout.Close()
	r.stderr.Close()

	r.waitMu.Lock()
	st, werr := r.tree.Wait()
	r.waited = true
	r.waitMu.Unlock()
	if werr != nil {
		r.log.Warn("reaping the CLI failed", "err", werr)
		st = proc.State{Code: -1}
	}
	r.res.ExitCode = st.Code
	r.tel.exited(st)
	r.res.Stderr = r.tail.String()
	r.log.Debug("run ended", "pid", r.tree.Pid(), "exit", st.Code, "signal", st.Signal, "elapsed", time.Since(r.start))

	out := r.outcome(st.Code)
	r.res.SessionID, r.res.Text, r.res.Usage = out.SessionID, out.Text, out.Usage
	r.res.Turns = out.Turns
	r.res.OutputCut = r.waitDelayed
	if r.panicked.Load() {
		return nil // Invoke re-raises the panic
	}
	return r.verdict(out, stopErr, st, werr)
}

// verdict decides the run's error from what the decoder established, why
// the run was stopped, how the CLI ended and what was lost on the way.
// Success needs the CLI's terminal success event and nothing skipped.
func (r *run) verdict(out Outcome, stopErr error, st proc.State, werr error) error {
	skipped := r.skippedError()
	var ee *invoker.ExitError
	if errors.As(out.Err, &ee) && ee.ExitCode < 0 && ee.Signal == "" {
		ee.Signal = st.Signal // the decoder cannot know it
	}
	if err, done := decide(&out, stopErr, skipped, r.schema, r.res); done {
		return err
	}
	switch {
	case werr != nil:
		return fmt.Errorf("reaping the CLI: %w", werr)
	case st.Code != 0:
		return &invoker.ExitError{ExitCode: st.Code, Signal: st.Signal, Stderr: r.res.Stderr}
	}
	// Exit status 0 without the terminal event: say what the CLI printed
	// instead, and what may have swallowed the event.
	e := &noResultError{printed: r.printed(), stderr: jsonl.LastLines(r.res.Stderr, 3, 512)}
	if skipped != nil {
		e.lost = append(e.lost, skipped)
	}
	if r.waitDelayed {
		e.lost = append(e.lost, fmt.Errorf("output streams closed at the wait delay (%v) while a process outside the run held them open: the terminal event may have come after (Result.OutputCut)", r.cfg.waitDelay))
	}
	return e
}

// printed describes what the CLI printed on stdout, for a run that ended
// without its terminal event.
func (r *run) printed() string {
	switch {
	case r.junk != nil:
		return fmt.Sprintf("stdout held text that is not an event, starting %s (is the binary the CLI, in a version that prints JSON events?)", quoteStart(r.junk))
	case r.lines == 0 && r.skipped == 0:
		return "the CLI printed nothing on stdout"
	default:
		return fmt.Sprintf("none of the %d lines the CLI printed on stdout was its terminal event", r.lines+r.skipped)
	}
}

// quoteStart quotes b, marking it as cut when it is as long as the part
// of a line that is kept.
func quoteStart(b []byte) string {
	q := strconv.Quote(string(b))
	if len(b) >= junkMax {
		q += "..."
	}
	return q
}

// skippedError describes the stdout lines skipped over the line limit, or
// returns nil if none was. It matches ErrLineTooLong.
func (r *run) skippedError() *lineTooLongError {
	if r.skipped == 0 || r.onSkip != nil {
		// A driver that learns of skipped lines (a session) reports them
		// with the turn they belong to.
		return nil
	}
	return &lineTooLongError{n: r.skipped, longest: r.skippedMax, max: r.cfg.maxLineSize}
}

// lineTooLongError is ErrLineTooLong with the size of what was skipped.
type lineTooLongError struct {
	n       int   // lines skipped
	longest int64 // bytes in the longest of them
	max     int   // the line limit
	success bool  // the CLI reported success after them
	session bool  // it ended the session the line was skipped in
}

func (e *lineTooLongError) Error() string {
	msg := fmt.Sprintf("a stdout line of %d bytes was skipped, over the line limit of %d bytes; it", e.longest, e.max)
	if e.n > 1 {
		msg = fmt.Sprintf("%d stdout lines were skipped, over the line limit of %d bytes (the longest %d bytes); they", e.n, e.max, e.longest)
	}
	msg += " may have held the final answer or the terminal event: raise the limit with Options.MaxLineSize"
	if e.success {
		msg = "the CLI reported success, but " + msg
	}
	if e.session {
		msg += "; the session was ended, as its protocol may have lost the end of the turn or a request the CLI waits on (resume the conversation in a new session with its id)"
	}
	return msg
}

func (e *lineTooLongError) Is(target error) bool { return target == invoker.ErrLineTooLong }

// noResultError is ErrNoResult with what the CLI printed instead and what
// may have swallowed the terminal event.
type noResultError struct {
	printed string  // what stdout held
	stderr  string  // the last lines of stderr, or ""
	lost    []error // the skipped lines (ErrLineTooLong), the cut at the wait delay
}

func (e *noResultError) Error() string {
	msg := invoker.ErrNoResult.Error() + ": " + e.printed
	for _, l := range e.lost {
		msg += "; " + l.Error()
	}
	if e.stderr != "" {
		msg += "; stderr: " + e.stderr
	}
	return msg
}

func (e *noResultError) Unwrap() []error { return append([]error{invoker.ErrNoResult}, e.lost...) }

// ctxError returns the error of a run that ctx stopped, or kept from
// starting: ctx.Err(), which callers match with errors.Is. A cause given
// with context.WithCancelCause (or WithDeadlineCause, WithTimeoutCause) is
// named in the message but not wrapped: it is why the caller stopped the
// run, not something the run did, so errors.Is and errors.As must not find
// it. Otherwise an errgroup sibling stopped because another run failed
// would match that run's *ExitError, and a run cancelled with the cause
// ErrRateLimited would look rate limited. context.Cause(ctx) returns it.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return &ctxStopError{err: err, cause: cause.Error()}
	}
	return err
}

// ctxStopError is ctx.Err() with the text of the cancellation's cause.
type ctxStopError struct {
	err   error // context.Canceled or context.DeadlineExceeded
	cause string
}

func (e *ctxStopError) Error() string { return e.err.Error() + " (cause: " + e.cause + ")" }

// Unwrap returns ctx.Err() only: the cause is text, never a match.
func (e *ctxStopError) Unwrap() error { return e.err }

// fail reports a fatal condition to supervise; the first one wins.
func (r *run) fail(err error) {
	select {
	case r.fatal <- err:
	default:
	}
}

func (r *run) touch() { r.lastActive.Store(int64(time.Since(r.start))) }

// quiet returns how long the CLI has been silent: the time since its last
// output, while the stdout reader waits for more or after stdout has
// ended (a CLI that closed its stdout and runs on is silent too). A reader
// busy decoding or in a slow OnEvent is not waiting on the CLI.
func (r *run) quiet() time.Duration {
	since := time.Since(r.start) - time.Duration(r.lastActive.Load())
	if r.stdoutW.eof.Load() {
		return since
	}
	blocked := r.stdoutW.blockedFor()
	if blocked == 0 {
		return 0
	}
	return min(blocked, since)
}

// outcome asks the decoder what the run established.
func (r *run) outcome(code int) (out Outcome) {
	r.decMu.Lock()
	defer r.decMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("decoder panicked in Outcome", "panic", p)
			out = Outcome{}
		}
	}()
	return r.dec.Outcome(code, r.res.Stderr)
}

// safeRaw returns line as Raw if it is valid JSON, else nil, so that
// marshalling an Event never fails.
func safeRaw(line []byte) []byte {
	if json.Valid(line) {
		return line
	}
	return nil
}

// baseline takes the tree's current members, for a sweep of what comes
// after; ok is false once the tree is reaped.
func (r *run) baseline() (b proc.Baseline, ok bool) {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if r.waited {
		return b, false
	}
	return r.tree.Baseline(), true
}

// sweepSince kills what the tree started since b, unless the tree is
// already reaped (its end killed it all).
func (r *run) sweepSince(b proc.Baseline) proc.Report {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if r.waited {
		return proc.Report{}
	}
	return r.tree.SweepSince(b)
}

// snapshot records the tree's parent links, unless it is reaped.
func (r *run) snapshot() {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if !r.waited {
		r.tree.Snapshot()
	}
}
