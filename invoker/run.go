package invoker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/proc"
)

// run is the state of one Invoke call: its process tree, its streams and
// what its decoder learnt. Nothing in it is shared with other calls.
type run struct {
	e     *engine
	ctx   context.Context
	req   *Request
	cmd   *Command
	path  string
	start time.Time
	res   *Result
	log   *slog.Logger

	tree   *proc.Tree
	stdout *os.File // our end: a pipe, or the PTY's master
	stderr *os.File
	// stdoutW and stderrW wrap stdout and stderr for the readers.
	stdoutW, stderrW *watchedFile
	stdin            *os.File // our end of the prompt pipe; nil when there is no prompt
	pty              *os.File // the PTY's master in PTY mode, else nil
	// feed, when set (a session), writes standard input in place of the
	// prompt, for as long as the session lasts.
	feed func()

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

	// OnEvent panicked or called runtime.Goexit: panicked is set and
	// panicCh closed once, after panicVal and goexit are written.
	panicked  atomic.Bool
	panicCh   chan struct{}
	panicOnce sync.Once
	panicVal  any
	goexit    bool
}

// execute starts the CLI, streams its output, stops it when asked, sweeps
// its tree and fills r.res. It returns the run's error, if any.
func (r *run) execute() error {
	cfg := &r.e.cfg
	r.log = cfg.logger.With("cli", r.e.b.Name())
	r.dec = r.e.b.NewDecoder(r.req)
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
	if r.feed != nil {
		wg.Add(1)
		go func() { defer wg.Done(); r.feed() }()
	} else if r.stdin != nil {
		wg.Add(1)
		go func() { defer wg.Done(); r.writeStdin() }()
	}

	stopErr := r.supervise()

	// The root has exited. Sweep whatever is left of its tree right away,
	// after a clean exit too: a grandchild left behind would otherwise live
	// on, and one holding stdout open would keep the readers waiting.
	rep := r.tree.Kill()
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

	st, werr := r.tree.Wait()
	if werr != nil {
		r.log.Warn("reaping the CLI failed", "err", werr)
		st = proc.State{Code: -1}
	}
	r.res.ExitCode = st.Code
	r.res.Stderr = r.tail.String()
	r.log.Debug("run ended", "pid", r.tree.Pid(), "exit", st.Code, "signal", st.Signal, "elapsed", time.Since(r.start))

	out := r.outcome(st.Code)
	r.res.SessionID, r.res.Text, r.res.Usage = out.SessionID, out.Text, out.Usage
	switch {
	case r.panicked.Load():
		return nil // Invoke re-raises the panic
	case out.Success:
		// The CLI reported success before any stop took effect: the turn
		// is complete, and nothing of it is lost.
		return nil
	case stopErr != nil:
		return stopErr
	case out.Err != nil:
		return out.Err
	case werr != nil:
		return fmt.Errorf("reaping the CLI: %w", werr)
	case st.Code != 0:
		return &ExitError{Code: st.Code, Stderr: r.res.Stderr}
	default:
		return ErrNoResult
	}
}

// ctxError returns ctx's error, which callers match with errors.Is, with the
// cancellation cause attached when the caller gave one.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

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
