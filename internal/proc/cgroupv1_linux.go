//go:build linux

package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	minfo "github.com/clinvoke/clinvoke/internal/mountinfo"
)

// Cgroup v1 controllers, for hybrid hosts: the unified (v2) hierarchy holds
// the trees' membership (cgroup.kill, cgroup.events) but no controller,
// and the memory, pids, cpu and cpuacct controllers are v1 hierarchies of
// their own. A tree that needs one of them gets a cgroup in it, rN, below
// the host's home there (clinvoke-PIDNS-PID-STARTTIME, below the host's
// own cgroup in that hierarchy, as in v2), holding its limits and its
// accounting.
//
// Cgroup v1 has no CLONE_INTO_CGROUP. The root is still born in its v1
// cgroups: a child starts in the cgroups of the thread that forked it, so
// the fork happens on a locked OS thread that first moves itself into the
// tree's v1 cgroups and moves back out right after (see v1Run.join). Other
// ways fall short: moving the root after the fork lets it run, allocate
// and fork outside its limits until the move (and in v1 the memory it
// charged stays where it was); a trampoline that waits to be moved before
// it execs costs a process and a round trip per start, and takes from the
// caller the errors of the exec (a missing or bad executable would be the
// trampoline's exit status). That the root is charged from its first
// instruction was checked on Linux 6.18: a root that allocates 200 MiB at
// once under a limit of 100 MiB is OOM-killed with the tree's peak at the
// limit (TestLimitsMemoryKillsRoot). Writing "0" to a v1
// tasks file moves the writing thread alone, which the kernel does without
// the machine-wide lock (cgroup_threadgroup_rwsem) that a move of another
// thread or process takes for writing, and so without waiting for an RCU
// grace period: measured on Linux 6.18, 20 to 100 µs per hierarchy, where
// writing the thread's id takes 8 to 16 ms on an idle machine.
//
// While the thread is in the tree's cgroups it is no threat to the host,
// provided it is not the process's main thread (see goLocked). Memory is
// charged to the owner of the address space, the main thread, which stays
// in the host's memory cgroup, so the host's pages are never charged to
// the tree; and a memory cgroup's OOM killer weighs the thread-group
// leaders in it, which the thread is not. Both were checked on Linux 6.18:
// a host holding 300 MiB whose forking thread stayed in a 100 MiB tree for
// a second while the tree allocated 200 MiB lost nothing, and the OOM
// killer listed and killed the tree's process alone
// (TestLimitsHostSafeWhileForking); when the forking thread was the main
// thread, the host's own allocations were charged to the tree and waited
// on its OOM for ever, and a host whose main thread was in a cgroup at its
// limit was the process the OOM killer took.
//
// The pids controller does count the thread: a tree's task limit is
// raised by one while it is there (see v1Run.apply). A thread that cannot
// move back out is never used again: its goroutine exits locked, so the
// runtime ends the thread.

// The v1 controllers, by index.
const (
	v1Memory = iota
	v1Pids
	v1CPU
	v1CPUAcct
	numV1
)

var v1Names = [numV1]string{"memory", "pids", "cpu", "cpuacct"}

// v1Need is a set of v1 controllers, a bit per index.
type v1Need uint8

func (n v1Need) has(i int) bool { return n&(1<<i) != 0 }

// A v1Hier is a cgroup v1 hierarchy holding one or more of the controllers
// (cpu and cpuacct are often mounted together).
type v1Hier struct {
	mount string // the mount point
	root  string // the cgroup path at the mount point ("/" unless a subtree is mounted)
	own   string // the host's cgroup in it, a directory
	home  string // the host's home in it, a directory; "" when err is set
	err   error  // why it cannot be used
	pool  v1Pool // the trees' cgroups made ahead, in home
	// reads are the files of a tree's cgroup here that its figures read
	// (see controller.readsV1), looked up in the cgroups made ahead.
	reads []string
	// back is the tasks file of own, open for writing for the host's
	// life: a forking thread moves back through it (see join), with no
	// descriptor opened per tree. -1 when it could not be opened.
	back int
}

// v1Host is what the host has of cgroup v1: a hierarchy per controller
// (nil where the controller is not mounted; co-mounted controllers share
// one) and the homes made there.
type v1Host struct {
	hier [numV1]*v1Hier
	seq  atomic.Uint64

	mu sync.Mutex // guards limits
	// limits are the home's limits (SetHostLimits, MemoryMax only): every
	// tree is then placed in the limited memory hierarchy.
	limits Limits
}

var v1State struct {
	mu sync.Mutex
	h  *v1Host
}

