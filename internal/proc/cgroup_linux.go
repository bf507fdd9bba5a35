//go:build linux

package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	minfo "github.com/clinvoke/clinvoke/internal/mountinfo"
)

// Cgroup containment. Each host process that starts trees gets one cgroup
// of its own, its home, named clinvoke-PIDNS-PID-STARTTIME, under the parent
// (Attr.CgroupParent, or the host's own cgroup); each tree gets a child of
// the home, rN, and its root is started directly inside it. The home holds
// no process, so the "no internal processes" rule never applies to it, and
// no controller is enabled anywhere: cgroup.kill, cgroup.events and
// cgroup.freeze are core files, present without any. A keeper process
// (keeper_linux.go) kills the home's trees when the host dies. A home whose
// host is gone (crashed before its keeper could clean up, or its keeper
// killed too) is killed and removed when another host opens its own home in
// the same parent.
//
// The home is also where the trees' cgroup v2 controllers come from (see
// controllers_linux.go), and the cgroup that SetHostLimits limits.

// homes caches the home of each parent ("" is the default parent).
var homes struct {
	mu sync.Mutex
	m  map[string]*homeResult
}

type homeResult struct {
	home *cgroupHome
	err  error
}

// cgroupHome is the host's cgroup under one parent.
type cgroupHome struct {
	dir    string
	seq    atomic.Uint64
	keeper *keeper
	// ctl are the controllers the home gives its trees' cgroups, and
	// peaks those of them whose peak file (memory.peak, pids.peak) the
	// kernel keeps. Set when the home is opened (or by
	// DelegateOwnCgroup, under homes.mu).
	ctl, peaks ctlSet

	poolMu    sync.Mutex
	pool      []*runCgroup // empty cgroups kept for reuse (see release)
	poolTimer *time.Timer
	poolLog   *slog.Logger

	check startCheck // whether the kernel starts processes in its cgroups
}

// homeFor returns the home under parent ("" for the default), making it
// and its keeper on first use. A failure that will not go away (no cgroup
// v2, no permission) is remembered; others are tried again next time.
func homeFor(parent string) (*cgroupHome, error) {
	homes.mu.Lock()
	defer homes.mu.Unlock()
	if r, ok := homes.m[parent]; ok {
		if r.err != nil {
			return nil, r.err
		}
		if err := r.home.keeper.ensure(); err != nil {
			return nil, err
		}
		return r.home, nil
	}
	h, err := openHome(parent)
	if err != nil && !lasting(err) {
		return nil, err
	}
	if homes.m == nil {
		homes.m = map[string]*homeResult{}
	}
	homes.m[parent] = &homeResult{h, err}
	return h, err
}

// lasting reports whether err will be the same on the next try.
func lasting(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, unix.EROFS) || errors.Is(err, unix.ENOTSUP) ||
		errors.Is(err, errNotCgroup2) || errors.Is(err, errNoKill)
}

var (
	errNotCgroup2 = errors.New("not a cgroup v2 directory")
	errNoKill     = errors.New("the kernel has no cgroup.kill (Linux 5.14 or newer is needed)")
)

// openHome makes the host's home under parent, removes the homes of dead
// hosts there and starts the keeper.
func openHome(parent string) (*cgroupHome, error) {
	explicit := parent != ""
	if parent == "" {
		p, err := ownCgroup()
		if err != nil {
			return nil, err
		}
		parent = p
	}
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return nil, fmt.Errorf("cgroup parent %s: %w", parent, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("cgroup parent %s: %w", parent, errNotCgroup2)
	}
	host, err := readStat(int32(os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("reading the host's start time: %w", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("clinvoke-%d-%d-%d", pidNamespace(), host.pid, host.start))
	if err := unix.Mkdir(dir, 0o755); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("making a cgroup in %s: %w", parent, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("cgroup %s: %w", dir, errNoKill)
	}
	removeDeadHomes(parent, dir)
	h := &cgroupHome{dir: dir, keeper: &keeper{home: dir, v1: theV1().homes()}}
	h.ctl = setUpControllers(parent, dir, explicit)
	h.peaks = peakFiles(dir) & h.ctl
	ensureReserve()
	if err := h.keeper.ensure(); err != nil {
		os.Remove(dir)
		return nil, err
	}
	return h, nil
}

// ownCgroup returns the directory of the host's own cgroup v2: the
// cgroup above it when the host is in the leaf DelegateOwnCgroup made.
func ownCgroup() (string, error) {
	dir, err := hostCgroup()
	if err == nil && filepath.Base(dir) == hostLeaf {
		dir = filepath.Dir(dir)
	}
	return dir, err
}

// hostCgroup returns the directory of the cgroup v2 the host is in.
func hostCgroup() (string, error) {
	mount, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			rel, ok := strings.CutPrefix(path, root)
			if !ok || strings.HasSuffix(path, " (deleted)") {
				return "", fmt.Errorf("the host's cgroup %s is not under the cgroup2 mount's root %s: %w", path, root, fs.ErrNotExist)
			}
			return filepath.Join(mount, rel), nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 line in /proc/self/cgroup: %w", fs.ErrNotExist)
}

// cgroup2Mount returns where the cgroup2 file system is mounted, and the
// cgroup path at that mount point (not "/" when a subtree is mounted).
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return minfo.Unescape(f[4]), minfo.Unescape(f[3]), nil
	}
	return "", "", fmt.Errorf("no cgroup2 file system is mounted: %w", fs.ErrNotExist)
}

