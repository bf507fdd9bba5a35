// Package proc starts a command as the root of a process tree that it owns,
// and stops, kills and reaps that whole tree: the root, its process group,
// and every descendant, including those that left the group with setsid or
// were re-parented after their parent died.
//
// How the tree's members are known is its containment level (see
// Containment), chosen at Start: on Linux with a writable cgroup v2, the
// kernel keeps the membership (a cgroup per tree, killed with cgroup.kill,
// and a keeper process that kills the trees of a host that dies); else
// members are tracked by process group, session, parent links and a
// marker variable, which a process that hides can escape. Files: start and
// wait per OS, cgroup_linux.go (cgroups and where they live),
// cgprobe_linux.go (whether the kernel starts processes in them),
// cgtree_linux.go (a tree at the cgroup level), cgwatch_linux.go (waiting
// for a cgroup to empty), keeper_linux.go, and for tracking
// members_linux.go, kill_linux.go, reap_linux.go and scan_linux.go (/proc);
// sweep_linux.go kills what a tree started since a Baseline (a session's
// turn), leaving the rest running.
//
// Limits and accounting (limits.go; docs/limits.md says where the
// controllers are and how to set a host up): Attr.Limits are held by the
// kernel, set on the tree's cgroups before the root runs: cgroup v2
// controllers where the home has them (controllers_linux.go), else cgroup
// v1 cgroups of the tree's own (cgroupv1_linux.go); limits_linux.go plans
// which, treelimits_linux.go prepares them at Start. Attr.Account measures
// the tree's usage (usage_linux.go), from controllers or sampled from /proc
// (usage_sampled_linux.go). How a caller uses them:
//
//	s := proc.ProbeLimits(want, parent)       // at start-up: what can be held (Capabilities)
//	proc.SetHostLimits(parent, budget)        // the kernel-held sum of all trees
//	t, err := proc.Start(&proc.Attr{..., Limits: l, Account: true})
//	// err: *LimitUnavailableError (a limit cannot be held), *ExhaustedError
//	// (out of descriptors or processes); nothing has started
//	u := t.Usage()                            // any time: e.g. after a tool's result
//	m := t.Mark(); ...turn...; u = t.Since(m) // a session's turn
//	st, _ := t.Wait(); u = t.Usage()          // the whole run, final
//	// u.RootOOMKilled: the root was OOM-killed (an error); u.OOMKills
//	// without it, u.ForksRefused: a tool was, or forks were refused
//	// (warnings); u.OOMOutside: by a limit not the tree's own
//
// Descriptors: a running tree at the Cgroup level holds one, its root's
// pidfd, until the root has exited; one at the Tracking level holds none
// (it holds a locked OS thread instead, see Start). A tree whose Mark
// reset cgroup v2's memory.peak (Linux 6.12 and newer) holds that file
// open until Wait. The host holds a few for all its trees: its keeper's
// pipe, and on cgroup v1 a tasks file per hierarchy.
//
// It does not read or write the command's standard streams: the caller
// passes the child's ends of its pipes (or terminal) in Attr and closes its
// own copies after Start.
//
// Lifecycle of a Tree:
//
//	t, err := proc.Start(attr) // root runs in its own session and process group
//	...
//	t.Signal(proc.Interrupt)   // ladder steps: to the root's process group
//	<-t.Exited()               // root has exited; it is not reaped yet
//	t.Kill()                   // SIGKILL group + all descendants, until none is left
//	st, err := t.Wait()        // reap the root, release resources
//
// Kill may be called at any time and more than once; Wait must be called
// exactly once, and after it the Tree must not be used but for Usage and
// Since, which then report the final figures. Wait blocks until
// the root has exited: after Kill that is at once, unless Kill lists the
// root among its Survivors (it could not be killed), when Wait blocks
// until the root exits. Because the root is reaped only by Wait, its pid
// (and so its process-group id) cannot be reused while signals are sent to
// the group.
package proc

