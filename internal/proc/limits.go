package proc

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Limits bound what the processes of a tree may use together. The kernel
// enforces them (Linux cgroup controllers): they are set on the tree's
// cgroups before the root runs its first instruction, and every process
// the tree starts is born under them, whatever it does to its session or
// environment. A process that may write cgroupfs (one run as root) can
// still move itself out of them or write them away (docs/limits.md, # What
// a run can still do). The zero value sets no limit.
//
// Where the controllers are: cgroup v2 controllers (memory, pids, cpu)
// enabled in the subtree that holds the trees (see Attr.CgroupParent and
// DelegateOwnCgroup), else the cgroup v1 hierarchies of a hybrid host
// (memory, pids, cpu), which root may write. A limit neither can enforce
// makes Start fail with a *LimitUnavailableError before anything starts;
// ProbeLimits tells which can be enforced without starting anything.
type Limits struct {
	// MemoryMax is the most memory, in bytes, the tree may hold at once,
	// as the memory controller counts it: anonymous memory, page cache
	// and kernel memory charged to the tree. It is a hard maximum: the
	// tree cannot swap to exceed it (memory.swap.max is 0; v1:
	// memory.memsw.limit_in_bytes equals it). Past it the kernel reclaims
	// what it can, then its OOM killer kills the process of the tree that
	// uses the most memory (one process, not the whole tree:
	// memory.oom.group is 0), usually the runaway tool rather than the
	// CLI. No process outside the tree is considered. 0 sets no limit.
	MemoryMax int64
	// MemoryHigh is a throttle level, in bytes: above it the tree's
	// allocations are slowed and its memory reclaimed hard, but nothing
	// is killed (cgroup v2 memory.high; cgroup v1 has no equivalent, so
	// it is unavailable there). 0 sets none.
	MemoryHigh int64
	// Tasks is the most tasks the tree may have at once: processes and
	// their threads, as the pids controller counts them (a Node.js CLI
	// runs a dozen threads). A fork or thread creation past it fails with
	// EAGAIN; nothing is killed. 0 sets no limit.
	Tasks int64
	// CPU is the most CPU the tree may use, in cores: 0.5 is half of one
	// core, 2 is two whole cores. It is a quota of CPU time per period of
	// 100 ms (cpu.max; v1: cpu.cfs_quota_us), so a tree held to 0.5 runs
	// at most 50 ms of every 100 ms. At least 0.01. 0 sets no limit.
	CPU float64
}

// cpuPeriod is the period of the CPU quota, in microseconds: the kernel's
// default.
const cpuPeriod = 100_000

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// validate rejects limits no controller can take, and limits above
// MaxLimits.
func (l Limits) validate() error {
	switch {
	case l.MemoryMax < 0, l.MemoryHigh < 0, l.Tasks < 0, l.CPU < 0, math.IsNaN(l.CPU) || math.IsInf(l.CPU, 0):
		return fmt.Errorf("proc: negative or invalid limit in %+v", l)
	case l.MemoryMax > 0 && l.MemoryMax < 1<<20:
		return fmt.Errorf("proc: a memory limit of %d bytes is below 1 MiB: no process can start under it", l.MemoryMax)
	case l.MemoryHigh > 0 && l.MemoryMax > 0 && l.MemoryHigh > l.MemoryMax:
		return fmt.Errorf("proc: the memory throttle level %s is above the memory limit %s", FormatBytes(l.MemoryHigh), FormatBytes(l.MemoryMax))
	case l.CPU > 0 && l.CPU < 0.01:
		return fmt.Errorf("proc: a CPU limit of %g cores is below the kernel's least quota (0.01)", l.CPU)
	}
	return l.checkRange()
}

// each calls f for every resource l limits, in the order of Resource.
func (l Limits) each(f func(r Resource)) {
	for r := Memory; r <= CPU; r++ {
		if l.value(r) != 0 {
			f(r)
		}
	}
}

// value returns the limit of r as a number (bytes, tasks, or cores for
// CPU, rounded to the quota's microseconds per period).
func (l Limits) value(r Resource) float64 {
	switch r {
	case Memory:
		return float64(l.MemoryMax)
	case MemoryHigh:
		return float64(l.MemoryHigh)
	case Tasks:
		return float64(l.Tasks)
	case CPU:
		return l.CPU
	}
	return 0
}

// cpuQuota returns the quota in microseconds per cpuPeriod.
func (l Limits) cpuQuota() int64 { return int64(math.Round(l.CPU * cpuPeriod)) }

// Resource names a resource that Limits bound.
type Resource int

