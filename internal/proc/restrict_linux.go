//go:build linux

package proc

import "os"

// forkOf returns the function that forks the root as a and attr say, and
// whether it restricts its thread first (Attr.Restrict): the caller then
// retires that thread. A restricted root inherits none of the program's
// descriptors but attr's files (hideStray).
func forkOf(a *Attr, args []string, attr *os.ProcAttr) (fork func() (*os.Process, error), restricted bool) {
	plain := func() (*os.Process, error) { return os.StartProcess(a.Path, args, attr) }
	if a.Restrict == nil {
		return plain, false
	}
	return func() (*os.Process, error) {
		strayMu.Lock()
		defer strayMu.Unlock()
		// Before Restrict: the ceiling may not cover /proc.
		restore, err := hideStray()
		if err != nil {
			return nil, err
		}
		defer restore()
		if err := a.Restrict(); err != nil {
			return nil, err
		}
		return plain()
	}, true
}

// onRetiredThread runs fork on a locked OS thread of its own, which ends
// with its goroutine, and waits for it.
func onRetiredThread(fork func() (*os.Process, error)) (*os.Process, error) {
	type forked struct {
		p   *os.Process
		err error
	}
	c := make(chan forked, 1)
	goLocked(func() bool {
		p, err := fork()
		c <- forked{p, err}
		return true
	})
	f := <-c
	return f.p, f.err
}

// startedRestricted lowers the v1 task limit of a tree whose forking
// thread was restricted, and so could not (see v1Run.started).
func (l *treeLimits) startedRestricted() {
	if l.restricted {
		l.v1.started()
	}
}
