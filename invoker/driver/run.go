package driver

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clinvoke/clinvoke/internal/admit"
	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// A run is one process tree with its line streams, the engine's core, as
// exec.Cmd is os/exec's: it starts the CLI (start.go), reads its standard
// output and error line by line (streams.go), writes its standard input,
// walks the ladder when asked to stop (ladder.go), sweeps the tree once
// the CLI has exited, waits for its streams (drain.go) and reaps it. It
// knows nothing of turns: what its lines mean is its conversation's, the
// one thing it calls. Nothing in a run is shared with other calls.
//
// Goroutines: once the tree has started, wait supervises it, and starts
// the stdout reader, the stderr reader and, when the conversation has
// input, its writer; wait is the one place where they all end (as
// exec.Cmd.Wait is), and done is closed after they have, the tree is
// reaped, and the conversation's ended has returned.
type run struct {
	// Set when the run is made, read-only after.
	cfg     *config
	log     *slog.Logger
	tel     *span // nil records nothing
	conv    conversation
	cb      *callbacks // the caller's callbacks: a panic in one kills the tree at once
	cmd     *Command
	path    string // the CLI's executable, set by start
	workdir string
	env     []string // Request.Env
	input   bool     // the conversation writes standard input; else the CLI gets the null device
	// turnAfter says that what carries the run's one turn ends after the
	// run does and delivers what the run's end found (a one-shot run's
	// turn: deliverLate; Invoke's session of one turn: invokeInSession).
	turnAfter bool
	ctx       context.Context // when done, the run is stopped (a session's); nil for one stopped by its turn only
	start     time.Time
	limits    invoker.Limits // its limits, checked
	sandbox   sandboxAsk     // its sandbox, checked
	// onQueued is told of the waits for the Budget (runSpec.onQueued).
	onQueued func(invoker.Event)

	// Set by start: the run's share of the Budget (nil without one),
	// released once the tree is reaped, and how long it waited for it.
	grant  *admit.Grant
	queued time.Duration

	// Set by startTree, read-only after.
	tree             *proc.Tree
	stdout, stderr   *os.File // our ends: a pipe or the PTY's master, and a pipe
	stdoutW, stderrW *watchedFile
	stdin            *os.File    // our end of the input pipe; nil without input
	pty              *os.File    // the PTY's master in PTY mode, else nil
	containment      string      // the level in force (Result.Containment)
	sbx              *runSandbox // the sandbox in force, nil without
	tail             *jsonl.Tail

	stops      chan stopRequest // the requests to stop; the first one taken wins
	stopped    atomic.Bool      // a stop was requested
	lastActive atomic.Int64     // nanoseconds since start of the last output

	// Only the stdout reader writes stats, before done is closed.
	stats stdoutStats

	// warned counts what the run's limits did that limitWarnings has
	// warned of.
	warnMu sync.Mutex
	warned struct{ OOMKills, ForksRefused int64 }

	// waitMu orders the tree's Wait after the sweeps of a session's turns
	// (proc: no Baseline or SweepSince after Wait); waited is set once the
	// tree is reaped.
	waitMu sync.Mutex
	waited bool

	// done is closed when the run is over; exit is set before.
	done chan struct{}
	exit exit
}

// A conversation is what a run's streams carry, and all the run knows of
// it: the one turn of a one-shot run (oneShot), or a session's turns
// (session). It decodes the lines and delivers their events; the run only
// starts, reads, writes, stops and reaps.
type conversation interface {
	// writeInput writes the CLI's standard input w, then closes it. The
	// run calls it on a goroutine of its own once the tree has started;
	// exited is closed when the CLI has exited, after which the run
	// closes w, which ends a write blocked on it.
	writeInput(w *os.File, exited <-chan struct{})

	// stdoutLine handles one line of standard output (without its
	// newline, never blank). A non-nil error is fatal: the run stops the
	// CLI with it, and drains the rest of the output without handing it
	// over.
	stdoutLine(line []byte) error

	// lineSkipped learns of a line of standard output of size bytes that
	// was skipped, over the line limit.
	lineSkipped(size int64)

	// stderrLine inspects one line of standard error; a non-nil error is
	// fatal, as for stdoutLine. The stderr reader calls it, concurrently
	// with the two methods above, which the stdout reader calls.
	stderrLine(line []byte) error

	// ended is called once, by wait, when the tree is reaped, exit set and
	// the Command cleaned up: the last thing before done is closed.
	ended()
}