// The resources of Limits.
const (
	// Memory is Limits.MemoryMax.
	Memory Resource = iota + 1
	// MemoryHigh is Limits.MemoryHigh.
	MemoryHigh
	// Tasks is Limits.Tasks.
	Tasks
	// CPU is Limits.CPU.
	CPU
)

// String returns the resource's name: "memory", "memory throttle",
// "tasks" or "cpu".
func (r Resource) String() string {
	switch r {
	case Memory:
		return "memory"
	case MemoryHigh:
		return "memory throttle"
	case Tasks:
		return "tasks"
	case CPU:
		return "cpu"
	}
	return "resource?"
}

// ErrLimitUnavailable is wrapped by the error Start returns when
// Attr.Limits asks for a limit this host cannot enforce on the tree; the
// error is a *LimitUnavailableError, and nothing has started. SetHostLimits
// returns it too.
var ErrLimitUnavailable = errors.New("proc: limit cannot be enforced on this host")

// A LimitUnavailableError says that a limit cannot be enforced here, why, and
// how to get it. It wraps ErrLimitUnavailable and its cause, if any.
type LimitUnavailableError struct {
	// Resource is the limit that cannot be enforced.
	Resource Resource
	// Reason says why, such as "no memory controller is delegated to
	// /sys/fs/cgroup/user.slice/... and no cgroup v1 memory hierarchy is
	// writable".
	Reason string
	// Fix says how to get it.
	Fix string
	// Err is the cause (a failed write, say), or nil.
	Err error
}

func (e *LimitUnavailableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "proc: a %s limit cannot be enforced here: %s", e.Resource, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Fix != "" {
		b.WriteString(" (" + e.Fix + ")")
	}
	return b.String()
}

// Unwrap returns ErrLimitUnavailable and the cause.
func (e *LimitUnavailableError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrLimitUnavailable}
	}
	return []error{ErrLimitUnavailable, e.Err}
}

// ErrExhausted is wrapped by the error Start (or Exhausted) returns when
// the host has run out of descriptors or processes; the error is an
// *ExhaustedError.
var ErrExhausted = errors.New("proc: the host ran out of a resource")

// An ExhaustedError says that a process could not be started because the
// host ran out of descriptors (EMFILE, ENFILE) or processes (EAGAIN from
// fork), which limit was reached and how to raise it. It wraps
// ErrExhausted and the error of the call that failed.
type ExhaustedError struct {
	// Resource is "descriptors" or "processes".
	Resource string
	// Limits describes the limits in force, such as "RLIMIT_NOFILE
	// (ulimit -n) is 1024".
	Limits []string
	// Fix says how to raise them.
	Fix string
	// Err is the failed call's error (a *fs.PathError holding EMFILE,
	// say).
	Err error
}

func (e *ExhaustedError) Error() string {
	msg := fmt.Sprintf("proc: out of %s: %v", e.Resource, e.Err)
	if len(e.Limits) > 0 {
		msg += "; " + strings.Join(e.Limits, ", ")
	}
	if e.Fix != "" {
		msg += " (" + e.Fix + ")"
	}
	return msg
}

// Unwrap returns ErrExhausted and the failed call's error.
func (e *ExhaustedError) Unwrap() []error { return []error{ErrExhausted, e.Err} }

// Exhausted returns an *ExhaustedError for err when err says that the host
// ran out of descriptors (EMFILE, ENFILE) or of processes (EAGAIN), naming
// the limits in force, and err itself otherwise (nil for nil). Start
// applies it to its own errors; a caller applies it to the errors of what
// it makes for a run, such as the pipes of the child's streams.
func Exhausted(err error) error { return exhausted(err) }

