package invoker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
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

	decMu sync.Mutex
	dec   Decoder
	tail  *jsonl.Tail

	fatal      chan error    // first fatal condition found by a reader
	firstEvent chan struct{} // closed at the first event that is not a warning
	firstOnce  sync.Once
	lastActive atomic.Int64 // nanoseconds since start of the last output

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
	if r.stdin != nil {
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
	r.stdoutW.swept.Store(true)
	r.stderrW.swept.Store(true)
	r.awaitReaders(stdoutDone, stderrDone)
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

// startTree creates the run's streams and starts the root process.
func (r *run) startTree() (err error) {
	cfg := &r.e.cfg
	marker := newMarker()
	attr := &proc.Attr{
		Path:      r.path,
		Args:      append([]string{r.path}, r.cmd.Args...),
		Env:       r.e.environ(r.cmd, r.req, marker),
		Dir:       r.req.Workdir,
		Marker:    marker,
		Subreaper: cfg.subreaper,
		Logger:    r.log,
	}
	var closeAfterStart []*os.File
	defer func() {
		for _, f := range closeAfterStart {
			f.Close()
		}
		if err != nil {
			for _, f := range []*os.File{r.stdout, r.stderr, r.stdin} {
				if f != nil {
					f.Close()
				}
			}
		}
	}()

	if cfg.pty {
		master, tty, err := openPTY()
		if err != nil {
			return fmt.Errorf("PTY mode: %w", err)
		}
		r.stdout, r.pty = master, master
		attr.Stdout, attr.TTY = tty, tty
		closeAfterStart = append(closeAfterStart, tty)
	} else {
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		r.stdout, attr.Stdout = pr, pw
		closeAfterStart = append(closeAfterStart, pw)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	r.stderr, attr.Stderr = pr, pw
	closeAfterStart = append(closeAfterStart, pw)
	if r.cmd.Stdin != "" {
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		attr.Stdin, r.stdin = pr, pw
		closeAfterStart = append(closeAfterStart, pr)
	} // else the child's stdin is the null device: never the host's

	t, err := proc.Start(attr)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			// Removed since the lookup, not executable, or a bad
			// interpreter line: the CLI is not installed properly.
			return fmt.Errorf("%w: starting %s: %w", ErrNotInstalled, r.path, err)
		}
		return fmt.Errorf("starting %s: %w", r.path, err)
	}
	r.tree = t
	r.stdoutW = &watchedFile{f: r.stdout, r: r, pty: r.pty != nil}
	r.stderrW = &watchedFile{f: r.stderr, r: r}
	r.log.Debug("started", "pid", t.Pid(), "path", r.path, "args", len(attr.Args)-1, "pty", cfg.pty)
	return nil
}

// supervise waits until the root process exits. Meanwhile it watches the
// caller's context, the timeouts and fatal conditions, and walks the
// cancellation ladder when one of them fires. It returns why the run was
// stopped, or nil if the CLI exited by itself.
func (r *run) supervise() error {
	cfg := &r.e.cfg
	var stopErr error
	ctxDone := r.ctx.Done()
	fatal := r.fatal
	panicCh := r.panicCh

	var firstTimer, idleTimer <-chan time.Time
	if cfg.firstEventTimeout > 0 {
		t := time.NewTimer(cfg.firstEventTimeout)
		defer t.Stop()
		firstTimer = t.C
	}
	var idle *time.Timer
	if cfg.idleTimeout > 0 {
		idle = time.NewTimer(cfg.idleTimeout)
		defer idle.Stop()
		idleTimer = idle.C
	}
	firstEvent := r.firstEvent

	// The ladder: interrupt, then terminate, then kill, each step after the
	// previous one's grace period. Steps with a zero grace are skipped.
	var ladder *time.Timer
	var ladderC <-chan time.Time
	step := 0
	next := func() {
		for step < 3 {
			step++
			var grace time.Duration
			switch step {
			case 1:
				if grace = cfg.interruptGrace; grace == 0 {
					continue
				}
				r.interrupt()
			case 2:
				if grace = cfg.terminateGrace; grace == 0 {
					continue
				}
				r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Terminate.String())
				r.tree.Signal(proc.Terminate)
			case 3:
				r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String())
				rep := r.tree.Kill()
				r.log.Debug("killed process tree", "killed", rep.Killed, "elapsed", rep.Elapsed)
				return
			}
			if ladder == nil {
				ladder = time.NewTimer(grace)
			} else {
				ladder.Reset(grace)
			}
			ladderC = ladder.C
			return
		}
	}
	defer func() {
		if ladder != nil {
			ladder.Stop()
		}
	}()
	stop := func(err error) {
		if stopErr != nil {
			return
		}
		stopErr = err
		r.log.Debug("stopping", "pid", r.tree.Pid(), "reason", err)
		next()
	}

	for {
		select {
		case <-r.tree.Exited():
			return stopErr
		case <-ctxDone:
			ctxDone = nil
			stop(ctxError(r.ctx))
		case err := <-fatal:
			fatal = nil
			stop(err)
		case <-panicCh:
			// A panic in OnEvent is a bug of the caller's: do not wait
			// for a polite exit.
			panicCh = nil
			if stopErr == nil {
				stopErr = errors.New("OnEvent panicked")
			}
			step = 3
			r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Kill.String(), "reason", "OnEvent panicked")
			r.tree.Kill()
		case <-firstEvent:
			firstEvent, firstTimer = nil, nil
		case <-firstTimer:
			firstTimer = nil
			select {
			case <-firstEvent: // it came in time after all
			default:
				stop(fmt.Errorf("%w (%v)", ErrFirstEventTimeout, cfg.firstEventTimeout))
			}
		case <-idleTimer:
			quiet := r.quiet()
			if quiet >= cfg.idleTimeout {
				idleTimer = nil
				stop(fmt.Errorf("%w (%v)", ErrIdleTimeout, cfg.idleTimeout))
			} else {
				idle.Reset(cfg.idleTimeout - quiet)
			}
		case <-ladderC:
			ladderC = nil
			next()
		}
	}
}

