package invoker

import "time"

// Limits bound what a run's processes may use together: the CLI and every
// process it starts (its tools, their children, the servers it keeps). The
// kernel holds them (Linux cgroup controllers): they are set on the run's
// cgroups before the CLI runs its first instruction, and every process of
// the run is born under them, whatever it does to its session or
// environment. The zero value sets no limit.
//
// They hold a process that cannot write cgroupfs. A CLI runs as the
// host's user: where that is root, the CLI and its tools can leave them,
// unless the run is sandboxed (see Sandbox), which makes cgroupfs
// unwritable from inside it.
// A process that moves itself into another cgroup (of cgroup v2 and of
// each v1 hierarchy) is out of the run's limits and out of reach of the
// run's kill, and outlives the run; one that writes its own limit away
// (-1 to memory.limit_in_bytes, max to memory.max) stays in the run
// without it. A host run as a non-root user with a delegated cgroup v2
// runs its CLIs as that user: they cannot leave the delegated cgroup nor
// the limits systemd holds it to, but own the run's cgroups, and so can
// still move to another cgroup below the delegated one and rewrite the
// run's own limits. Memory a run leaves in a tmpfs (a file in /dev/shm)
// outlives it too, charged to the host's cgroup until the file is
// deleted, and a run that fills /dev/shm past Memory gets its CLI, not the
// tool, OOM-killed: the killer weighs processes, not files. docs/limits.md
// (# What a run can still do) has the measurements.
//
// Options.Limits holds for every run of an Invoker, Request.Limits and
// SessionRequest.Limits for one run or session: each of their non-zero
// fields replaces the Options' field. A session's limits hold for its whole
// life, the CLI and every turn's tools together.
//
// A negative value (or a NaN or infinite CPU) is ErrInvalidRequest, and so
// is a value above the largest the kernel takes, which it would refuse or
// read as no limit at all: Memory or MemoryHigh from 2^63 - 4096 bytes up
// (with 4 KiB pages), Processes above 4194303 (pids.max takes at most the
// kernel's PID_MAX_LIMIT, 4194304, one of which the run's start counts),
// CPU above 175921860.44415 cores (a quota of 2^44-1 µs per 100 ms); the
// message names the field and the largest. A limit this host
// cannot enforce (Capabilities.Limits does not list it) fails with
// ErrUnsupported before anything starts, the message naming the limit, why
// and how to get it. What happens past a limit, and how a host is set up to
// enforce them, is in docs/limits.md and the package documentation (# Limits
// and accounting).
type Limits struct {
	// Memory is the most memory the run may hold at once, in bytes, as
	// the kernel's memory controller counts it: anonymous memory, page
	// cache and kernel memory charged to the run's processes. It is a hard
	// maximum (the run cannot swap past it). Past it the kernel reclaims
	// what it can, then kills the run's process that uses the most memory,
	// one process, usually the runaway tool: the CLI sees its tool fail
	// (a KindWarning event says why) and the turn goes on. When the CLI
	// itself is killed, or the run (or turn) fails after a process of it
	// was, it fails with a *LimitError matching ErrResourceLimit, whatever
	// the CLI said of the failure. At least 1 MiB.
	Memory int64
	// MemoryHigh is a throttle level, in bytes: above it the run's
	// allocations are slowed and its memory reclaimed hard, but nothing is
	// killed. cgroup v2 only (memory.high); it is not above Memory.
	MemoryHigh int64
	// Processes is the most processes the run may have at once, threads
	// included, as the kernel's pids controller counts tasks (a Node.js
	// CLI runs a dozen threads before it starts a tool). A fork past it
	// fails (EAGAIN) and nothing is killed: the tool that forked sees the
	// error, and a KindWarning event says so. A run (or turn) that then
	// fails fails with a *LimitError matching ErrResourceLimit, whatever
	// the CLI said of the failure (a CLI that cannot start a thread may
	// exit with a status that means something else).
	Processes int
	// CPU is the most CPU the run may use, in cores: 0.5 is half of one
	// core, 2 two whole cores, as a quota of CPU time in every period of
	// 100 ms. At least 0.01.
	CPU float64
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// Resources are what a run's processes used, measured for every run and
// every turn, with limits or without: Result.Resources.
//
// For Invoke they are the whole run's, from the start of the CLI to the
// reaping of its tree. For a session's Turn they are the turn's, from just
// before its prompt was sent to its end: the CPU time and counters exactly,
// the peaks as an upper bound where the kernel cannot reset them (a peak
// of memory on Linux before 6.12 and a peak of processes are the session's
// highest so far, not only the turn's).
//
// Where they come from depends on the host (Capabilities.LimitsNote says
// which): the cgroup controllers that hold the run, where it has some
// (cgroup v2 with delegated controllers, or the v1 hierarchies of a hybrid
// host as root), count every process, also those that exited between two
// looks; without controllers the figures are sampled from /proc every 300 ms
// while the CLI runs (Sampled), and miss what lives or peaks between two
// samples.
type Resources struct {
	// PeakMemory is the most memory the run held at once, in bytes. From a
	// controller it is what the kernel charged to the run's cgroup
	// (cgroup v2 memory.peak, v1 memory.max_usage_in_bytes): anonymous
	// memory, the page cache of the files it read and wrote, and kernel
	// memory, the figure Limits.Memory is held to. Sampled, it is the sum
	// of the processes' resident set sizes (RSS, page cache not included;
	// pages shared between processes count once per process, so it can
	// overstate), and at the end at least the CLI's own peak RSS, with
	// the children it waited for.
	PeakMemory int64 `json:"peak_memory,omitempty"`
	// CPUTime is the user and system CPU time of the run's processes,
	// those that exited included (cgroup v2 cpu.stat, v1 cpuacct.usage;
	// cgroup v2 counts it exactly even without controllers). Sampled, it
	// is the time of the processes seen, and at the end at least the CLI's
	// own with the children it reaped.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	// PeakProcesses is the most processes (threads included) the run had
	// at once (pids.peak); sampled, the most seen in one sample.
	PeakProcesses int `json:"peak_processes,omitempty"`
	// Sampled says that some figure was sampled from /proc rather than
	// counted by the kernel (see the type's documentation): on cgroup v2
	// without delegated controllers PeakMemory and PeakProcesses are
	// sampled and CPUTime is exact; with no cgroup at all, all three are
	// sampled.
	Sampled bool `json:"sampled,omitempty"`
	// OOMKills counts the run's processes that the kernel's OOM killer
	// killed: under Limits.Memory, or under a limit above it (the host's
	// Budget held by the kernel, the system running out). 0 where no
	// memory controller holds the run.
	OOMKills int `json:"oom_kills,omitempty"`
	// ForksRefused counts the forks (and thread creations) refused
	// because the run had Limits.Processes at once.
	ForksRefused int `json:"forks_refused,omitempty"`
}

// A Budget bounds what the runs of a host use together: the most runs at
// once and the most memory promised at once. It counts runs and bytes,
// not money: what one run may spend in US dollars is
// Request.MaxBudgetUSD, and its error ErrMaxBudget. Give the same *Budget to
// Options.Budget of every Invoker that shares the host (the Invokers of
// several backends, an mcpadapter serving them): all of them then draw on
// it. A Budget's fields are read when the first Invoker is made with it;
// change them later and nothing happens.
//
// A run (or a session, from OpenSession until Close) that does not fit
// waits, first come first served, before anything starts: a large run
// at the head of the queue holds back the smaller ones behind it rather
// than wait for good. The wait is cancelled by the call's context: the
// error then matches the context's error, says that the run was queued
// and how many were ahead, and nothing started (Result.Containment is "").
// While a run waits, Request.OnEvent gets a KindQueued event when the wait
// starts and whenever its place changes; Result.Queued says how long it
// waited; and the span and metrics record it (see # Telemetry in the
// package documentation). A session's opening has no OnEvent: its wait
// shows in its span and metrics, and in the Options.Logger.
type Budget struct {
	// Runs is the most runs and open sessions at once; 0 sets no bound.
	Runs int
	// Memory is the most memory promised at once, in bytes: the sum of
	// the Limits.Memory of the runs and sessions admitted. With it, every
	// run must have a memory limit (Options.Limits or Request.Limits), or
	// it fails with ErrInvalidRequest: the budget counts promises, and a
	// run without one promises nothing it can be held to. A run that
	// promises more than the whole budget is ErrInvalidRequest too. 0 sets
	// no bound.
	//
	// Where the kernel can hold the sum as well (Capabilities.LimitsNote
	// says whether), the engine sets it as a limit on the cgroup that
	// holds all of the process's runs under one Options.CgroupParent, so
	// that runs whose processes use more than they promised still cannot
	// take more than Memory together: past it the kernel's OOM killer
	// kills the largest process among them, whichever run it belongs to.
	// That cgroup is the process's, not the Budget's: every run of the
	// process under that parent is held to it, also those of Invokers
	// given no Budget or another one (whose Memory then replaces it).
	// Use one Budget per process.
	Memory int64
	// WaitRateLimits makes a run that fails because the model provider's
	// rate limit was reached, and says when it resets (a *LimitError
	// matching ErrRateLimited with ResetsAt), hold back the new runs and
	// sessions of the same backend until then: they wait at a gate, as
	// they wait for the budget (cancellable, with KindQueued events whose
	// RateLimit.ResetsAt says until when), rather than start only to fail.
	// Runs already started go on.
	WaitRateLimits bool
}