// theV1 returns the host's cgroup v1 hierarchies, finding them and making
// the homes on first use. A hierarchy that cannot be used says why.
func theV1() *v1Host {
	v1State.mu.Lock()
	defer v1State.mu.Unlock()
	if v1State.h == nil {
		v1State.h = openV1(v1Root)
	}
	return v1State.h
}

// v1IfOpen returns the host's v1 hierarchies if something has used them,
// else nil.
func v1IfOpen() *v1Host {
	v1State.mu.Lock()
	defer v1State.mu.Unlock()
	return v1State.h
}

// v1Root is the directory under which v1 hierarchies are looked for:
// every hierarchy mounted there (a hierarchy mounted again elsewhere, by a
// container runtime say, is not the host's).
const v1Root = "/sys/fs/cgroup"

// openV1 finds the v1 hierarchies mounted under under, and makes the
// host's home in each.
func openV1(under string) *v1Host {
	h := &v1Host{}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return h
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return h
	}
	h.hier = v1Hierarchies(mi, cg, under)
	host, err := readStat(int32(os.Getpid()))
	if err != nil {
		for _, x := range h.hier {
			if x != nil {
				x.err = fmt.Errorf("reading the host's start time: %w", err)
			}
		}
		return h
	}
	name := fmt.Sprintf("clinvoke-%d-%d-%d", pidNamespace(), host.pid, host.start)
	done := map[*v1Hier]bool{}
	for _, x := range h.hier {
		if x == nil || done[x] || x.err != nil {
			continue
		}
		done[x] = true
		dir := filepath.Join(x.own, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			x.err = fmt.Errorf("making a cgroup in %s: %w", x.own, err)
			continue
		}
		x.home = dir
		x.reads = h.readsIn(x)
		x.back, err = unix.Open(filepath.Join(x.own, "tasks"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			x.back = -1
		}
		removeDeadV1Homes(x.own, dir)
	}
	return h
}

// v1Hierarchies parses mountinfo and the host's /proc/self/cgroup into
// the v1 hierarchies of the controllers, mounted under under.
func v1Hierarchies(mountinfo, cgroup []byte, under string) (hier [numV1]*v1Hier) {
	own := cgroupPaths(cgroup)
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// 30 24 0:27 / /sys/fs/cgroup/memory rw,... shared:12 - cgroup cgroup rw,memory
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || qf[0] != "cgroup" {
			continue
		}
		mount, root := minfo.Unescape(pf[4]), minfo.Unescape(pf[3])
		if under != "" && filepath.Dir(mount) != filepath.Clean(under) {
			continue
		}
		var x *v1Hier
		for opt := range strings.SplitSeq(qf[2], ",") {
			for i, name := range v1Names {
				if opt != name || hier[i] != nil {
					continue
				}
				if x == nil {
					x = &v1Hier{mount: mount, root: root}
					path, ok := own[name]
					rel, inside := strings.CutPrefix(path, root)
					switch {
					case !ok:
						x.err = fmt.Errorf("no %s line in /proc/self/cgroup", name)
					case !inside:
						x.err = fmt.Errorf("the host's %s cgroup %s is outside the mount's root %s", name, path, root)
					default:
						x.own = filepath.Join(mount, rel)
					}
				}
				hier[i] = x
			}
		}
	}
	return hier
}

// cgroupPaths parses a /proc/PID/cgroup file into the cgroup path of each
// v1 controller.
func cgroupPaths(b []byte) map[string]string {
	paths := map[string]string{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		// 4:memory:/user.slice or 2:cpu,cpuacct:/
		f := strings.SplitN(string(line), ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			paths[c] = f[2]
		}
	}
	return paths
}

// removeDeadV1Homes removes the v1 homes in parent whose host is no longer
// running, killing what is left in them (a tree of a host that died
// without a keeper: tracking level).
func removeDeadV1Homes(parent, own string) {
	for _, dir := range deadHomes(parent, own) {
		runs, _ := os.ReadDir(dir)
		for _, r := range runs {
			if r.IsDir() {
				emptyV1(filepath.Join(dir, r.Name()), time.Now().Add(time.Second))
			}
		}
		unix.Rmdir(dir)
	}
}

