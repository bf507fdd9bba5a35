//go:build linux

package proc

import "golang.org/x/sys/unix"

// hooks let a test watch and steer the work of the trees it starts. They
// reach a tree through Attr.tune, so each test sets them on its own trees
// (and on a scanner of its own): no test sees another's, whatever order
// the tests run in, in parallel too. The host's trees have none. A nil
// field does nothing.
type hooks struct {
	// scanner, if not nil, runs the tree's scans of /proc and records
	// its members every period, instead of the host's scanner: a test's
	// own, made by newScanner with hooks of its own (see scanHooks).
	scanner *scanner
	// killPid, if not nil, replaces kill(2) where Kill signals a process
	// by its pid: the root, and a member when no pidfd can be opened.
	killPid func(pid int, sig unix.Signal) error
	// forked, if not nil, is called after the root's fork while the
	// forking thread is still in the tree's cgroup v1 cgroups (tests
	// widen that window with it).
	forked func()
}

// scanner returns the scanner of the tree's scans and of its tracking:
// the host's, shared by all its trees, or a test's (see hooks).
func (s *treeSys) scanner() *scanner {
	if h := s.tune.hooks; h != nil && h.scanner != nil {
		return h.scanner
	}
	return theScanner()
}

// killPid sends sig to pid with kill(2), or through a test's hook.
func (s *treeSys) killPid(pid int, sig unix.Signal) error {
	if h := s.tune.hooks; h != nil && h.killPid != nil {
		return h.killPid(pid, sig)
	}
	return unix.Kill(pid, sig)
}