import (
	"cmp"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// Signal is a step of the cancellation ladder.
type Signal int

// The ladder's signals.
const (
	// Interrupt is SIGINT on Unix (CTRL_BREAK on Windows, which reaches
	// the root only if it shares the host's console).
	Interrupt Signal = iota + 1
	// Terminate is SIGTERM on Unix (the job is terminated on Windows).
	Terminate
	// Kill is SIGKILL on Unix (the job is terminated on Windows).
	Kill
)

// String returns the Unix name of the signal, such as "SIGINT".
func (s Signal) String() string {
	switch s {
	case Interrupt:
		return "SIGINT"
	case Terminate:
		return "SIGTERM"
	case Kill:
		return "SIGKILL"
	}
	return "signal?"
}

// RecordEvery is how often, on Linux, a Tracking-level Tree records its
// members by parent links while its root runs (see Kill), and how often
// the figures no controller holds are sampled (see Usage).
const RecordEvery = 300 * time.Millisecond

// Attr describes the command to start.
type Attr struct {
	// Path is the executable (absolute, or relative to the host's cwd).
	Path string
	// Args is argv; Args[0] is the program's name.
	Args []string
	// Env is the complete environment of the root process. If Env is nil,
	// the root gets the host's environment, as with os/exec.
	Env []string
	// Dir is the working directory.
	Dir string
	// Stdin, Stdout and Stderr are the child's standard streams. Nil means
	// the null device. The caller closes its copies after Start.
	Stdin, Stdout, Stderr *os.File
	// TTY, if not nil, is the slave side of a pseudo-terminal that becomes
	// the root's controlling terminal (Unix only; Start fails elsewhere).
	// It should also be one of Stdin, Stdout or Stderr.
	TTY *os.File
	// Marker is a KEY=VALUE pair that is also in Env. Processes whose
	// initial environment holds it are treated as part of the tree even
	// after they left its session and lost their parent (Linux).
	Marker string
	// Subreaper makes the host a child subreaper before starting (Linux
	// PR_SET_CHILD_SUBREAPER; ignored elsewhere). Orphans of the tree then
	// re-parent to the host, and Kill reaps the tree's (see Kill for which
	// orphans it can tell are the tree's).
	Subreaper bool
	// Logger receives debug records of signals and kills; nil discards.
	Logger *slog.Logger
	// Containment is the level asked for; the zero value, Auto, takes the
	// best the host allows. Asking for Cgroup where it cannot be had
	// makes Start fail with ErrUnavailable; asking for Tracking on Linux
	// forces the fallback.
	Containment Containment
	// CgroupParent, if not empty, is the cgroup v2 directory (a path
	// under the cgroup2 mount, such as
	// /sys/fs/cgroup/system.slice/app.service/runs) in which the trees'
	// cgroups are made. The default is the host's own cgroup.
	CgroupParent string
	// Limits, if not zero, are held by the kernel for the tree (Linux
	// cgroup controllers; see Limits). Start fails with an
	// *LimitUnavailableError, before anything starts, when one cannot be.
	Limits Limits
	// Account asks for the tree's usage to be measured (Tree.Usage): peak
	// memory, CPU time and the most tasks at once, from the controllers
	// that hold the tree where there are some, else sampled from /proc.
	// Without it only the figures of the controllers that hold Limits are
	// measured. On a cgroup v1 host it places the tree in v1 memory and
	// pids cgroups of its own, which cost about 0.6 ms per Start and Wait
	// (measured on Linux 6.18, BenchmarkLimitsStart); on cgroup v2 it
	// costs nothing but the sampling where a controller is missing.
	Account bool
	// Restrict, if not nil, runs on the OS thread that forks the root,
	// just before the fork (Linux; Start fails elsewhere): a ceiling the
	// kernel holds per thread (a Landlock ruleset) set there holds the
	// root and everything it starts, and not the host. That thread never
	// runs anything else afterwards: it ends when it is done with the
	// root. An error from Restrict fails Start before anything starts.
	Restrict func() error
	// ExtraFiles are open files the root inherits as descriptors 3 and
	// up, in order (Unix).
	ExtraFiles []*os.File
	// SysAttr, if not nil, changes the attributes of the root's fork
	// after proc set its own (Linux): the namespaces it is born in and
	// their id mappings, the capabilities it keeps. It must leave proc's
	// (the session, the terminal, the cgroup) as they are.
	SysAttr func(*syscall.SysProcAttr)

	// tune, if not nil, replaces the bounds Kill and the tracker work
	// with (Linux; for tests).
	tune *tuning
}

// State is how the root process ended.
type State struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal names the signal that ended the process ("" if none).
	Signal string
}

