package invoker

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options configure an Invoker: how its CLI is found and started, how long
// each step of a stop may take, and what the runs' output may cost. A
// backend's New takes them:
//
//	inv := claude.New(invoker.Options{IdleTimeout: 5 * time.Minute})
//
// The zero value of every field means its default, as in the standard
// library's configuration structs. A duration field that can also mean
// "none" (a grace, the wait delay) takes a negative value for that.
//
// New takes the Options as a variadic argument so that New() alone works;
// when several are given, each non-zero field of a later one replaces the
// same field of an earlier one (Env is appended; each non-zero field of
// Limits replaces the same field). A bool field (PTY, Subreaper,
// SweepEveryTurn, DelegateCgroup) is therefore switched on by any of them and
// never off again: false is its zero value, which means "not set", as
// zero means the default for every other field. Leave a bool out of every
// Options that should not set it.
type Options struct {
	// Binary is the CLI's executable: a name looked up on PATH, or a path
	// (a relative one from the program's working directory at each run,
	// not from the run's Workdir). The default is the CLI's usual name
	// ("codex", "gemini", "claude").
	Binary string

	// Env holds KEY=VALUE pairs added to the environment of every run;
	// the backend's own variables and Request.Env override them.
	Env []string

	// InheritEnv, if not nil, decides which of the host's environment
	// variables a run inherits (by name); nil inherits them all, as
	// os/exec does, less the variables known to break nested runs (such
	// as CLAUDECODE). Return false for every key for a clean environment.
	InheritEnv func(key string) bool

	// FirstEventTimeout, when positive, bounds the time from a turn's
	// start to the CLI's first event (for a session, also the handshake):
	// a CLI that prints nothing useful by then is stopped with
	// ErrFirstEventTimeout. Zero means no limit.
	FirstEventTimeout time.Duration

	// IdleTimeout stops a turn whose CLI printed nothing for that long,
	// with ErrIdleTimeout. Time spent in OnEvent does not count. The
	// default is 15 minutes, longer than the longest silence of a CLI at
	// work (Claude Code runs a shell command for up to 10 minutes without
	// a word; Codex and Gemini CLI print nothing while a command runs), so
	// that a stalled CLI cannot hang a program for good; negative means no
	// limit. A program that streams text (Request.Deltas) sees every
	// token, and can use a much shorter one.
	IdleTimeout time.Duration

	// InterruptGrace is how long the CLI has to exit after SIGINT (or
	// Ctrl-C in PTY mode), the ladder's first step, before SIGTERM. The
	// default is 1 s; negative skips the step.
	InterruptGrace time.Duration

	// TerminateGrace is how long the CLI has to exit after SIGTERM before
	// SIGKILL. The default is 2 s; negative skips the step.
	TerminateGrace time.Duration

	// StopGraces, if not nil, is asked for the ladder's graces of a run
	// or session stopped by its context, with the cancel's cause
	// (context.Cause); when ok, interrupt and terminate replace
	// InterruptGrace and TerminateGrace for that stop (negative skips the
	// step). A server uses it to stop runs faster when it shuts down than
	// when a client cancels one (see mcpadapter.ErrShuttingDown, the cause
	// of the cancels of mcpadapter.Tools.Shutdown).
	StopGraces func(cause error) (interrupt, terminate time.Duration, ok bool)

	// TurnInterruptGrace is how long a cancelled or timed-out session
	// turn waits, after the CLI was asked to end the turn in its own
	// protocol, for the turn to end; a CLI that has not ended it by then is
	// stopped with the signal ladder and the session is closed. It is also
	// how long Session.Close waits for the CLI to exit at the end of its
	// input. The default is 5 s (the pinned CLIs end an interrupted turn
	// within 0.3 s on an idle machine, but Gemini took 2.5 s to end one
	// whose shell tool it was killing on a loaded one); negative skips the
	// request: the session is then closed with the ladder at once. Invoke
	// does not use it.
	TurnInterruptGrace time.Duration

	// WaitDelay bounds the wait for the CLI's stdout and stderr to reach
	// end of file once its tree is gone, counted once from the sweep, for
	// pipes held open by a process outside the run's tree (see
	// Result.OutputCut). The default is 250 ms; negative closes them at
	// once.
	WaitDelay time.Duration

	// MaxLineSize is the longest stdout line decoded, in bytes; a longer
	// line is skipped with a KindWarning event, and the turn fails with
	// ErrLineTooLong: a one-shot run once the CLI exits, a turn of a
	// session (or a run that Invoke carries in one) at once, ending the
	// session (see Session.Turn). The default is 64 MiB; values below
	// 64 KiB are raised to 64 KiB.
	MaxLineSize int

	// StderrTail is how much of the end of the CLI's standard error is
	// kept for Result.Stderr and error messages, in bytes. The default is
	// 64 KiB; values below 1 KiB are raised to 1 KiB.
	StderrTail int

	// Logger receives the engine's debug log (starts, signals, sweeps)
	// and its warnings. Nil means silence.
	Logger *slog.Logger

	// PTY runs the CLI with a pseudo-terminal as its standard output, for
	// CLIs that behave differently without one; the interrupt is then
	// Ctrl-C written to the terminal. Unix only.
	PTY bool

	// Subreaper makes the host a child subreaper (PR_SET_CHILD_SUBREAPER,
	// Linux) so that orphans of the tracking level re-parent to it and
	// stay findable. It changes the host process, so it is opt-in.
	Subreaper bool

	// Containment forces a containment level: "cgroup" (Linux, fails with
	// ErrContainment before anything starts where no writable cgroup v2
	// can be had) or "tracking" (the Linux fallback). "" chooses the best
	// level this machine gives; Capabilities.Containment reports it.
	Containment string

	// SweepEveryTurn makes a session kill, when any turn ends, every
	// process the turn started that still runs, as it does after a turn
	// that was cancelled or timed out: "Turn returned" then means "the
	// turn's tools are gone". It is off by default because the CLIs keep
	// some of a turn's processes on purpose: Codex's background terminals
	// (read again in later turns until thread/backgroundTerminals/clean),
	// Claude Code's background shells, and MCP servers a CLI starts on
	// their first use, which a sweep after that turn would take away. What
	// ran before the turn, the CLI and what it keeps across turns, is
	// never swept. See the package documentation for what the tracking
	// level can miss.
	SweepEveryTurn bool

	// CgroupParent names a cgroup v2 directory, writable by the host's
	// user, under which runs get their cgroups. The default is the host's
	// own cgroup. The kernel starts processes in those cgroups only for a
	// host that runs inside the directory (cgroup v2 lets a process start
	// one in another cgroup only if it may write cgroup.procs of the
	// cgroup that holds both): it serves a host moved into a cgroup handed
	// to its user, or below it. For a host outside it, runs get the
	// tracking level and Capabilities.ContainmentNote says why, or, with
	// Containment "cgroup", fail with ErrContainment.
	CgroupParent string

	// TracerProvider receives a span for each run and each session turn,
	// with events for the start, the first event, each tool call, each
	// step of the ladder and the sweep (see # Telemetry in the package
	// documentation). Nil means otel.GetTracerProvider(): a program that
	// installs no OpenTelemetry SDK records nothing.
	TracerProvider trace.TracerProvider

	// MeterProvider receives the runs' metrics: runs started, ended (by
	// outcome) and in flight, durations, time to first event, how long a
	// stop takes to leave nothing behind, processes swept, survivors,
	// tokens and cost, the resources the runs used, and the waits for the
	// Budget. Nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Limits bound what the processes of each run (and each session, for
	// its whole life) use together: memory, processes, CPU (see Limits).
	// Request.Limits and SessionRequest.Limits replace its non-zero
	// fields for one run. Capabilities.Limits says which this host can
	// enforce.
	Limits Limits

	// Sandbox asks the kernel to hold what each run's processes may touch
	// in the filesystem (see Sandbox); the zero value asks for nothing.
	// Request.Sandbox and SessionRequest.Sandbox replace its non-zero
	// fields for one run. Capabilities.Sandbox says whether this host
	// holds it.
	Sandbox Sandbox

	// Budget, if not nil, bounds the runs of every Invoker given the same
	// pointer: the most runs and sessions at once and the most memory
	// they promise (see Budget). A run that does not fit waits, first
	// come first served, before anything starts.
	Budget *Budget

	// DelegateCgroup moves the host process into a leaf cgroup below its
	// own cgroup (clinvoke-host), so that its cgroup can give the cgroup v2
	// memory, pids and cpu controllers systemd delegated to it to the
	// runs' cgroups below it, and Limits can be enforced there. It is
	// meant for a host that owns its cgroup: a systemd service with
	// Delegate=yes, or a scope made by `systemd-run --user -p Delegate=yes
	// --scope`; it fails, changing nothing, when the cgroup holds other
	// processes (a login session's). It changes the whole process, once,
	// when the first Invoker with it is made: opt-in, as Subreaper is.
	// Capabilities.LimitsNote says whether it worked, and why not.
	DelegateCgroup bool
}
