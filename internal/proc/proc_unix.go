//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// unixSignal maps a ladder step to its Unix signal.
func unixSignal(s Signal) (unix.Signal, error) {
	switch s {
	case Interrupt:
		return unix.SIGINT, nil
	case Terminate:
		return unix.SIGTERM, nil
	case Kill:
		return unix.SIGKILL, nil
	}
	return 0, fmt.Errorf("proc: unknown signal %d", int(s))
}

// signalGroup sends s to the process group pgid. A group that is already
// gone is not an error.
func signalGroup(pgid int, s Signal) error {
	sig, err := unixSignal(s)
	if err != nil {
		return err
	}
	if pgid <= 1 {
		return fmt.Errorf("proc: refusing to signal process group %d", pgid)
	}
	if err := unix.Kill(-pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("proc: signal group %d: %w", pgid, err)
	}
	return nil
}

// childFiles returns the root's descriptors 0, 1 and 2 (the null device
// where Attr leaves them nil) and the descriptor number, in the child, of
// Attr.TTY (appended as descriptor 3 when it is none of the three). The
// caller calls release after the process has started.
func childFiles(a *Attr) (files []*os.File, ctty int, release func(), err error) {
	var null *os.File
	release = func() {
		if null != nil {
			null.Close()
		}
	}
	files = []*os.File{a.Stdin, a.Stdout, a.Stderr}
	for i, f := range files {
		if f != nil {
			continue
		}
		if null == nil {
			null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return nil, 0, release, fmt.Errorf("proc: %w", err)
			}
		}
		files[i] = null
	}
	files = append(files, a.ExtraFiles...)
	ctty = -1
	if a.TTY != nil {
		for i, f := range files {
			if f == a.TTY || (f != nil && f.Fd() == a.TTY.Fd()) {
				ctty = i
				break
			}
		}
		if ctty < 0 {
			files = append(files, a.TTY)
			ctty = len(files) - 1
		}
	}
	return files, ctty, release, nil
}

// stateOf converts the root's wait status.
func stateOf(ps *os.ProcessState) State {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return State{Code: ps.ExitCode()}
	}
	if ws.Signaled() {
		return State{Code: -1, Signal: unix.SignalName(ws.Signal())}
	}
	return State{Code: ws.ExitStatus()}
}

// rootArgs returns the root's argv: Attr.Args, or the path alone.
func rootArgs(a *Attr) []string {
	if len(a.Args) == 0 {
		return []string{a.Path}
	}
	return a.Args
}

// sessionAttr returns what every root gets on Unix: a new session (and so
// a new process group), and Attr.TTY, descriptor ctty in the child, as its
// controlling terminal.
func sessionAttr(a *Attr, ctty int) *syscall.SysProcAttr {
	sys := &syscall.SysProcAttr{Setsid: true}
	if a.TTY != nil {
		sys.Setctty = true
		sys.Ctty = ctty
	}
	return sys
}