// A Report says what Kill or SweepSince found and did.
type Report struct {
	// Killed are the pids that were sent SIGKILL (root, group members,
	// descendants and marked processes; for SweepSince, the members
	// it did not spare), in the order they were found.
	Killed []int
	// Survivors are the pids that may still be alive when Kill returned:
	// processes still alive when it gave up waiting (stuck in
	// uninterruptible sleep, say), members that refused the signal
	// (EPERM: a setuid program), and members it could not signal
	// safely because their state could not be read (descriptors
	// exhausted). Normally empty.
	Survivors []int
	// Elapsed is how long Kill (or SweepSince) took.
	Elapsed time.Duration
}

// Tree is a started process tree. Its methods are safe for concurrent use.
type Tree struct {
	pid    int
	exited chan struct{}
	sys    treeSys // per-OS state
	log    *slog.Logger
	start  time.Time
	level  Containment
}

// Start starts the root process in a new session and process group (a Job
// Object on Windows). At the Cgroup level the root is born in the tree's
// cgroup (clone3 CLONE_INTO_CGROUP), no goroutine records anything, and the
// root's exit is awaited through a pidfd on the runtime's poller.
//
// At the Tracking level the root gets a parent-death signal, so that a
// host that crashes takes the root (only) down with it. That signal is
// tied to the thread that forked, so
// each live Tree holds one locked OS thread, blocked in waitid, until its
// root exits; Go stops the program when it needs more than its maximum
// number of threads (10000 by default, see runtime/debug.SetMaxThreads),
// which bounds the number of Trees running at once. The members of each
// live Tree are also recorded every RecordEvery while its root runs (see Kill),
// by one goroutine and one scan of /proc per period shared by all Trees;
// the goroutine runs while some Tree is tracked, and Wait stops tracking
// its Tree.
func Start(a *Attr) (*Tree, error) { return start(a) }

// Containment returns the level that holds the tree: never Auto.
func (t *Tree) Containment() Containment { return t.level }

// Pid returns the root's process id.
func (t *Tree) Pid() int { return t.pid }

// Exited returns a channel closed once the root process has exited. The
// root stays unreaped (a zombie) until Wait.
func (t *Tree) Exited() <-chan struct{} { return t.exited }

// Snapshot records the tree's current members by their parent links, so
// that a later Kill finds them even after they have left the tree's session
// and lost their parent. Signal does this itself; call Snapshot before
// stopping the tree by other means, such as Ctrl-C through its terminal.
func (t *Tree) Snapshot() { t.snapshot() }

// Signal sends s to the root's process group. It returns nil when the group
// is already gone. On Linux at the Tracking level it first records the
// tree's members by their parent links, walking them from the root and the
// members already recorded (reading only the tree's processes; where the
// kernel cannot list a process's children, it waits at most 250 ms for a
// scan of /proc instead), so that Kill still finds processes that s makes
// orphans, even ones without the Marker. It must not be called after Wait,
// when the group id may name another group.
func (t *Tree) Signal(s Signal) error {
	if s == Kill {
		t.noteKill()
	}
	return t.signal(s)
}

// Ignores reports whether the root process ignores s now: its disposition
// for the signal is SIG_IGN, so the kernel discards the signal and no
// handler of the CLI's ever sees it. A CLI inherits that disposition across
// exec from a host started with the signal ignored (nohup'ed programs and
// the background commands of a shell script ignore SIGINT), and a shell
// script cannot trap a signal its shell was started with ignored. The
// ladder, having sent a step's signal, asks Ignores whether to wait the
// step's grace: not when the root ignores it. It is read at each
// call, since a process may change its dispositions. A blocked signal is
// not ignored: it stays pending and is delivered once unblocked. Ignores
// is false for Kill, and when it cannot tell (the root is gone; systems
// other than Linux, whose ladder waits out every step). It must not be called
// after Wait, when the pid may name another process.
func (t *Tree) Ignores(s Signal) bool { return t.ignores(s) }