// emptyV1 kills every process in the v1 cgroup dir (each through a pidfd
// checked to be in it) and removes the empty cgroups below it (a home's
// cgroups made ahead, see v1Pool) until it is empty or deadline passes,
// then removes it. A v1 cgroup.procs lists a process when any of its threads is in the
// cgroup: the host itself, with a forking thread that could not move back
// out (see goLocked), is never signalled.
func emptyV1(dir string, deadline time.Time) {
	host := int32(os.Getpid())
	for {
		if unix.Rmdir(dir) != unix.EBUSY || time.Now().After(deadline) {
			return
		}
		// A home's cgroups made ahead (see v1Pool) are empty.
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				if e.IsDir() {
					unix.Rmdir(filepath.Join(dir, e.Name()))
				}
			}
		}
		for _, pid := range listPids(filepath.Join(dir, "cgroup.procs")) {
			if pid == host {
				continue
			}
			fd, err := unix.PidfdOpen(int(pid), 0)
			if err != nil {
				continue
			}
			if slices.Contains(listPids(filepath.Join(dir, "cgroup.procs")), pid) {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			unix.Close(fd)
		}
		time.Sleep(time.Millisecond)
	}
}

// usable returns the hierarchy of controller i, or why it cannot be used.
func (h *v1Host) usable(i int) (*v1Hier, error) {
	x := h.hier[i]
	switch {
	case x == nil:
		return nil, fmt.Errorf("no cgroup v1 %s hierarchy is mounted", v1Names[i])
	case x.err != nil:
		return nil, x.err
	}
	return x, nil
}

// homes returns the home directories made, one per hierarchy.
func (h *v1Host) homes() []string {
	var out []string
	done := map[*v1Hier]bool{}
	for _, x := range h.hier {
		if x != nil && x.home != "" && !done[x] {
			done[x] = true
			out = append(out, x.home)
		}
	}
	return out
}

// hostNeed returns the controllers every tree must be placed in because
// the home has limits there.
func (h *v1Host) hostNeed() v1Need {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n v1Need
	if h.limits.MemoryMax > 0 {
		n |= 1 << v1Memory
	}
	return n
}

// setLimits sets the home's limits (SetHostLimits on a v1 host).
func (h *v1Host) setLimits(l Limits) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.MemoryMax != 0 || h.limits.MemoryMax != 0 {
		x, err := h.usable(v1Memory)
		if err != nil {
			return err
		}
		if err := setV1Memory(x.home, l.MemoryMax); err != nil {
			return err
		}
	}
	h.limits = l
	return nil
}

// A v1Run is a tree's cgroups in the v1 hierarchies it needs.
type v1Run struct {
	// dir holds the tree's cgroup per controller; "" where it has none.
	// Co-mounted controllers share a directory.
	dir [numV1]string
	// tasks is the tree's task limit (0: none): the limit written is one
	// more while the forking thread is in the cgroup.
	tasks int64
	// peakBefore is the most memory.max_usage_in_bytes read before the
	// last reset (see mark): the whole run's peak is the larger of it and
	// the file.
	peakBefore atomic.Int64
	// forked, if not nil, is called after the fork while the forking
	// thread is still in the tree's cgroups (a test's hook, see hooks).
	forked func()
	// hiers are the hierarchies the tree took its cgroups from, whose
	// pools are refilled once the root has started; name names the
	// cgroups made for them.
	hiers []*v1Hier
	name  func() string
}

// newRun gives the tree cgroups in the hierarchies of need, made ahead
// where the hierarchy has some ready (see v1Pool).
func (h *v1Host) newRun(need v1Need) (*v1Run, error) {
	r := &v1Run{name: h.runName}
	made := map[*v1Hier]string{}
	for i := range numV1 {
		if !need.has(i) {
			continue
		}
		x, err := h.usable(i)
		if err != nil {
			r.remove()
			return nil, err
		}
		dir, ok := made[x]
		if !ok {
			dir, err = x.take(h.runName)
			if err != nil {
				r.remove()
				return nil, fmt.Errorf("making the tree's v1 %s cgroup: %w", v1Names[i], err)
			}
			made[x] = dir
			r.hiers = append(r.hiers, x)
		}
		r.dir[i] = dir
	}
	return r, nil
}

// has reports whether the tree has a cgroup of v1 controller i (r may be
// nil: none).
func (r *v1Run) has(i int) bool { return r != nil && r.dir[i] != "" }