// Usage is what a tree's processes used, and what its limits did to them.
// Figures come from the cgroup controllers that hold the tree where there
// are some (exact, including every process that has exited), else from
// samples of /proc taken every RecordEvery while the root runs (see the
// *Sampled fields): a sample misses what lives or peaks between two.
type Usage struct {
	// MemoryPeak is the most memory the tree held at once, in bytes. From
	// a controller it is what the controller charged (memory.peak, v1
	// memory.max_usage_in_bytes: anonymous memory, page cache and kernel
	// memory); sampled, it is the sum of the members' resident set sizes
	// (RSS: pages shared between members are counted once per member, so
	// it can overstate; not PSS, which costs a walk of every page table),
	// and at Wait at least the root's peak RSS (its rusage's ru_maxrss,
	// which holds the descendants it reaped), for a tree that ended
	// between two samples.
	MemoryPeak int64
	// CPU is the user and system CPU time of the tree's processes, those
	// that have exited included (cpu.stat usage_usec, v1 cpuacct.usage).
	// Sampled, it is the utime, stime, cutime and cstime of the members
	// seen (10 ms ticks), and at Wait at least the root's own rusage,
	// which holds the descendants it reaped: a process whose CPU time went
	// to a parent outside the tree (an orphan reaped by init) is missed.
	CPU time.Duration
	// TasksPeak is the most tasks (processes and threads) of the tree at
	// once (pids.peak); sampled, the most seen in one sample, and at Wait
	// at least 1 (the root).
	TasksPeak int64
	// MemorySampled, CPUSampled and TasksSampled say which figures were
	// sampled rather than read from a controller.
	MemorySampled, CPUSampled, TasksSampled bool

	// OOMKills counts the tree's processes that the kernel's OOM killer
	// killed: under the tree's MemoryMax, or under a limit above it (the
	// host's, see SetHostLimits) or the system's running out of memory
	// (OOMOutside). 0 where no memory controller holds the tree.
	OOMKills int64
	// OOMOutside says that the OOM kills were not caused by the tree's
	// own MemoryMax (there is none, or the tree never reached it).
	OOMOutside bool
	// RootOOMKilled says that the root itself was OOM-killed: it died of
	// SIGKILL that Kill did not send, while OOMKills rose. (A SIGKILL
	// sent by someone else at the moment a member was OOM-killed would
	// be taken for it.)
	RootOOMKilled bool
	// ForksRefused counts forks and thread creations refused because the
	// tree had Limits.Tasks tasks (pids.events max).
	ForksRefused int64
	// Throttled counts the times the tree went above MemoryHigh and was
	// throttled (memory.events high).
	Throttled int64

	// Limits are the tree's limits.
	Limits Limits
}

// FormatBytes formats n bytes in binary units, such as "512 MiB" or
// "511.8 MiB".
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// Usage returns what the tree has used so far, from its start; after Wait,
// what it used in all, which no longer changes. It costs a few reads of
// small cgroup files (up to five; 40 to 80 µs measured on Linux 6.18 with
// cgroup v1, BenchmarkLimitsUsage), or nothing where the figures are
// sampled; call it after Wait, and while the tree runs where its peaks
// are wanted. To learn whether a limit did something (a tool OOM-killed
// at a tool's result), Counts reads less.
//
// Without Attr.Account, only the figures of the controllers that hold the
// tree's limits are there (and the counters of what those limits did).
func (t *Tree) Usage() Usage { return t.usage() }

// Counts returns the counters of what the tree's limits did so far
// (OOMKills, RootOOMKilled, Throttled, ForksRefused) and its Limits, with
// neither its peaks nor its CPU time, nor OOMOutside, which needs the
// memory peak on cgroup v1: it reads only the controllers' event files
// (two, where Usage reads up to five). After Wait it returns what Usage
// does.
func (t *Tree) Counts() Usage { return t.counts() }

// A Mark is a moment of a tree's accounting, taken by Tree.Mark, from
// which Tree.Since measures. The zero Mark is the tree's start.
type Mark struct {
	tree *Tree
	seq  uint64 // the mark's number on its tree, from 1
	base Usage  // the counters and CPU time when it was taken
	// exited says that the root had exited when it was taken.
	exited bool
	// baseHits is the count of times the tree had reached its memory
	// limit when it was taken (cgroup v2).
	baseHits int64
}

// Mark starts a new accounting period: Since(m) reports what the tree
// used after it. A session takes one before each turn (while the CLI is
// idle) and calls Since when the turn has ended, for the turn's usage.
//
// Peaks since a mark are exact for the latest Mark only: taking one
// resets the v1 controller's memory peak (memory.max_usage_in_bytes, the
// whole-run peak being kept aside) and, on cgroup v2, opens memory.peak
// and resets it for that open file (Linux 6.12 and newer), a descriptor
// held until the next Mark, Since or Wait. Where the peak cannot be reset
// (older kernels; pids.peak never can) a peak since the mark is the
// tree's peak so far, an upper bound. Mark must not be called after Wait.
func (t *Tree) Mark() Mark { return t.mark() }

// Since returns what the tree used after m: CPU time, counters (OOM
// kills, forks refused, throttling) and peaks (see Mark for which are
// exact). RootOOMKilled is set only when the root exited after m. It may
// be called after Wait, for the tree's last period (a session whose CLI
// died in a turn). m must come from this tree (it panics otherwise); the
// zero Mark is the tree's start.
func (t *Tree) Since(m Mark) Usage {
	if m.tree != nil && m.tree != t {
		panic("proc: Since with another Tree's Mark")
	}
	return t.since(m)
}