// Prepare tells the tree that its end is near (a signal asking it to stop
// has been sent): on Linux it opens ahead the cgroup files that Kill and
// Wait read once the root has exited (cgroup.events at the Cgroup level,
// the files of the accounting's final reading), so that the return from
// Wait does not wait for their opening. They are held until Wait. It does
// nothing after Wait, on a second call, or where it cannot open them (Kill
// and Wait then open them as they would have).
func (t *Tree) Prepare() { t.prepare() }

// Kill sends SIGKILL to every process of the tree and waits until they are
// gone (zombies count as gone). It is bounded: after about 5 s it gives up
// and lists the survivors.
//
// At the Cgroup level that is one write to the tree's cgroup.kill (and a
// SIGKILL through a checked pidfd to any process the write passes over,
// such as one whose main thread has exited), then a wait until
// cgroup.events says the cgroup is no longer populated. The host's zombie
// children that were members (orphans adopted by a subreaper or PID 1
// host, siblings made with CLONE_PARENT) are reaped. The rest of this
// comment is about the Tracking level.
//
// At the Tracking level Kill sends SIGKILL to the root's process group,
// the root and every descendant found by parent links, session, process
// group, the Marker and (with Subreaper) re-parenting, repeating until a
// scan finds none alive and the root has exited. Membership is then known
// complete (no member is left to start another), so later Kills return at
// once without a scan, unless that scan could not read some environment.
//
// On Linux the tree is found by scanning /proc; scans are shared, so that
// many Trees killed at once cost about as much as one. While the root
// runs, the Tree also records its members by parent links every RecordEvery,
// so that a descendant that left the session and cleared its environment
// (env -i: no Marker) is still found after its parent has exited. The
// members found are first stopped (SIGSTOP) and the tree scanned again
// until no new member appears, so that a child forked during the sweep is
// found by its stopped parent; then every member found, and every member
// stopped, gets SIGKILL. The order of a round: a pidfd is opened for each
// member and checked against the process's start time (so a reused pid is
// never hit; past 256 held open, a pidfd is opened for each signal and
// closed), then the tree's process groups are killed (the root's, and
// those whose id is a present member's pid; a member in another group,
// such as a daemon's, is killed alone), then each member. A member that
// refuses the signal (EPERM) is a survivor at once. A process whose state
// cannot be read (descriptors exhausted) is never taken for exited, nor
// signalled by a pid that cannot be checked; Kill then kills the root's
// group, the root and the members recorded so far, and lists the rest as
// survivors. Kill waits for a scan no longer than its deadline; a scan
// waits at most 100 ms for one process's environment (the read can block
// on a hung mount; that process then counts as unmarked until its read
// ends). If a scan blocks for longer than a whole Kill, later Kills wait
// 100 ms for it, then do without a scan as above.
//
// With Subreaper (or whenever the host is a subreaper, or is PID 1), the
// tree's processes re-parented to the host are reaped, through pidfds
// checked against their start time, and ones that are still alive are
// killed. Such a process is the tree's only if it was recorded as a member
// while its parent links existed, carries the Marker, was killed by Kill,
// or is in the root's session or group or in one led by a member: other
// runs' orphans re-parent to the host too, so Kill does not guess. An
// orphan that left the session and cleared its environment within one
// recording period of its start, before its parent exited, is therefore
// neither killed nor, if it exits, reaped (its zombie stays the host's
// child until the host exits); so is one Kill could not scan for.
//
// A tree whose root was started in a user namespace of its own
// (CLONE_NEWUSER in SysAttr, as a sandboxed user's first stage is) is
// also found by that namespace: every process in it, or in a namespace
// nested in it, is a member, since no process can leave its user
// namespace. Such an orphan is then killed all the same; reaped only as
// above. A tree sharing the host's user namespace has no such mark.
//
// On macOS the tree is the group plus descendants by parent links; on
// Windows it is the Job Object, terminated as a whole.
func (t *Tree) Kill() Report {
	t.noteKill()
	return t.kill()
}