// removeDeadHomes kills and removes the homes in parent whose host is no
// longer running. A home that cannot be emptied within a second is left
// for the next host.
func removeDeadHomes(parent, own string) {
	for _, dir := range deadHomes(parent, own) {
		c := &runCgroup{dir: dir}
		c.kill()
		c.awaitEmpty(time.Now().Add(time.Second))
		c.removeAll()
	}
}

// deadHomes returns the homes in parent, in cgroup v2 or a v1 hierarchy,
// whose host is no longer running, leaving out own.
func deadHomes(parent, own string) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var dead []string
	for _, e := range entries {
		var ns, start uint64
		var pid int32
		dir := filepath.Join(parent, e.Name())
		if !e.IsDir() || dir == own {
			continue
		}
		if n, _ := fmt.Sscanf(e.Name(), "clinvoke-%d-%d-%d", &ns, &pid, &start); n != 3 || ns != pidNamespace() {
			// Not a home, or the home of a host in another PID
			// namespace, whose pid means nothing here.
			continue
		}
		if p, err := readStat(pid); err == nil && p.start == start {
			continue // its host lives
		} else if err != nil && !gone(err) {
			continue // cannot tell
		}
		dead = append(dead, dir)
	}
	return dead
}

// pidNamespace returns the inode number of the host's PID namespace (0 if
// unknown). A home's name carries it: a pid identifies a host only within
// its namespace, and hosts in several namespaces (containers sharing a
// cgroup tree) may use the same parent.
var pidNamespace = sync.OnceValue(func() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
})

// peakFiles returns the controllers of dir whose peak file exists.
func peakFiles(dir string) ctlSet {
	var s ctlSet
	for _, f := range []struct {
		c    ctlSet
		name string
	}{{ctlMemory, "memory.peak"}, {ctlPids, "pids.peak"}} {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			s |= f.c
		}
	}
	return s
}

// newRun makes the cgroup of one tree. It holds no descriptor: the
// directory is opened for the clone only (openDir), and the files Kill
// needs are opened when it needs them, from the host's reserve when its
// descriptors have run out (see withFile).
func (h *cgroupHome) newRun() (*runCgroup, error) {
	if c := h.reuse(); c != nil {
		c.reused = true
		return c, nil
	}
	dir := filepath.Join(h.dir, "r"+strconv.FormatUint(h.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the tree's cgroup: %w", err)
	}
	return &runCgroup{home: h, dir: dir}, nil
}

// runCgroup is the cgroup of one tree.
type runCgroup struct {
	home *cgroupHome // nil for another host's
	dir  string
	// reused says that the cgroup held an earlier tree (see release): its
	// cpu.stat counts that tree's CPU time too.
	reused bool
	// killed says that cgroup.kill was written: the kernel (seen on
	// Linux 6.18) then kills every process later started into the cgroup
	// with CLONE_INTO_CGROUP, so such a cgroup is never reused.
	killed bool
	// eventsFd is cgroup.events, opened ahead by Tree.Prepare when
	// eventsHeld (see holdEvents); guarded by treeSys.mu.
	eventsFd   int
	eventsHeld bool
}

// openDir opens the cgroup's directory, for CLONE_INTO_CGROUP; the caller
// closes it once the root has started.
func (c *runCgroup) openDir() (int, error) {
	fd, err := unix.Open(c.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: c.dir, Err: err}
	}
	return fd, nil
}

// base returns the cgroup's path below the parent: home/rN.
func (c *runCgroup) base() string {
	return filepath.Join(filepath.Base(filepath.Dir(c.dir)), filepath.Base(c.dir))
}

// populated reads the populated flag of cgroup.events: whether any
// process is left in the cgroup or below it. It says yes when it cannot
// tell.
func (c *runCgroup) populated() bool {
	var buf [128]byte
	n := 0
	var err error
	if c.eventsHeld {
		n, err = unix.Pread(c.eventsFd, buf[:], 0)
	} else {
		err = withFile(filepath.Join(c.dir, "cgroup.events"), unix.O_RDONLY, func(fd int) (err error) {
			n, err = unix.Read(fd, buf[:])
			return err
		})
	}
	if err != nil {
		return !errors.Is(err, unix.ENOENT)
	}
	b := buf[:n]
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(v) != "0"
		}
	}
	return true
}

