//go:build linux

package proc

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tunables; variables so that tests can shorten them.
var (
	// killTimeout bounds Kill.
	killTimeout = 5 * time.Second
	// lastGrace is how long Kill waits, past its deadline, for the
	// processes it has just sent SIGKILL before it calls them survivors.
	lastGrace = 100 * time.Millisecond
	// signalScanTimeout bounds the snapshot Signal takes before signalling.
	signalScanTimeout = 250 * time.Millisecond
	// trackEvery is how often a Tree records its members while the root
	// runs (see treeSys.track).
	trackEvery = 300 * time.Millisecond
	// wedgedWait bounds how long a caller waits for a scan when the
	// scanner is wedged (see scanUntil).
	wedgedWait = 100 * time.Millisecond
	// rootExitWait bounds how long Kill waits for the root to be seen
	// exited once a scan found no live member.
	rootExitWait = 100 * time.Millisecond
	// reapWait bounds how long reap waits for a zombie to become
	// waitable.
	reapWait = 100 * time.Millisecond
	// maxPidfds bounds the pidfds one Kill holds open at once; victims
	// beyond it are signalled through a pidfd opened for each signal.
	maxPidfds = 256
)

// treeSys is the Linux state of a Tree.
type treeSys struct {
	proc      *os.Process
	done      chan struct{} // closed when the goroutine that forked has returned
	root      int32
	rootStart uint64 // the root's starttime; 0 if unknown
	marker    string
	subreaper bool
	host      int32
	hostPgid  int32
	waited    atomic.Bool
	trackDone chan struct{} // closed when track has returned
	// reapLate says that a Kill ended without a scan after its last
	// SIGKILL, so it could not reap what it killed; Wait tries again.
	reapLate atomic.Bool

	mu      sync.Mutex // serialises Kill
	knownMu sync.Mutex // guards known
	// known holds every member seen alive by a scan (pid → starttime), so
	// that later scans still find it after its parent links are gone.
	// Entries of processes that are gone (not even zombies) are dropped,
	// unless a process still bears their pid as session or group id.
	known map[int32]uint64
	// late holds the zombies Kill could not reap yet (see reap).
	late []procKey
	// applied is the sequence number of the newest snapshot applied to
	// known (see members).
	applied uint64
}

func start(a *Attr) (*Tree, error) {
	if err := checkAttr(a); err != nil {
		return nil, err
	}
	files, ctty, release, err := childFiles(a)
	defer release()
	if err != nil {
		return nil, err
	}
	if a.Subreaper {
		// Idempotent: setting it again changes nothing.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("proc: set child subreaper: %w", err)
		}
	}
	args := a.Args
	if len(args) == 0 {
		args = []string{a.Path}
	}
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if a.TTY != nil {
		sys.Setctty = true
		sys.Ctty = ctty
	}
	attr := &os.ProcAttr{Dir: a.Dir, Env: a.Env, Files: files, Sys: sys}

	t := &Tree{exited: make(chan struct{}), log: loggerOf(a.Logger), start: time.Now()}
	s := &t.sys
	s.done = make(chan struct{})
	s.marker = a.Marker
	s.subreaper = a.Subreaper
	s.host = int32(os.Getpid())
	s.hostPgid = int32(unix.Getpgrp())
	s.known = map[int32]uint64{}
	if s.marker != "" {
		// Before the fork, so that no scan can read a marked environment
		// without knowing the marker (see envResult).
		theScanner().register(s.marker)
	}
	started := make(chan error, 1)
	go s.run(a.Path, args, attr, t.exited, started)
	if err := <-started; err != nil {
		<-s.done
		if s.marker != "" {
			theScanner().unregister(s.marker)
		}
		return nil, err
	}
	t.pid = s.proc.Pid
	s.root = int32(t.pid)
	// The root cannot be reaped before Wait, so its stat is readable.
	if p, err := readStat(s.root); err == nil {
		s.rootStart = p.start
	}
	s.trackDone = make(chan struct{})
	go s.track(t.exited, t.log)
	t.log.Debug("proc: started", "pid", t.pid, "path", a.Path)
	return t, nil
}