// A Baseline is a set of a Tree's members taken at one moment by
// Tree.Baseline: each process by its pid and start time, so that a process
// that later reuses the pid of one that has exited is not taken for it.
// It also holds the moment it was taken. Its only use is SweepSince on the
// same Tree. The zero Baseline holds no process and no moment: SweepSince
// with it kills every member but the root.
type Baseline struct {
	tree    *Tree
	members []member // sorted by pid
	// since is when the baseline was taken, on the clock of the members'
	// start times (see member); 0 if unknown.
	since uint64
}

// member is one process of a Baseline: its pid and its start time, on a
// per-OS clock (Linux: clock ticks after boot, as in /proc/PID/stat; macOS:
// microseconds of wall time; Windows: the FILETIME of its creation).
type member struct {
	pid   int
	start uint64
	// id, if not 0, identifies the process for its whole life, whatever
	// the clock's resolution (Linux 6.9 and newer: the inode number of
	// its pidfd, which the kernel never gives another process).
	id uint64
}

// Pids returns the pids of the processes in b, in increasing order.
func (b Baseline) Pids() []int {
	pids := make([]int, len(b.members))
	for i, m := range b.members {
		pids[i] = m.pid
	}
	return pids
}

// find returns the member of b with pid and start.
func (b Baseline) find(pid int, start uint64) (member, bool) {
	i, ok := slices.BinarySearchFunc(b.members, pid, func(m member, pid int) int { return cmp.Compare(m.pid, pid) })
	if !ok || b.members[i].start != start {
		return member{}, false
	}
	return b.members[i], true
}

// spares reports whether SweepSince(b) leaves the process pid that started
// at start alone: it is in b, or it started before b was taken (see
// SweepSince). Where members have an id, the caller checks it too.
func (b Baseline) spares(pid int, start uint64) bool {
	_, ok := b.find(pid, start)
	return ok || start < b.since
}

// Baseline returns the tree's current members: the root and every live
// process that Kill would count as the tree's now. A session takes one
// when its CLI is idle, before a turn, so that the processes the CLI keeps
// across turns (MCP servers, helpers) are in it, and calls SweepSince when
// the turn has ended.
//
// At the Cgroup level the members are those listed in the tree's
// cgroup.procs (and the cgroups below it), each with its start time; no
// scan of /proc is made. At the Tracking level they are the members found
// by one scan of /proc, as Kill finds them (process group, session,
// Marker, parent links, members recorded before), and that scan's members
// are recorded for later Kills; if the scan cannot be had within 250 ms,
// the members are the root, the members recorded so far and their
// descendants by parent links. On macOS they are the root's process group
// and the descendants found by parent links; on Windows, the processes in
// the tree's Job Object.
//
// A member that Baseline misses (its start time could not be read, or the
// scan was not had) is still spared by SweepSince: it started before the
// baseline was taken. Baseline must not be called after Wait.
func (t *Tree) Baseline() Baseline {
	b := Baseline{tree: t}
	t.baseline(&b)
	slices.SortFunc(b.members, func(x, y member) int { return cmp.Compare(x.pid, y.pid) })
	return b
}