// kill sends SIGKILL to every process in the cgroup and below it. The
// kernel also kills what is forked while it does so.
func (c *runCgroup) kill() error {
	c.killed = true
	return withFile(filepath.Join(c.dir, "cgroup.kill"), unix.O_WRONLY, func(fd int) error {
		_, err := unix.Write(fd, []byte("1"))
		return err
	})
}

// killMember sends SIGKILL to pid if, once a pidfd is open for it, it is
// a member of the cgroup (or below it) and, for a sweep, a live one that
// spare does not spare (spare is nil for a Kill, which spares none and
// needs no start time). The checks read the process's state after the
// pidfd is open, so if the pid was reused meanwhile, the pidfd names a
// process that has exited and the signal reaches no one. It returns the
// victim, held by its pidfd, or nil when it sent nothing; the error says
// that it cannot tell (the state cannot be read: descriptors exhausted,
// say) or that the signal was refused (EPERM).
func (c *runCgroup) killMember(pid int32, spare *Baseline) (*victim, error) {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		if gone(err) {
			return nil, nil
		}
		return nil, err
	}
	v := &victim{pid: pid, fd: fd}
	skip := func(err error) (*victim, error) {
		v.close()
		if err != nil && gone(err) {
			err = nil
		}
		return nil, err
	}
	if spare != nil {
		p, err := readStat(pid)
		if err != nil {
			return skip(err)
		}
		if p.zombie() || spared(spare, pid, p.start, fd) {
			return skip(nil)
		}
		v.start = p.start
	}
	if in, err := c.member(pid); err != nil || !in {
		return skip(err)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return skip(err)
	}
	return v, nil
}

// member reports whether pid is in the cgroup or below it, as
// /proc/PID/cgroup says; the error says it cannot tell.
func (c *runCgroup) member(pid int32) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cgroup")
	if err != nil {
		return false, err
	}
	want := "/" + c.base()
	for line := range strings.SplitSeq(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok && (strings.HasSuffix(path, want) || strings.Contains(path, want+"/")) {
			return true, nil
		}
	}
	return false, nil
}

// pids returns the processes in the cgroup and below it, read from
// cgroup.procs.
func (c *runCgroup) pids() []int32 {
	var pids []int32
	for _, dir := range c.tree() {
		pids = appendPids(pids, filepath.Join(dir, "cgroup.procs"))
	}
	return pids
}

// tree returns the cgroup's directory and those of the cgroups below it,
// parents first. It lists directories only when cgroup.stat says there are
// descendants.
func (c *runCgroup) tree() []string {
	dirs := []string{c.dir}
	if b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.stat")); err == nil && bytes.Contains(b, []byte("nr_descendants 0\n")) {
		return dirs
	}
	filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != c.dir {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}

// awaitEmpty waits until the cgroup is not populated or until deadline,
// watching cgroup.events, and reports whether it is empty.
func (c *runCgroup) awaitEmpty(deadline time.Time) bool {
	if !c.populated() {
		return true // the usual case: no watch to set up
	}
	w, err := watchEvents(filepath.Join(c.dir, "cgroup.events"))
	if err != nil {
		// No inotify (instances exhausted, say): look again now and then.
		for !time.Now().After(deadline) {
			if !c.populated() {
				return true
			}
			time.Sleep(time.Millisecond)
		}
		return !c.populated()
	}
	defer w.close()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if !c.populated() {
			return true
		}
		select {
		case <-w.c:
		case <-timer.C:
			return !c.populated()
		}
	}
}

// removeAll removes the cgroup and any cgroups made below it, deepest
// first. A cgroup that still holds a process cannot be removed (EBUSY).
func (c *runCgroup) removeAll() error {
	err := unix.Rmdir(c.dir)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EBUSY && err != unix.ENOTEMPTY {
		return &fs.PathError{Op: "rmdir", Path: c.dir, Err: err}
	}
	dirs := c.tree() // EBUSY: descendants, or processes
	var first error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && err != unix.ENOENT && first == nil {
			first = &fs.PathError{Op: "rmdir", Path: dirs[i], Err: err}
		}
	}
	return first
}

// probe is Probe on Linux.
func probe(want Containment, parent string) (Containment, error) {
	if want == Tracking {
		return Tracking, nil
	}
	h, err := homeFor(parent)
	if err == nil {
		err = h.startable()
	}
	if err != nil {
		return Tracking, &UnavailableError{Level: Cgroup, Err: err}
	}
	return Cgroup, nil
}