// exit is how a run ended.
type exit struct {
	stopErr error      // why the run was stopped; nil when the CLI exited by itself
	state   proc.State // how the CLI's process ended (Code -1 when reaping failed)
	reapErr error      // why reaping failed, if it did
	stderr  string     // the tail of standard error
	cut     bool       // a stream was closed at the wait delay (Result.OutputCut)
	usage   proc.Usage // what the tree used in all, and what its limits did
}

// stdoutStats are what the stdout reader saw, for ErrNoResult's message.
type stdoutStats struct {
	lines      int    // lines that were not blank
	skipped    int    // lines skipped over the line limit
	skippedMax int64  // bytes in the longest of them
	junk       []byte // the start of the first line that was not a JSON object
}

// A stopRequest asks a run to stop for why, with the ladder's graces g.
type stopRequest struct {
	why error
	g   graces
}

// stop asks the run to stop for why, walking the ladder with the graces
// g, unless it is stopping already: the first request taken wins.
func (r *run) stop(why error, g graces) {
	r.stopped.Store(true)
	select {
	case r.stops <- stopRequest{why, g}:
	default: // a request is pending already
	}
}

// fail stops the run for a fatal condition one of its readers found, with
// the Invoker's ladder.
func (r *run) fail(err error) { r.stop(err, r.cfg.graces()) }

// stopping reports whether the run was asked to stop, by a request or by
// its context.
func (r *run) stopping() bool {
	return r.stopped.Load() || r.ctx != nil && r.ctx.Err() != nil
}

// over returns a channel closed when the run is over: the tree reaped,
// its streams and goroutines ended, and the conversation told.
func (r *run) over() <-chan struct{} { return r.done }

// end returns how the run ended; call it once over is closed.
func (r *run) end() *exit { return &r.exit }

// level returns the containment level in force, "" before the start.
func (r *run) level() string { return r.containment }

// stderrTail returns the tail of standard error so far.
func (r *run) stderrTail() string { return r.tail.String() }

// touch marks the CLI active now.
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

// wait supervises the tree until the CLI exits, then sweeps what is left
// of it, waits for the streams, reaps it and tells the conversation: the
// one place where a run's process, streams and goroutines end.
func (r *run) wait() {
	var wg sync.WaitGroup
	stdoutDone := make(chan struct{})
	stderrDone := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); defer close(stdoutDone); r.readStdout() }()
	go func() { defer wg.Done(); defer close(stderrDone); r.readStderr() }()
	if r.stdin != nil {
		wg.Add(1)
		go func() { defer wg.Done(); r.conv.writeInput(r.stdin, r.tree.Exited()) }()
	}

	r.exit.stopErr = r.supervise()

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
		r.stdin.Close() // unblocks input the CLI never read
	}
	r.exit.cut = r.awaitReaders(stdoutDone, stderrDone)
	wg.Wait()
	r.stdout.Close()
	r.stderr.Close()
	r.reap()
	r.sbx.endWarnings(r.log, r.turnAfter)
	if err := r.sbx.undo(); err != nil {
		r.log.Warn("removing the run's temporary directory", "err", err)
	}
	r.grant.Release() // the tree is gone: its share of the Budget is free
	if r.cmd.Cleanup != nil {
		r.cmd.Cleanup()
	}
	r.conv.ended()
	close(r.done)
}

// reap waits for the CLI's process and records how it ended.
func (r *run) reap() {
	r.waitMu.Lock()
	st, err := r.tree.Wait()
	r.waited = true
	r.waitMu.Unlock()
	if err != nil {
		r.log.Warn("reaping the CLI failed", "err", err)
		st = proc.State{Code: -1}
	}
	r.exit.state, r.exit.reapErr = st, err
	r.exit.stderr = r.stderrTail()
	r.exit.usage = r.tree.Usage()
	r.tel.exited(st)
	r.log.Debug("run ended", "pid", r.tree.Pid(), "exit", st.Code, "signal", st.Signal, "elapsed", time.Since(r.start))
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

// mark starts an accounting period of the tree (a session's turn), unless
// the tree is reaped: since then measures from the tree's start.
func (r *run) mark() proc.Mark {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if r.waited {
		return proc.Mark{}
	}
	return r.tree.Mark()
}

// since returns what the tree used after m (its final figures once it is
// reaped).
func (r *run) since(m proc.Mark) proc.Usage { return r.tree.Since(m) }

// snapshot records the tree's parent links, unless it is reaped.
func (r *run) snapshot() {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	if !r.waited {
		r.tree.Snapshot()
	}
}

// safeRaw returns line as Raw if it is valid JSON, else nil, so that
// marshalling an Event never fails.
func safeRaw(line []byte) []byte {
	if json.Valid(line) {
		return line
	}
	return nil
}