// dirs returns the tree's distinct v1 directories.
func (r *v1Run) dirs() []string {
	var out []string
	for _, d := range r.dir {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// apply writes the limits of l that the tree's v1 cgroups hold, before
// the root starts: memory (and memory+swap), tasks (plus one for the
// forking thread, see join), CPU quota.
func (r *v1Run) apply(l Limits) error {
	for _, c := range controllers {
		if err := c.applyV1(r, l); err != nil {
			return err
		}
	}
	return nil
}

// join moves the calling thread, which must be locked to its goroutine,
// into the tree's v1 cgroups, and returns leave, which moves it back to
// the host's cgroups (where the host was when it first used cgroup v1).
// A child the thread forks in between is born in the tree's cgroups.
// While the thread is in the tree's memory cgroup, the OOM killers that
// could pick the host are held off (see the top of this file). The
// thread starts in the host's cgroups: a thread the runtime makes while
// another is locked is made by one that never joins (Go's template
// thread), and a thread that could not leave is retired.
func (r *v1Run) join() (leave func() error, err error) {
	h := theV1()
	var in []*v1Hier
	leave = func() error {
		if r.forked != nil {
			r.forked()
		}
		var first error
		for _, x := range in {
			var err error = unix.EBADF
			if x.back >= 0 {
				_, err = unix.Write(x.back, []byte("0"))
			}
			if err != nil && first == nil {
				first = fmt.Errorf("moving the forking thread back to %s: %w", x.own, err)
			}
		}
		return first
	}
	for i, d := range r.dir {
		x := h.hier[i]
		if d == "" || slices.Contains(in, x) {
			continue
		}
		if err := writeFile(filepath.Join(d, "tasks"), "0"); err != nil {
			if lerr := leave(); lerr != nil {
				err = errors.Join(err, lerr)
			}
			return nil, fmt.Errorf("moving the forking thread into %s: %w", d, err)
		}
		in = append(in, x)
	}
	return leave, nil
}

// started lowers the task limit to the tree's own once the forking thread
// has left, and has the cgroups the tree took made again for the next
// trees, off their start path (see v1Pool).
func (r *v1Run) started() error {
	for _, x := range r.hiers {
		x.refill(r.name)
	}
	if r.tasks > 0 {
		return setTasks(r.dir[v1Pids], r.tasks)
	}
	return nil
}

// remove removes the tree's v1 cgroups. One that still holds a process
// (a tracking-level tree's escapee) is killed empty first, for at most a
// second.
func (r *v1Run) remove() error {
	var first error
	for _, d := range r.dirs() {
		err := unix.Rmdir(d)
		if err == unix.EBUSY {
			emptyV1(d, time.Now().Add(time.Second))
			err = unix.Rmdir(d)
		}
		if err != nil && err != unix.ENOENT && first == nil {
			first = &fs.PathError{Op: "rmdir", Path: d, Err: err}
		}
	}
	return first
}

// onLockedThread runs f on a locked OS thread of its own, moved into the
// tree's v1 cgroups for f's time (see join), and waits for f. The thread
// leaves the cgroups after f, while the caller goes on (the start path
// does not wait for the moves back), unless the tree has a task limit,
// which is lowered once the thread has left (see started) before the
// caller goes on. If the thread cannot leave, it is retired with its
// goroutine. A restricted thread (see Attr.Restrict) is retired, and
// cannot lower the task limit: Start does (see startedRestricted).
func (r *v1Run) onLockedThread(f func(), restricted bool) error {
	errc := make(chan error, 1)
	goLocked(func() (retire bool) {
		leave, err := r.join()
		if err != nil {
			errc <- err
			return false
		}
		f()
		if r.tasks == 0 || restricted {
			errc <- nil
		}
		retire = leave() != nil || restricted
		if !restricted {
			r.started()
		}
		if r.tasks != 0 && !restricted {
			errc <- nil
		}
		return retire
	})
	return <-errc
}

func (r *v1Run) run() *v1Run { return r }

// forkHere is v1Placement's forkHere: start runs on the calling thread
// moved into r (see join); leave moves it back and, unless the thread is
// restricted, lowers the task limit (see started).
func (r *v1Run) forkHere(start func() (*os.Process, error), restricted bool) (p *os.Process, err error, leave func() error) {
	back, err := r.join()
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err), func() error { return nil }
	}
	p, err = start()
	return p, err, func() error {
		err := back()
		if !restricted {
			r.started()
		}
		return err
	}
}

// forkAside is v1Placement's forkAside: fork runs on a locked thread
// moved into r (see onLockedThread).
func (r *v1Run) forkAside(fork func() (*os.Process, error), restricted bool) (p *os.Process, err error) {
	if jerr := r.onLockedThread(func() { p, err = fork() }, restricted); jerr != nil {
		return nil, fmt.Errorf("proc: %w", jerr)
	}
	return p, err
}

// lowersOnLeave reports whether r has a task limit, which the forking
// thread lowers as it leaves (see started).
func (r *v1Run) lowersOnLeave() bool { return r.tasks > 0 }