// interrupt is the ladder's first step: Ctrl-C through the terminal in PTY
// mode, else SIGINT to the root's process group. SIGINT comes first because
// it is the signal the real CLIs handle best: Claude Code records the turn
// and kills its own tools only on SIGINT (CLI-FACTS.md).
func (r *run) interrupt() {
	if r.pty != nil {
		r.tree.Snapshot() // Signal would take it; Ctrl-C bypasses Signal
		r.log.Debug("signal", "pid", r.tree.Pid(), "signal", "Ctrl-C (PTY)")
		if _, err := r.pty.Write([]byte{0x03}); err == nil {
			return
		}
	}
	r.log.Debug("signal", "pid", r.tree.Pid(), "signal", proc.Interrupt.String())
	r.tree.Signal(proc.Interrupt)
}

// awaitReaders waits for stdout and stderr to reach end of file. The tree
// is dead by now, so that happens as soon as the readers have consumed what
// the CLI wrote. Only if a reader then sits blocked for the whole wait delay
// with nothing arriving — something the sweep could not find holds the pipe
// — is our end closed, which ends the read. A reader still busy with a big
// line or a slow OnEvent is never cut off. (A writer the sweep missed that
// keeps writing is cut off by watchedFile.Read.)
func (r *run) awaitReaders(stdoutDone, stderrDone <-chan struct{}) {
	delay := r.e.cfg.waitDelay
	t := time.NewTimer(delay)
	defer t.Stop()
	type stream struct {
		done <-chan struct{}
		w    *watchedFile
	}
	streams := []*stream{{stdoutDone, r.stdoutW}, {stderrDone, r.stderrW}}
	for {
		pending := streams[:0:0]
		for _, st := range streams {
			if st.done != nil {
				pending = append(pending, st)
			}
		}
		if len(pending) == 0 {
			return
		}
		select {
		case <-streams[0].done:
			streams[0].done = nil
		case <-streams[1].done:
			streams[1].done = nil
		case <-t.C:
			next := delay
			for _, st := range pending {
				switch blocked := st.w.blockedFor(); {
				case blocked > 0 && blocked >= delay:
					r.log.Warn("output still open after the tree was killed; closing it", "wait_delay", delay)
					st.w.f.Close()
				case blocked > 0:
					next = min(next, delay-blocked)
				}
			}
			t.Reset(max(next, time.Millisecond))
		}
	}
}

// watchedFile is our end of an output stream. It records since when a Read
// has been blocked, so awaitReaders can tell a stream nobody writes to any
// more from one whose reader is busy, and it marks the run active on every
// read that returns data (for the idle timeout).
type watchedFile struct {
	f            *os.File
	r            *run
	pty          bool         // f is a PTY master
	blockedSince atomic.Int64 // nanoseconds since run start; 0 when not in Read
	swept        atomic.Bool  // the tree has been killed
	afterSweep   atomic.Int64 // bytes read since then
}

// maxLeftover bounds what dead writers can have left in a stream when the
// sweep ends: a pipe holds at most fs.pipe-max-size (1 MiB by default), a
// terminal far less. More than that means a live writer the sweep missed.
const maxLeftover = 1<<20 + 64<<10

func (w *watchedFile) Read(p []byte) (int, error) {
	w.blockedSince.Store(int64(time.Since(w.r.start)) | 1)
	n, err := w.f.Read(p)
	w.blockedSince.Store(0)
	if n > 0 {
		w.r.touch()
		if w.swept.Load() && w.afterSweep.Add(int64(n)) > maxLeftover {
			w.r.log.Warn("a process the sweep could not find still writes to the CLI's output; closing it")
			w.f.Close()
			return n, io.EOF
		}
	}
	if w.pty && isPTYEnd(err) {
		err = io.EOF // how a terminal reports that no process holds it
	}
	return n, err
}