// run forks the root and waits for it to exit without reaping it.
//
// The parent-death signal is sent when the thread that forked the child
// exits, not when the host process does; a goroutine's thread may exit
// whenever the runtime likes. So the fork happens on a locked thread, and
// the thread stays locked, blocked in waitid, until the root has exited.
// WNOWAIT leaves the root a zombie, so its pid and process-group id cannot
// be reused until Wait reaps it.
func (s *treeSys) run(path string, args []string, attr *os.ProcAttr, exited chan struct{}, started chan<- error) {
	defer close(s.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess(path, args, attr)
	if err != nil {
		started <- err
		return
	}
	s.proc = p
	started <- nil
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	close(exited)
}

// track records the tree's members into known every trackEvery while the
// root runs, through the shared scanner (parent links only, no
// environments, and only processes started after the root: cheap).
//
// A descendant that leaves the session with setsid and clears its
// environment (env -i, or a CLI's tool environment policy) can be found
// only by its parent links, which vanish when its parent exits; without
// these snapshots Kill, after a normal exit, would never have seen it. A
// process that does all that and outlives its parent within one period is
// still missed unless the host is its subreaper (see Kill).
//
// A scan that fails (descriptors exhausted for a moment, say) is logged
// and the next period tries again: stopping would leave every later
// descendant unrecorded for the rest of the run.
func (s *treeSys) track(exited <-chan struct{}, log *slog.Logger) {
	defer close(s.trackDone)
	tick := time.NewTicker(trackEvery)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return
		case <-tick.C:
		}
		sn, err, ok := scanUntil(math.MaxUint64, s.rootStart, exited, nil)
		if !ok {
			return // exited
		}
		if err != nil {
			log.Debug("proc: tracker scan failed", "pid", s.root, "err", err)
			continue
		}
		s.members(sn)
	}
}

// scanUntil waits for a scan until stop is closed or expired fires
// (either may be nil); ok is false when it stopped waiting. When the
// shared scanner is wedged (its running scan has outlasted a whole Kill: a
// read of /proc blocked in the kernel), it waits wedgedWait at most, so
// that each Kill does not wait its full deadline again. The scanner is
// shared, so a caller with a deadline must not wait on it for ever;
// waiting costs no goroutine (see scanner.join), so callers that give up
// leave nothing behind.
func scanUntil(minStart, freshFrom uint64, stop <-chan struct{}, expired <-chan time.Time) (sn *snapshot, err error, ok bool) {
	b, wedged := theScanner().join(minStart, freshFrom)
	var short <-chan time.Time
	if wedged {
		timer := time.NewTimer(wedgedWait)
		defer timer.Stop()
		short = timer.C
	}
	select {
	case <-b.done:
		return b.snap, b.err, true
	case <-stop:
	case <-expired:
	case <-short:
	}
	return nil, nil, false
}

func (t *Tree) signal(s Signal) error {
	t.snapshot()
	t.log.Debug("proc: signal group", "pgid", t.pid, "signal", s.String())
	return signalGroup(t.pid, s)
}

// snapshot records the tree's members by their parent links. A signal may
// make a CLI exit and orphan tools it started in other sessions
// (CLI-FACTS.md, "Cancellation behaviour"), some of which may have cleared
// their environment of the marker. The parent links, recorded while they
// exist, let Kill find those orphans later. The tracker records them too,
// but only every trackEvery.
func (t *Tree) snapshot() {
	timer := time.NewTimer(signalScanTimeout)
	if sn, err, ok := scanUntil(math.MaxUint64, t.sys.rootStart, nil, timer.C); ok && err == nil {
		t.sys.members(sn)
	}
	timer.Stop()
}

func (t *Tree) wait() (State, error) {
	s := &t.sys
	if s.waited.Swap(true) {
		return State{}, errors.New("proc: Wait called twice")
	}
	<-t.exited
	<-s.trackDone
	if s.reapLate.Load() {
		// Before the root is reaped: its group and session ids stay valid.
		timer := time.NewTimer(signalScanTimeout)
		sn, err, ok := scanUntil(math.MaxUint64, s.rootStart, nil, timer.C)
		timer.Stop()
		if !ok || err != nil {
			sn = nil
		}
		s.knownMu.Lock()
		late := s.late
		s.knownMu.Unlock()
		s.reap(t, sn, late)
	}
	ps, err := s.proc.Wait()
	<-s.done
	if s.marker != "" {
		theScanner().unregister(s.marker)
	}
	if err != nil {
		return State{}, fmt.Errorf("proc: wait: %w", err)
	}
	st := stateOf(ps)
	t.log.Debug("proc: reaped", "pid", t.pid, "code", st.Code, "signal", st.Signal)
	return st, nil
}

// A victim is a process Kill signals, held by a pidfd where the kernel has
// them (and maxPidfds allows).
type victim struct {
	pid     int32
	start   uint64
	fd      int  // pidfd, or -1
	pinned  bool // the root: its pid cannot be reused before Wait reaps it
	killed  bool // sent SIGKILL
	stopped bool // sent SIGSTOP
	gone    bool // seen exited (its pidfd is closed)
}