// SweepSince kills every member of the tree that is not in b and started
// after b was taken, and waits until they are gone, leaving b's processes,
// the root and every process started before b running. It returns what
// it killed: Report.Killed are the pids sent SIGKILL, Report.Survivors
// those that may still be alive (see Report), Report.Elapsed how long it
// took. It is bounded like Kill (about 5 s), is serialised with Kill, and
// must not be called after Wait. b must come from this tree (it panics
// otherwise); the zero Baseline spares only the root.
//
// A process is the one in b only with the same pid and start time: one
// that reuses the pid of a member of b that has exited is killed. A
// process that started before b was taken, yet is not in b, is spared:
// Baseline may have missed it (see Baseline), and a sweep must never take
// away what the CLI keeps across turns. On Linux start times count clock
// ticks (10 ms), so a process started in the same tick as the baseline
// but missing from it is killed; on Linux 6.9 and newer a member of b is
// also identified by its pidfd's inode number, so even a process that
// reused a member's pid within the member's own clock tick is killed
// (before 6.9 it would be spared: that needs the pid counter to wrap
// within 10 ms).
//
// At the Cgroup level the members are listed from cgroup.procs, as often
// as it takes: each one that is not spared is sent SIGKILL through a
// pidfd opened first and then checked to name a member of the tree's
// cgroup with the start time read (so a pid that is reused meanwhile is
// never hit), the pidfds are polled until their processes have exited,
// and the listing is read again until it shows no process to kill (one
// that a killed process forked before it died, say). Nothing scans /proc.
// Processes that the spared members start while the sweep runs may or may
// not be killed: sweep when the CLI is idle.
//
// At the Tracking level the members are found by scans of /proc as Kill
// finds them, best effort. The members to kill are first stopped (SIGSTOP)
// and the tree scanned again until no new one appears, then killed one by
// one through pidfds checked against their start time; no process group
// is killed, since the root's group holds spared processes. It misses
// what Kill misses (see Tracking and Kill): a process that left the
// session and cleared or overwrote its environment (env -i,
// setproctitle) and lost its parent before a recording of parent links
// saw it (one started by a tool that exited within RecordEvery, as `setsid -f
// env -i CMD` does), unless the tree has a user namespace of its own (see
// Kill), and a sibling made with clone(CLONE_PARENT). What a
// sweep misses stays running until Kill, which misses it too. A session
// that calls Snapshot when a cancel begins, before it interrupts the
// turn, records the parent links of the turn's processes while they
// exist, so that the ones the interrupt orphans are still found.
//
// Why not a child cgroup per turn, killed at its end: processes are born
// in their parent's cgroup, so the tools the CLI starts during a turn
// land in the CLI's cgroup, beside it. A turn's cgroup would hold them
// only if the CLI were moved into it for the turn (a write of its pid to
// the turn cgroup's cgroup.procs) and moved out before the kill; and so
// would every process the CLI keeps across turns (an MCP server starts
// tools too), two moves per process per turn. Each move is a cgroup
// migration, which takes a machine-wide lock for writing that every fork
// and exit takes for reading, and by default waits for an RCU grace
// period: measured on Linux 6.18 (BenchmarkSweep, 2 cores), moving a CLI
// and one helper in and out cost about 9 ms per turn, against about 1 ms
// for Baseline and SweepSince together, most of it waiting for the
// killed processes to exit, which the turn cgroup's kill waits for too.
// The sweep needs no move and no write but the kills, and a sweep after a
// turn that left nothing costs about 0.1 ms.
//
// With Subreaper (or whenever the host reaps orphans, see Kill) the
// killed processes that were re-parented to the host are reaped. On macOS
// the sweep is best effort by process group and parent links, killing by
// pid after a start-time check; on Windows it terminates the Job Object's
// processes that are not spared, through handles that pin them.
func (t *Tree) SweepSince(b Baseline) Report {
	if b.tree != nil && b.tree != t {
		panic("proc: SweepSince with another Tree's Baseline")
	}
	return t.sweepSince(b)
}

// Wait waits for the root to exit, reaps it and releases the Tree's
// resources. Call it once.
func (t *Tree) Wait() (State, error) { return t.wait() }

// loggerOf returns l, or a logger that discards everything when l is nil.
func loggerOf(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// checkAttr rejects an Attr that Start cannot run.
func checkAttr(a *Attr) error {
	if a == nil || a.Path == "" {
		return errors.New("proc: Attr.Path is empty")
	}
	if err := a.Limits.validate(); err != nil {
		return err
	}
	if a.Restrict != nil && runtime.GOOS != "linux" {
		return errors.New("proc: Attr.Restrict is Linux only")
	}
	if a.SysAttr != nil && runtime.GOOS != "linux" {
		return errors.New("proc: Attr.SysAttr is Linux only")
	}
	return limitsSupported(a)
}
