package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/clinvoke/clinvoke/internal/pipe"
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// startTree creates the run's streams and starts the root process.
func (r *run) startTree() (err error) {
	cfg := r.cfg
	want, err := cfg.want()
	if err != nil {
		return err
	}
	marker := newMarker()
	attr := &proc.Attr{
		Path:      r.path,
		Args:      append([]string{r.path}, r.cmd.Args...),
		Env:       environ(r.cfg, r.cmd, r.env, marker, r.tel.environ()),
		Dir:       r.workdir,
		Marker:    marker,
		Subreaper: cfg.subreaper,
		Logger:    r.log,

		Containment:  want,
		CgroupParent: cfg.cgroupParent,
	}
	if err := commandNoNUL(r.cmd, attr.Env); err != nil {
		return err
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
		master, tty, err := pipe.OpenPTY()
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
	if r.input != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		attr.Stdin, r.stdin = pr, pw
		closeAfterStart = append(closeAfterStart, pr)
	} // else the child's stdin is the null device: never the host's

	t, err := proc.Start(attr)
	if errors.Is(err, proc.ErrUnavailable) {
		return containmentError(err, cfg.cgroupParent)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			// Removed since the lookup, not executable, or a bad
			// interpreter line: the CLI is not installed properly.
			return fmt.Errorf("%w: starting %s: %w", invoker.ErrNotInstalled, r.path, err)
		}
		return fmt.Errorf("starting %s: %w", r.path, err)
	}
	r.tree = t
	r.res.Containment = level(t.Containment())
	r.tel.started(t.Pid(), r.res.Containment)
	r.stdoutW = &watchedFile{f: r.stdout, r: r, pty: r.pty != nil}
	r.stderrW = &watchedFile{f: r.stderr, r: r}
	r.log.Debug("started", "pid", t.Pid(), "path", r.path, "args", len(attr.Args)-1, "pty", cfg.pty, "containment", r.res.Containment)
	return nil
}