// blockedFor returns how long the current Read has been blocked, or 0.
func (w *watchedFile) blockedFor() time.Duration {
	since := w.blockedSince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(w.r.start)-time.Duration(since), 1)
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
// output, but only while the stdout reader waits for more. A reader busy
// decoding or in a slow OnEvent is not waiting on the CLI.
func (r *run) quiet() time.Duration {
	blocked := r.stdoutW.blockedFor()
	if blocked == 0 {
		return 0
	}
	return min(blocked, time.Since(r.start)-time.Duration(r.lastActive.Load()))
}

// readStdout decodes stdout line by line and delivers the events.
func (r *run) readStdout() {
	rd := jsonl.NewReader(r.stdoutW, r.e.cfg.maxLineSize)
	for {
		line, err := rd.ReadLine()
		if err != nil {
			var tooLong *jsonl.LineTooLongError
			if errors.As(err, &tooLong) {
				r.deliver([]Event{{
					Kind: KindWarning,
					Text: fmt.Sprintf("skipped a stdout line of %d bytes: it exceeds the line limit of %d bytes (see WithMaxLineSize)", tooLong.Size, tooLong.Max),
				}})
				continue
			}
			if err != io.EOF && !errors.Is(err, os.ErrClosed) && !isPTYEnd(err) {
				r.log.Debug("reading stdout", "err", err)
			}
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		events, ferr := r.decode(line)
		r.deliver(events)
		if ferr != nil {
			r.fail(ferr)
		}
	}
}

// decode runs the decoder on one line; a panic in it becomes a warning.
func (r *run) decode(line []byte) (events []Event, err error) {
	r.decMu.Lock()
	defer r.decMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("decoder panicked", "panic", p, "stack", string(debug.Stack()))
			events = []Event{{Kind: KindWarning, Text: fmt.Sprintf("decoder failed on a line: %v", p), Raw: safeRaw(line)}}
			err = nil
		}
	}()
	return r.dec.Decode(line)
}

// deliver hands events to OnEvent. If OnEvent panics or calls
// runtime.Goexit, the run is killed at once, no further event is
// delivered, and Invoke re-raises the panic (or calls Goexit) after the
// tree is reaped.
func (r *run) deliver(events []Event) {
	for _, ev := range events {
		if ev.Kind != KindWarning {
			r.firstOnce.Do(func() { close(r.firstEvent) })
		}
		if r.req.OnEvent == nil || r.panicked.Load() {
			continue
		}
		r.callOnEvent(ev)
	}
}

func (r *run) callOnEvent(ev Event) {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover() // nil when OnEvent called runtime.Goexit
		r.panicOnce.Do(func() {
			r.panicVal, r.goexit = p, p == nil
			if p != nil {
				r.log.Error("OnEvent panicked", "panic", p, "stack", string(debug.Stack()))
			}
			r.panicked.Store(true)
			close(r.panicCh)
		})
		// After a panic this goroutine goes on draining the output
		// without delivering; after Goexit it ends here and the kill
		// stops the CLI.
	}()
	r.req.OnEvent(ev)
	returned = true
}

// readStderr keeps the tail of stderr and shows each line to the decoder,
// which may recognise a fatal signature in it.
func (r *run) readStderr() {
	// Small: a run holds it for its whole life, CLIs write little to
	// stderr, and the tail keeps its own copy.
	buf := make([]byte, 4<<10)
	var partial []byte
	overlong := false // partial is the start of a line longer than maxLine
	const maxLine = 16 << 10
	check := func(line []byte) {
		if len(bytes.TrimSpace(line)) == 0 {
			return
		}
		r.decMu.Lock()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = nil
				}
			}()
			return r.dec.Stderr(line)
		}()
		r.decMu.Unlock()
		if err != nil {
			r.fail(err)
		}
	}
	for {
		n, err := r.stderrW.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			r.tail.Write(chunk)
			for {
				i := bytes.IndexByte(chunk, '\n')
				if i < 0 {
					if overlong || len(partial)+len(chunk) > maxLine {
						// Only the start of an over-long line is
						// checked; never splice its later pieces.
						overlong = true
					} else {
						partial = append(partial, chunk...)
					}
					break
				}
				switch {
				case overlong:
					check(partial)
				case len(partial) > 0:
					check(append(partial, chunk[:i]...))
				default:
					check(chunk[:i])
				}
				partial, overlong = partial[:0], false
				chunk = chunk[i+1:]
			}
		}
		if err != nil {
			check(partial)
			return
		}
	}
}

// writeStdin writes the prompt and closes stdin, so that CLIs that read
// their prompt to end of file start working. It runs concurrently with the
// readers, so a prompt larger than the pipe's buffer cannot deadlock.
func (r *run) writeStdin() {
	_, err := io.WriteString(r.stdin, r.cmd.Stdin)
	if err != nil && !errors.Is(err, os.ErrClosed) {
		r.log.Debug("writing the prompt", "err", err)
	}
	r.stdin.Close()
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