// gone reports whether err, from reading /proc/<pid>/... or opening a
// pidfd, says that the process does not exist. Any other error (EMFILE,
// ENOMEM, EACCES...) says nothing about the process.
func gone(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// openVictim returns a victim for p, with a pidfd if withFd, and checks,
// after opening it, that the pid still names the process of the snapshot
// (same starttime): the pidfd then refers to that process whatever happens
// to the pid later. It returns nil, nil when p has already exited, and an
// error when it cannot tell (the stat cannot be read: descriptors
// exhausted, say); the caller must then not count p as gone.
func openVictim(p procInfo, withFd bool, root int32, rootStart uint64) (*victim, error) {
	fd := -1
	if withFd {
		var err error
		fd, err = unix.PidfdOpen(int(p.pid), 0)
		if gone(err) {
			return nil, nil
		}
		if err != nil {
			fd = -1 // no pidfd: signal checks the starttime again instead
		}
	}
	v := &victim{pid: p.pid, start: p.start, fd: fd}
	// The root is not reaped before Wait: its pid names it.
	v.pinned = p.pid == root && rootStart != 0 && p.start == rootStart
	if v.pinned {
		return v, nil
	}
	if err := v.check(); err != nil {
		v.close()
		if gone(err) {
			return nil, nil
		}
		return nil, err
	}
	return v, nil
}

// check returns nil when v's pid still names v's process, alive; ESRCH
// when that process is gone (exited, a zombie, or the pid reused); any
// other error when it cannot tell.
func (v *victim) check() error {
	cur, err := readStat(v.pid)
	if err != nil {
		if gone(err) {
			return unix.ESRCH
		}
		return err
	}
	if cur.start != v.start || cur.zombie() {
		return unix.ESRCH
	}
	return nil
}

// errNoFreeze says that a victim could not be sent SIGSTOP safely.
var errNoFreeze = errors.New("proc: no pidfd to stop the process through")

// killPid is kill(2); tests replace it to see which signals go by pid.
var killPid = unix.Kill

// signal sends sig to v, through its pidfd or, without one held (past
// maxPidfds), through a pidfd opened for this signal and checked to name v
// (same starttime), then closed: a pid alone could have been reused. Only
// when no pidfd can be opened at all (descriptors exhausted, or a kernel
// without pidfds) does it fall back to kill(2) after a starttime check,
// with a gap between the two in which the pid could be reused only if the
// process exited and was reaped meanwhile. SIGSTOP goes only through a held
// pidfd (errNoFreeze otherwise: the caller sends SIGKILL instead), so that
// nothing is left stopped that the later SIGKILL might not reach. The root is signalled by pid: it is
// not reaped before Wait. An error other than ESRCH or EPERM means that v
// was not signalled and may be alive.
func (v *victim) signal(sig unix.Signal) error {
	if v.fd >= 0 {
		return unix.PidfdSendSignal(v.fd, sig, nil, 0)
	}
	if v.pinned {
		return killPid(int(v.pid), sig)
	}
	if sig == unix.SIGSTOP {
		// Stop only what a held pidfd pins: a process stopped through a
		// one-off pidfd could not be reached again for its SIGKILL if
		// descriptors run out meanwhile, and would stay stopped.
		return errNoFreeze
	}
	fd, err := unix.PidfdOpen(int(v.pid), 0)
	if err == nil {
		defer unix.Close(fd)
		if err := v.check(); err != nil {
			return err
		}
		return unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	if gone(err) {
		return unix.ESRCH
	}
	if err := v.check(); err != nil {
		return err
	}
	return killPid(int(v.pid), sig)
}

// exited reports whether v has exited (a zombie counts as gone). A
// process whose state cannot be read has not.
func (v *victim) exited() bool {
	if v.fd >= 0 {
		// A pidfd polls readable once its process has exited.
		fds := []unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	return v.check() == unix.ESRCH
}

func (v *victim) close() {
	if v.fd >= 0 {
		unix.Close(v.fd)
		v.fd = -1
	}
}

// A killer is the state of one Kill.
type killer struct {
	t        *Tree
	s        *treeSys
	deadline time.Time
	expired  <-chan time.Time // fires at deadline
	minStart uint64           // for scans: environments of processes started since
	victims  map[int32]*victim
	fds      int              // pidfds open
	denied   map[procKey]bool // members that refused a signal (EPERM)
	unsureOf map[procKey]bool // members listed as survivors by unsure
	fellBack bool             // in fallback: no more scans
	last     *snapshot        // the last scan
	ids      map[int32]bool   // the pids of the members (zombies too) in the last scan
	rep      Report
}

func (t *Tree) kill() Report {
	s := &t.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := time.Now()
	timer := time.NewTimer(killTimeout)
	defer timer.Stop()
	k := &killer{
		t: t, s: s,
		deadline: begin.Add(killTimeout),
		expired:  timer.C,
		minStart: math.MaxUint64,
		victims:  map[int32]*victim{},
		denied:   map[procKey]bool{},
		unsureOf: map[procKey]bool{},
	}
	if s.marker != "" {
		k.minStart = s.rootStart
	}
	defer func() {
		for _, v := range k.victims {
			v.close()
		}
	}()
	clean := false // the loop ended with a scan that found the tree gone
	for scans := 1; ; scans++ {
		sn, ok := k.scan()
		if !ok {
			k.fallback(nil)
			break
		}
		alive := k.alive(sn)
		if len(alive) == 0 {
			if !k.rootExited() {
				// The scan found no live member, yet the root has not
				// exited: something is wrong with what the scan saw.
				t.log.Debug("proc: root missing from scan", "pid", t.pid)
				k.fallback(nil)
				break
			}
			t.log.Debug("proc: tree gone", "pid", t.pid, "scans", scans)
			clean = true
			break
		}
		if alive, ok = k.freeze(alive); !ok {
			k.fallback(alive)
			break
		}
		pending, ok := k.killAll(alive)
		if !ok {
			// A member could not be signalled (its state unreadable):
			// scanning again would find it again; kill what can be
			// reached and report the rest.
			k.fallback(alive)
			break
		}
		if !time.Now().Before(k.deadline) {
			// Out of time: whatever was found has had its SIGKILL,
			// even if the scan that found it ended past the deadline.
			k.giveUp(pending)
			break
		}
		if left := k.awaitGone(pending, k.deadline); len(left) > 0 {
			k.survive(left)
			break
		}
	}
	if s.reaps() {
		var killed []procKey
		for _, v := range k.victims {
			if v.killed && !v.pinned {
				killed = append(killed, procKey{v.pid, v.start})
			}
		}
		late := s.reap(t, k.last, killed)
		s.knownMu.Lock()
		s.late = late
		s.knownMu.Unlock()
		s.reapLate.Store(!clean || len(late) > 0)
	}
	k.rep.Elapsed = time.Since(begin)
	t.log.Debug("proc: killed", "pid", t.pid, "killed", len(k.rep.Killed), "survivors", k.rep.Survivors, "elapsed", k.rep.Elapsed)
	return k.rep
}

// scan takes a snapshot, waiting for it no later than the deadline; ok is
// false when there is none (the scan failed, or is still running).
func (k *killer) scan() (*snapshot, bool) {
	sn, err, ok := scanUntil(k.minStart, k.s.rootStart, nil, k.expired)
	if ok && err == nil {
		k.last = sn
		return sn, true
	}
	k.t.log.Debug("proc: no scan", "pid", k.t.pid, "err", err, "timeout", !ok)
	return nil, false
}

// rootExited waits briefly for the root to be seen exited: a scan that
// shows it as a zombie may end before run's waitid returns.
func (k *killer) rootExited() bool {
	select {
	case <-k.t.exited:
		return true
	default:
	}
	timer := time.NewTimer(min(rootExitWait, max(time.Until(k.deadline), 0)))
	defer timer.Stop()
	select {
	case <-k.t.exited:
		return true
	case <-timer.C:
		return false
	}
}

// fallback kills, without a scan, what can be reached without one: the
// root's process group, the root, the known members, the victims stopped
// by a freeze and alive (found by an earlier scan); then it waits briefly
// and gives up. Members it cannot signal (their state unreadable) are
// survivors.
func (k *killer) fallback(alive []procInfo) {
	seen := map[int32]bool{}
	var all []procInfo
	add := func(p procInfo) {
		if !seen[p.pid] && !k.denied[procKey{p.pid, p.start}] {
			seen[p.pid] = true
			all = append(all, p)
		}
	}
	add(procInfo{pid: k.s.root, start: k.s.rootStart})
	for _, p := range alive {
		add(p)
	}
	for _, v := range k.victims {
		if !v.gone {
			add(procInfo{pid: v.pid, start: v.start})
		}
	}
	k.s.knownMu.Lock()
	for pid, start := range k.s.known {
		add(procInfo{pid: pid, start: start})
	}
	k.s.knownMu.Unlock()
	k.fellBack = true
	pending, _ := k.killAll(all)
	k.giveUp(pending)
}

// alive returns the live members in sn, less those that refused a signal.
func (k *killer) alive(sn *snapshot) []procInfo {
	alive, ids := k.s.memberSet(sn)
	k.ids = ids
	return slices.DeleteFunc(alive, func(p procInfo) bool { return k.denied[procKey{p.pid, p.start}] })
}

// freeze stops every member with SIGSTOP and scans again, until a scan
// finds no member that is not stopped yet, and returns the members. A
// stopped process cannot fork, and it keeps its parent links: a child
// forked between a scan and the SIGSTOP is found by its parent in the next
// scan, even if it left the session and cleared its environment; killing
// the parent first would have orphaned it with no link left. SIGKILL ends
// stopped processes all the same. ok is false when a scan was missing
// (then the members already found are returned, to be killed).
//
// It runs whenever a member is alive, the root alone too: the root can
// fork such a child between a scan and its SIGKILL as well. This costs
// one scan more; Kill after a normal exit with nothing left does not get
// here.
func (k *killer) freeze(alive []procInfo) ([]procInfo, bool) {
	stopped := map[procKey]bool{}
	for {
		fresh := false
		for _, p := range alive {
			key := procKey{p.pid, p.start}
			if stopped[key] {
				continue
			}
			stopped[key] = true
			v, err := k.victim(p)
			if err != nil {
				return alive, false
			}
			if v == nil {
				continue
			}
			err = v.signal(unix.SIGSTOP)
			if err == errNoFreeze {
				// It cannot be stopped safely: kill it now.
				err = v.signal(unix.SIGKILL)
				k.t.log.Debug("proc: kill unfrozen", "pid", k.t.pid, "member", v.pid, "err", err)
				if err == nil || err == unix.ESRCH {
					k.killed(v)
					fresh = true
					continue
				}
			}
			switch {
			case err == unix.EPERM:
				k.deny(v)
				continue
			case err != nil && err != unix.ESRCH:
				k.t.log.Debug("proc: stop failed", "pid", k.t.pid, "member", v.pid, "err", err)
				return alive, false
			}
			v.stopped = true
			fresh = true
		}
		if !fresh || !time.Now().Before(k.deadline) {
			return alive, true
		}
		sn, ok := k.scan()
		if !ok {
			return alive, false
		}
		// Members that were stopped but are missing from the new scan
		// have exited; the new scan has every live one.
		alive = k.alive(sn)
	}
}

// victim returns the victim for p, opening one if needed: nil, nil if p is
// gone, an error if that cannot be told.
func (k *killer) victim(p procInfo) (*victim, error) {
	v := k.victims[p.pid]
	if v != nil && v.start != p.start {
		k.closeVictim(v)
		delete(k.victims, p.pid)
		v = nil
	}
	if v == nil {
		var err error
		if v, err = openVictim(p, k.fds < maxPidfds, k.s.root, k.s.rootStart); v == nil {
			if err != nil {
				k.t.log.Debug("proc: cannot check member", "pid", k.t.pid, "member", p.pid, "err", err)
			}
			return nil, err
		}
		if v.fd >= 0 {
			k.fds++
		}
		k.victims[p.pid] = v
	}
	return v, nil
}

func (k *killer) closeVictim(v *victim) {
	if v.fd >= 0 {
		k.fds--
	}
	v.close()
}

// deny records that v refused a signal (EPERM: a setuid program, say):
// it is a survivor at once, and Kill does not wait for it.
func (k *killer) deny(v *victim) {
	k.t.log.Debug("proc: not permitted", "pid", k.t.pid, "member", v.pid)
	k.denied[procKey{v.pid, v.start}] = true
	k.rep.Survivors = append(k.rep.Survivors, int(v.pid))
	k.closeVictim(v)
	v.gone = true
}

// killAll sends SIGKILL to each live member and to the tree's process
// groups they are in, and returns the victims to wait for. ok is false
// when a member could not be signalled and may be alive; it is then
// listed as a survivor.
//
// A group is the tree's only if its id is the root's pid or the pid of a
// member present in the last scan (alive or a zombie, so the id names
// the same group): a member found by its marker or known may sit in an
// older, unrelated group (a daemon's that started a worker for it), and
// killing that group would kill the daemon. Members in other groups are
// killed one by one.
func (k *killer) killAll(alive []procInfo) (pending []*victim, ok bool) {
	ok = true
	// Every victim that a freeze stopped gets SIGKILL too, whatever the
	// latest scan says: a stopped process never resumes on its own, and
	// its pidfd (or starttime) pins its identity. A scan can miss it
	// (its links gone, known forgotten); it must not stay stopped.
	in := make(map[int32]bool, len(alive))
	for _, p := range alive {
		in[p.pid] = true
	}
	for _, v := range k.victims {
		if v.stopped && !v.gone && !in[v.pid] {
			alive = append(alive, procInfo{pid: v.pid, start: v.start})
		}
	}
	// Open every victim first, while each process still exists: a
	// pidfd cannot be opened, nor a starttime checked, once the group
	// kill has made it a zombie.
	var groups []int32
	if k.fellBack {
		groups = append(groups, k.s.root)
	}
	var victims []*victim
	for _, p := range alive {
		v, err := k.victim(p)
		if err != nil {
			k.unsure(p, err)
			ok = false
			continue
		}
		if v == nil {
			continue
		}
		victims = append(victims, v)
		if g := p.pgrp; g > 1 && g != k.s.hostPgid && (g == k.s.root || k.ids[g]) && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	// Groups first: a group kill reaches every process of the group at
	// once, including one forked into it since the scan. The root's
	// group id cannot have been reused: the root is not reaped before
	// Wait. Another group's id is the pid of a member that the scan
	// found present; it could name a different group by now only if,
	// since the scan, that member and every process of its group had
	// exited and been reaped and the id had been handed to a new group
	// leader: the freeze keeps the members found stopped, so they do not
	// exit on their own. This is a gap of microseconds that needs a pid
	// wrap-around inside it.
	for _, g := range groups {
		err := unix.Kill(-int(g), unix.SIGKILL)
		k.t.log.Debug("proc: kill group", "pid", k.t.pid, "pgid", g, "err", err)
	}
	for _, v := range victims {
		err := v.signal(unix.SIGKILL)
		k.t.log.Debug("proc: kill", "pid", k.t.pid, "member", v.pid, "pidfd", v.fd >= 0, "err", err)
		if err == unix.EPERM {
			k.deny(v)
			continue
		}
		if err != nil && err != unix.ESRCH {
			k.unsure(procInfo{pid: v.pid, start: v.start}, err)
			ok = false
			continue
		}
		k.killed(v)
		pending = append(pending, v)
	}
	return pending, ok
}

// killed records that v was sent SIGKILL.
func (k *killer) killed(v *victim) {
	if !v.killed {
		v.killed = true
		k.rep.Killed = append(k.rep.Killed, int(v.pid))
	}
}

// unsure records that p could not be signalled and may be alive: it is a
// survivor unless a group kill reaches it.
func (k *killer) unsure(p procInfo, err error) {
	k.t.log.Debug("proc: cannot signal member", "pid", k.t.pid, "member", p.pid, "err", err)
	key := procKey{p.pid, p.start}
	if k.fellBack && !k.unsureOf[key] {
		k.unsureOf[key] = true
		k.rep.Survivors = append(k.rep.Survivors, int(p.pid))
	}
}

// awaitGone polls until every victim in pending has exited or until, and
// returns those that have not. It closes each victim's pidfd as soon as
// the victim is gone. It backs off from 200µs to 10ms: a killed process
// usually takes microseconds to go, one stuck in the kernel may take much
// longer.
func (k *killer) awaitGone(pending []*victim, until time.Time) []*victim {
	backoff := 200 * time.Microsecond
	for {
		pending = slices.DeleteFunc(pending, func(v *victim) bool {
			if v.gone || v.exited() {
				v.gone = true
				k.closeVictim(v)
				return true
			}
			return false
		})
		if len(pending) == 0 || !time.Now().Before(until) {
			return pending
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 10*time.Millisecond)
	}
}

// giveUp waits lastGrace at most for pending, which has just been sent
// SIGKILL, and lists what is left as survivors.
func (k *killer) giveUp(pending []*victim) {
	k.survive(k.awaitGone(pending, time.Now().Add(lastGrace)))
}

func (k *killer) survive(left []*victim) {
	for _, v := range left {
		k.rep.Survivors = append(k.rep.Survivors, int(v.pid))
	}
	if len(left) > 0 {
		k.t.log.Debug("proc: kill gave up", "pid", k.t.pid, "survivors", k.rep.Survivors)
	}
}

// members returns the live processes of the tree in sn and records them as
// known. Members are: the root, its process group and session, the
// processes carrying the marker, those seen before (known, same
// starttime), the processes in a session or group whose id is the pid of a
// known member still present in sn or of any member found in sn, alive or
// a zombie (that pid cannot have been reused, so the session or group is
// the member's), and every descendant of any of these. A snapshot older
// than the newest one applied is not applied: it neither records nor
// forgets.
//
// A process re-parented to the host (a subreaper) is a member only by one
// of these rules: its ppid says nothing, since other runs' orphans
// re-parent to the host too. So one that was never seen while its parent
// links existed, left the session and cleared its environment is not
// found.
//
// Only processes started at or after the root count: every process of the
// tree did, and the snapshot may or may not hold older ones (see scanner),
// so ignoring them all keeps the answer independent of that.
func (s *treeSys) members(sn *snapshot) []procInfo {
	alive, _ := s.memberSet(sn)
	return alive
}

// memberSet is members, and also returns the pids of every member in sn,
// zombies included.
func (s *treeSys) memberSet(sn *snapshot) ([]procInfo, map[int32]bool) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	// The tracker or Signal may apply a snapshot after Kill applied a
	// newer one; an older snapshot must neither record nor forget.
	apply := sn.seq >= s.applied
	if apply {
		s.applied = sn.seq
	}
	in := map[int32]bool{}
	var queue []int32
	add := func(i int) {
		p := &sn.procs[i]
		if p.pid == s.host || p.pid <= 1 || in[p.pid] || p.start < s.rootStart {
			return
		}
		in[p.pid] = true
		queue = append(queue, int32(i))
	}
	// knownLeader reports whether id is the pid of a known member that is
	// still in sn (alive or a zombie).
	knownLeader := func(id int32) bool {
		start, ok := s.known[id]
		if !ok {
			return false
		}
		i, ok := sn.find(id)
		return ok && sn.procs[i].start == start
	}
	for i := range sn.procs {
		p := &sn.procs[i]
		if p.start < s.rootStart {
			continue
		}
		if p.pid == s.root || p.pgrp == s.root || p.sid == s.root || knownLeader(p.sid) || knownLeader(p.pgrp) {
			add(i)
		}
	}
	if s.marker != "" {
		for _, pid := range sn.marked[s.marker] {
			if i, ok := sn.find(pid); ok {
				add(i)
			}
		}
	}
	for pid, start := range s.known {
		if i, ok := sn.find(pid); ok && sn.procs[i].start == start {
			add(i)
		}
	}
	var alive []procInfo
	for k := 0; ; {
		for ; k < len(queue); k++ {
			p := sn.procs[queue[k]]
			for _, c := range sn.children(p.pid) {
				add(int(c))
			}
			if !p.zombie() {
				alive = append(alive, p)
				if apply {
					s.known[p.pid] = p.start
				}
			}
		}
		// A session or group whose id is the pid of a member in sn
		// (alive or a zombie: the id cannot have been reused) is the
		// tree's: this finds a double-forked child whose intermediate
		// parent is a zombie under a stopped parent, say.
		for i := range sn.procs {
			if p := &sn.procs[i]; !in[p.pid] && (in[p.sid] || in[p.pgrp]) {
				add(i)
			}
		}
		if k == len(queue) {
			break
		}
	}
	if apply {
		s.forget(sn)
	}
	return alive, in
}

// forget drops from known the processes that are gone from sn, unless a
// process in sn still has their pid as its session or group id (reap
// needs those). Without it a long run that starts many short tools would
// grow known without bound. s.knownMu is held.
func (s *treeSys) forget(sn *snapshot) {
	var ids map[int32]bool
	for pid, start := range s.known {
		if i, ok := sn.find(pid); ok && sn.procs[i].start == start {
			continue
		}
		if ids == nil {
			ids = map[int32]bool{}
			for i := range sn.procs {
				if p := &sn.procs[i]; p.start >= s.rootStart {
					ids[p.sid], ids[p.pgrp] = true, true
				}
			}
		}
		if !ids[pid] {
			delete(s.known, pid)
		}
	}
}

// reap reaps the tree's zombies that were re-parented to the host (a
// child subreaper, or PID 1): those in sn that are the tree's, and extra
// (processes this Kill sent SIGKILL). It never waits for any other child:
// the host's other children, including other Trees' roots, keep their
// statuses. The root is left to Wait. It returns the zombies it could not
// reap yet (their parent still exiting, say), for Wait to try again.
//
// A zombie's environment cannot be read, so a zombie is the tree's if it
// was killed by this Kill, was seen alive as a member (known, same
// starttime), is a member of sn by the rules of members, or is in a
// session or group whose id is a known member's pid (a member that is
// gone: its session or group outlives it). An orphan that left the
// session, cleared its environment and exited, all between two of the
// tracker's snapshots, is none of these: it stays a zombie child of the
// host until the host exits (it holds no resources but its pid and exit
// status).
func (s *treeSys) reap(t *Tree, sn *snapshot, extra []procKey) []procKey {
	zombies := slices.Clone(extra)
	for _, z := range s.zombies(sn) {
		if !slices.Contains(zombies, z) {
			zombies = append(zombies, z)
		}
	}
	// A thread-group leader shows as a zombie while its other threads are
	// still exiting, and cannot be reaped until they are gone; and a
	// zombie re-parents to the host only once its parent's threads are
	// all gone: try again for a little while.
	backoff := 100 * time.Microsecond
	for end := time.Now().Add(reapWait); ; {
		zombies = slices.DeleteFunc(zombies, func(z procKey) bool {
			done, err := s.reapOne(z)
			if done && err == nil {
				t.log.Debug("proc: reaped orphan", "pid", t.pid, "orphan", z.pid)
			}
			return done
		})
		if len(zombies) == 0 || time.Now().After(end) {
			return zombies
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Millisecond)
	}
}

// zombies returns the tree's zombies in sn (nil: none), but the root.
func (s *treeSys) zombies(sn *snapshot) []procKey {
	if sn == nil {
		return nil
	}
	_, ids := s.memberSet(sn)
	var zombies []procKey
	s.knownMu.Lock()
	// leader reports whether id is the pid of a known member that is
	// either still in sn with its starttime or gone from sn (then the
	// session or group that still bears its id is the member's).
	leader := func(id int32) bool {
		start, ok := s.known[id]
		if !ok {
			return false
		}
		i, ok := sn.find(id)
		return !ok || sn.procs[i].start == start
	}
	for _, p := range sn.procs {
		if !p.zombie() || p.pid == s.root || p.start < s.rootStart {
			continue
		}
		// A session or group led by the zombie itself counts only by
		// its own starttime.
		if ids[p.pid] || s.known[p.pid] == p.start ||
			(p.sid != p.pid && leader(p.sid)) || (p.pgrp != p.pid && leader(p.pgrp)) {
			zombies = append(zombies, procKey{p.pid, p.start})
		}
	}
	s.knownMu.Unlock()
	return zombies
}

// errNotOurs says that reapOne left a process alone: gone, reused, or the
// child of a live parent other than the host (which reaps it).
var errNotOurs = errors.New("proc: not the host's to reap")

// reapOne reaps z if it is a zombie child of the host, through a pidfd
// opened and checked to name z (same starttime): waiting by pid could take
// the status of another child that was given z's pid after z was reaped.
// done is false when z may become reapable later (not waitable yet, or
// its parent still exiting).
func (s *treeSys) reapOne(z procKey) (done bool, err error) {
	if z.pid == s.root {
		return true, errNotOurs // Wait's
	}
	fd, err := unix.PidfdOpen(int(z.pid), 0)
	if err != nil {
		return gone(err), err
	}
	defer unix.Close(fd)
	cur, err := readStat(z.pid)
	if err != nil {
		return gone(err), err
	}
	if cur.start != z.start {
		return true, errNotOurs
	}
	if cur.ppid != s.host {
		// It re-parents to the host once its parent's last thread is
		// gone; a live parent reaps it itself.
		if par, err := readStat(cur.ppid); err == nil && !par.zombie() {
			return true, errNotOurs
		}
		return false, errNotOurs
	}
	var info unix.Siginfo
	err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
	switch {
	case err == unix.ECHILD:
		return false, err // not the host's child yet
	case err != nil:
		return true, err // EINVAL: no P_PIDFD (Linux < 5.4); never by pid
	case info.Signo == 0:
		return false, unix.EAGAIN // alive, or its threads still exiting
	}
	return true, nil
}

// reaps reports whether the host must reap the tree's orphans: it is a
// child subreaper (by Attr.Subreaper or otherwise: another Tree's, say),
// or PID 1, to which orphans re-parent too (a container's entrypoint).
func (s *treeSys) reaps() bool {
	return s.subreaper || s.host == 1 || isSubreaper()
}

// isSubreaper reports whether the host is a child subreaper.
func isSubreaper() bool {
	var v int32
	_, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0, 0)
	return errno == 0 && v != 0
}
