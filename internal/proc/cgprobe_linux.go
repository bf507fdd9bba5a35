//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Whether the kernel lets the host start processes in its cgroups. Making
// a cgroup needs write access to its parent directory; starting a process
// in it (clone3 with CLONE_INTO_CGROUP) needs, by cgroup v2's delegation
// rules, write access to cgroup.procs of the nearest cgroup that holds both
// the host and the new cgroup. A user handed a cgroup (Attr.CgroupParent)
// but running outside it can do the first and not the second: the kernel
// refuses every start with EACCES, which os.StartProcess reports exactly as
// it reports an executable the user may not run. So the question is put to
// the kernel by a start that executes nothing: the probe's child is born in
// the cgroup, and its exec fails at once with ENOTDIR (the path runs
// through a cgroup's file), an error clone3 never returns. The answer is
// kept per home (that is, per parent); a start that fails at the cgroup
// level asks again, to tell a refusal from a program that cannot run.

// startCheck is a home's answer to whether its cgroups take processes.
type startCheck struct {
	mu    sync.Mutex
	known bool  // err is the kernel's lasting answer
	err   error // nil, or a reason matching ErrRefused
}

// startable reports why the kernel will not start processes in the
// home's cgroups (nil if it will), asking it the first time in a cgroup
// made for the question, which is then kept for the next tree.
func (h *cgroupHome) startable() error {
	h.check.mu.Lock()
	defer h.check.mu.Unlock()
	if h.check.known {
		return h.check.err
	}
	c, err := h.newRun()
	if err != nil {
		return err
	}
	defer h.release(c, true, loggerOf(nil))
	return h.check.ask(h, c)
}

// recheck asks the kernel again, with c (empty) after a start in it failed,
// and reports why it refuses, if it does: then the start failed for that.
func (h *cgroupHome) recheck(c *runCgroup) error {
	h.check.mu.Lock()
	defer h.check.mu.Unlock()
	return h.check.ask(h, c)
}

// ask starts the probe in c and keeps the answer unless it was a shortage
// of memory, processes or descriptors, which says nothing of the cgroup.
func (k *startCheck) ask(h *cgroupHome, c *runCgroup) error {
	path := filepath.Join(c.dir, "cgroup.procs", "start-probe")
	fd, err := c.openDir()
	if err != nil {
		return nil // ask again next time; the start will say what is wrong
	}
	defer unix.Close(fd)
	p, err := os.StartProcess(path, []string{"clinvoke-start-probe"}, &os.ProcAttr{
		Dir: "/",
		Env: []string{},
		Sys: &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	switch {
	case err == nil: // cannot happen: nothing is there to execute
		p.Kill()
		p.Wait()
		err = nil
	case errors.Is(err, unix.ENOTDIR):
		err = nil
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EINTR) ||
		errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE):
		return nil // ask again next time; let the start try meanwhile
	default:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "fork/exec" and the probe's path mean nothing here
		}
		err = refusal(filepath.Dir(h.dir), c.dir, err)
	}
	k.known, k.err = true, err
	return err
}

// refusal explains the kernel's refusal (errno) to start a process in the
// cgroup dir under parent.
func refusal(parent, dir string, errno error) error {
	why := ""
	switch {
	case errors.Is(errno, unix.EACCES) || errors.Is(errno, unix.EPERM):
		host, err := ownCgroup()
		if err != nil {
			break
		}
		if !within(host, parent) {
			why = fmt.Sprintf(": the host process runs in %s, outside the cgroup parent %s", host, parent)
		} else {
			why = fmt.Sprintf(": the host process, in %s, may not write cgroup.procs of %s", host, commonCgroup(host, dir))
		}
	case errors.Is(errno, unix.ENOSYS):
		why = ": a seccomp filter blocks clone3 (as the default profiles of older container runtimes do), or the kernel is older than 5.7"
	}
	return fmt.Errorf("%w %s (%w)%s", ErrRefused, dir, errno, why)
}

// within reports whether the cgroup directory dir is root or below it.
func within(dir, root string) bool {
	return dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
}

// commonCgroup returns the nearest directory that holds both a and b.
func commonCgroup(a, b string) string {
	for !within(b, a) {
		a = filepath.Dir(a)
	}
	return a
}
