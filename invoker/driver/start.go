package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/clinvoke/clinvoke/internal/jsonl"
	"github.com/clinvoke/clinvoke/internal/pipe"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// A runSpec says what a run runs, and for whom.
type runSpec struct {
	conv    conversation
	cb      *callbacks // runs the caller's callbacks for the run and its conversation
	tel     *span
	cmd     *Command
	workdir string
	env     []string // Request.Env
	input   bool     // the conversation writes standard input
	// turnAfter: what carries the run's one turn ends after it (a
	// one-shot run, Invoke's session of one turn), and delivers what the
	// run did after its last event.
	turnAfter bool
	ctx       context.Context // stops the run when done; nil for none
	limits    invoker.Limits  // the run's limits, checked
	sandbox   sandboxAsk      // the run's sandbox, checked
	// onQueued, if not nil, is told of the run's waits for the Budget
	// (KindQueued events), on the goroutine that starts the run.
	onQueued func(invoker.Event)
}

// newRun returns the run sp says; e.start starts it.
func (e *engine) newRun(sp runSpec) *run {
	return &run{
		cfg:       &e.cfg,
		log:       e.logger(sp.tel),
		tel:       sp.tel,
		conv:      sp.conv,
		cb:        sp.cb,
		cmd:       sp.cmd,
		workdir:   sp.workdir,
		env:       sp.env,
		input:     sp.input,
		turnAfter: sp.turnAfter,
		ctx:       sp.ctx,
		limits:    sp.limits,
		sandbox:   sp.sandbox,
		onQueued:  sp.onQueued,
		start:     time.Now(),
		stops:     make(chan stopRequest, 1),
		done:      make(chan struct{}),
	}
}

// logger returns the logger of the calls recorded in tel: the Options'
// logger with the CLI's name and the trace's ids.
func (e *engine) logger(tel *span) *slog.Logger {
	return tel.logger(e.cfg.logger).With("cli", e.b.Name())
}

// start admits the run r and starts its tree: the one place that every
// run, one-shot or a session's, goes through before a process exists. It
// finds the CLI's executable, refuses a context already done, waits for
// room in the Budget (admission.go), starts the tree with its streams and
// its limits and hands it to wait, which gives the room back once the
// tree is reaped. On failure (or a panic of OnEvent while the run waits)
// nothing runs, nothing is held, the Command's Cleanup has been called,
// and the error says why.
func (e *engine) start(ctx context.Context, r *run) error {
	started := false
	defer func() {
		if !started && r.cmd.Cleanup != nil {
			r.cmd.Cleanup()
		}
	}()
	path, err := e.lookPath()
	if err == nil && ctx.Err() != nil {
		// Never start a process for a call already cancelled; report it
		// as a cancel during the call is reported.
		err = ctxError(ctx)
	}
	if err == nil {
		err = e.admit(ctx, r)
	}
	if err == nil {
		r.path = path
		if err = r.startTree(); err != nil {
			r.grant.Release()
		}
	}
	if err != nil {
		return err
	}
	started = true
	go r.wait()
	return nil
}

// startTree creates the run's streams and starts the root process.
func (r *run) startTree() (err error) {
	attr, err := r.attr()
	if err != nil {
		return err
	}
	closeAfterStart, err := r.openStreams(attr)
	if le := exhaustedError(err); le != nil {
		err = le // out of descriptors: say which limit
	}
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
	if err != nil {
		return err
	}
	r.sandbox.tel = r.tel
	if r.sbx, err = r.sandbox.prepare(attr, r.workdir, slices.Concat(r.cfg.env, r.cmd.Env, r.env), r.log); err != nil {
		return err
	}
	t, err := proc.Start(attr)
	if err != nil {
		r.sbx.undo()
		return r.startError(err)
	}
	r.sbx.started()
	r.sandbox.tools.started(t.Pid(), r.sbx.netRules() != nil)
	if err := r.sbx.stageStarted(); err != nil {
		t.Kill()
		t.Wait()
		r.sbx.undo()
		return err
	}
	if ok, why := r.sbx.private(); r.sbx.held() != "" && !ok {
		r.log.Debug("the run keeps the host's /tmp and /dev/shm", "reason", why)
	}
	for _, why := range r.sbx.unheldLinks() {
		r.log.Warn("a hold of the run's sandbox is not in place (a link on the way to a settings file, a configuration name of the working directory that is a link, such as .env -> .env.local, where the run has no mount namespace, a configuration name below the top that cannot be bound, the walk for those names cut by its budget or kept out of another mount, or the shells)", "reason", why)
	}
	if why := r.sbx.bypassUnrecorded(); why != nil {
		r.log.Debug("connections that bypass the network rules' proxy are refused but not recorded", "reason", why)
	}
	r.tree = t
	r.containment = level(t.Containment())
	r.tail = jsonl.NewTail(r.cfg.stderrTail)
	r.tel.started(t.Pid(), r.containment)
	r.stdoutW = &watchedFile{f: r.stdout, r: r, pty: r.pty != nil}
	r.stderrW = &watchedFile{f: r.stderr, r: r}
	r.log.Debug("started", "pid", t.Pid(), "path", r.path, "args", len(attr.Args)-1, "pty", r.cfg.pty, "containment", r.containment)
	return nil
}