// Support says which limits a host can enforce, and how it measures
// usage, for trees started with the same containment and cgroup parent.
type Support struct {
	// Memory, MemoryHigh, Tasks and CPU are nil when Start can enforce a
	// limit on the resource, else the *LimitUnavailableError it would return.
	Memory, MemoryHigh, Tasks, CPU error
	// HostMemory is nil when SetHostLimits can make the kernel hold the
	// sum of the trees' memory, else the *LimitUnavailableError it would
	// return.
	HostMemory error
	// MemorySampled, CPUSampled and TasksSampled say which figures of
	// an accounted tree's Usage are sampled from /proc.
	MemorySampled, CPUSampled, TasksSampled bool
	// Where describes the controllers found, such as "cgroup v2
	// controllers memory pids cpu in /sys/fs/cgroup/app.service" or
	// "cgroup v1 memory, pids, cpu; membership in cgroup v2".
	Where string
}

// Err returns the error of r in s (nil when a limit on r can be enforced).
func (s Support) Err(r Resource) error {
	switch r {
	case Memory:
		return s.Memory
	case MemoryHigh:
		return s.MemoryHigh
	case Tasks:
		return s.Tasks
	case CPU:
		return s.CPU
	}
	return nil
}

// ProbeLimits reports which limits trees started with containment want
// and cgroup parent can get, and how their usage is measured, without
// starting anything. On Linux it prepares the cgroups later Starts use,
// as Probe does.
func ProbeLimits(want Containment, cgroupParent string) Support {
	return probeLimits(want, cgroupParent)
}

// SetHostLimits sets limits on the cgroup that holds every tree this
// process starts under cgroupParent ("" for the default parent): the
// kernel then holds the sum of those trees to them (MemoryMax; other
// fields must be 0), so that trees that under-declare their needs
// still cannot take the host's memory together. A zero field removes that
// limit. It applies to the trees running now and later; on a cgroup v1
// host every later tree is placed under the limited v1 cgroups, even
// without limits of its own. Where the kernel cannot hold the sum it
// returns a *LimitUnavailableError and sets nothing. Safe for concurrent use;
// it costs a write or two.
func SetHostLimits(cgroupParent string, l Limits) error {
	if l.MemoryHigh != 0 || l.Tasks != 0 || l.CPU != 0 {
		return errors.New("proc: SetHostLimits takes MemoryMax only")
	}
	if err := l.validate(); err != nil {
		return err
	}
	return setHostLimits(cgroupParent, l)
}

// HoldHostMemory asks the kernel to hold the memory of every tree this
// process starts under cgroupParent to m bytes together (SetHostLimits
// with MemoryMax m), once per parent and amount: a caller may call it
// before every start. It returns why the kernel cannot hold the sum on
// the call that asked, nil on the later ones.
func HoldHostMemory(cgroupParent string, m int64) error {
	o, _ := heldSums.LoadOrStore(heldSum{cgroupParent, m}, new(sync.Once))
	var err error
	o.(*sync.Once).Do(func() { err = SetHostLimits(cgroupParent, Limits{MemoryMax: m}) })
	return err
}

// heldSums records the memory sums HoldHostMemory asked for.
var heldSums sync.Map // heldSum → *sync.Once

type heldSum struct {
	parent string
	m      int64
}

// DelegateOwnCgroup prepares the host's own cgroup to hold trees with
// cgroup v2 limits: it moves the host process into a new leaf below its
// cgroup, named clinvoke-host, then enables the memory, pids and cpu
// controllers delegated to its cgroup for the cgroups below it, so that
// trees started under the default parent get v2 limits. It is meant for a
// host that owns its cgroup: a systemd service with Delegate=yes, or a
// scope made by `systemd-run --user -p Delegate=yes --scope`. It changes
// the whole process (a process-wide change, only by opt-in): call it once
// at start-up, before starting trees. It fails, changing nothing, when
// the cgroup holds processes other than the host and its cgroup keeper
// (cgroup v2 lets a cgroup with processes give no controller to its
// children), or no controller is delegated to it. Calling it again after
// it succeeded does nothing.
func DelegateOwnCgroup() error { return delegateOwnCgroup() }

// DelegateOwnCgroupOnce is DelegateOwnCgroup once per process, for a
// caller that asks for it wherever it is configured: the first call
// delegates, and every call returns that first call's result, a failure
// included, without trying again (DelegateOwnCgroup itself tries again
// after a failure).
func DelegateOwnCgroupOnce() error { return delegatedOnce() }

// delegatedOnce is the first result of DelegateOwnCgroup.
var delegatedOnce = sync.OnceValue(DelegateOwnCgroup)