// attr returns how proc starts the CLI: its command line, environment
// (with a fresh run marker), working directory and containment.
func (r *run) attr() (*proc.Attr, error) {
	want, err := r.cfg.want()
	if err != nil {
		return nil, err
	}
	marker := newMarker()
	attr := &proc.Attr{
		Path:      r.path,
		Args:      append([]string{r.path}, r.cmd.Args...),
		Env:       environ(r.cfg, r.cmd, r.env, marker, r.tel.environ()),
		Dir:       r.workdir,
		Marker:    marker,
		Subreaper: r.cfg.subreaper,
		Logger:    r.log,

		Containment:  want,
		CgroupParent: r.cfg.cgroupParent,
		Limits:       procLimits(r.limits),
		Account:      r.cfg.account,
	}
	if err := commandNoNUL(r.cmd, attr.Env); err != nil {
		return nil, err
	}
	return attr, nil
}

// openStreams opens the CLI's standard output (a pipe, or a PTY in PTY
// mode), standard error and, when the conversation has input, standard
// input, keeping our ends in r and setting the CLI's in attr. It returns
// the CLI's ends, to be closed once the CLI has started; on error the
// caller closes those and ours.
func (r *run) openStreams(attr *proc.Attr) (closeAfterStart []*os.File, err error) {
	if r.cfg.pty {
		master, tty, err := pipe.OpenPTY()
		if err != nil {
			return nil, fmt.Errorf("PTY mode: %w", err)
		}
		r.stdout, r.pty = master, master
		attr.Stdout, attr.TTY = tty, tty
		closeAfterStart = append(closeAfterStart, tty)
	} else {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		r.stdout, attr.Stdout = pr, pw
		closeAfterStart = append(closeAfterStart, pw)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return closeAfterStart, err
	}
	r.stderr, attr.Stderr = pr, pw
	closeAfterStart = append(closeAfterStart, pw)
	if r.input {
		pr, pw, err := os.Pipe()
		if err != nil {
			return closeAfterStart, err
		}
		attr.Stdin, r.stdin = pr, pw
		closeAfterStart = append(closeAfterStart, pr)
	} // else the child's stdin is the null device: never the host's
	return closeAfterStart, nil
}

// startError is the error of a run whose root process did not start.
func (r *run) startError(err error) error {
	if errors.Is(err, proc.ErrUnavailable) {
		return containmentError(err, r.cfg.cgroupParent)
	}
	if le := exhaustedError(err); le != nil {
		return le
	}
	var lu *proc.LimitUnavailableError
	if errors.As(err, &lu) {
		return &limitUnavailableError{field: limitField(lu.Resource), err: lu, delegate: r.cfg.delegateErr}
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
		// Removed since the lookup, not executable, or a bad interpreter
		// line: the CLI is not installed properly.
		return fmt.Errorf("%w: starting %s: %w", invoker.ErrNotInstalled, r.path, err)
	}
	return fmt.Errorf("starting %s: %w", r.path, err)
}

// lookPath resolves the CLI's executable: a name on PATH, or a path, made
// absolute from the program's working directory (the CLI starts in the
// run's Workdir, where a relative path would name another file). A missing
// binary is an error that matches ErrNotInstalled (and exec.ErrNotFound
// when looked up on PATH).
func (e *engine) lookPath() (string, error) {
	bin := e.cfg.binary
	if bin == "" {
		bin = e.b.Binary()
	}
	hint := e.b.InstallHint()
	if !strings.ContainsRune(bin, filepath.Separator) && !strings.ContainsRune(bin, '/') {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("%w: %q is not on PATH; install it with `%s` or set its path with invoker.Options.Binary (%w)", invoker.ErrNotInstalled, bin, hint, err)
		}
		return p, nil
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("%w: %s; install it with `%s` or fix the path given in invoker.Options.Binary (%w)", invoker.ErrNotInstalled, bin, hint, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%w: %s is a directory, not the CLI's executable", invoker.ErrNotInstalled, bin)
	}
	if _, err := exec.LookPath(bin); err != nil {
		return "", fmt.Errorf("%w: %s is not executable (%w)", invoker.ErrNotInstalled, bin, err)
	}
	return bin, nil
}
