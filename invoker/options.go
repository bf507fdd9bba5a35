package invoker

import (
	"log/slog"
	"time"
)

// An Option configures an Invoker. Options are shared by all backends; each
// sets one documented setting, absence means the documented default, and
// their order does not matter.
type Option func(*config)

// Defaults of the settings that options change.
const (
	DefaultInterruptGrace = 1 * time.Second
	DefaultTerminateGrace = 2 * time.Second
	DefaultWaitDelay      = 250 * time.Millisecond
	DefaultMaxLineSize    = 64 << 20
	DefaultStderrTail     = 64 << 10
)

type config struct {
	binary            string
	interruptGrace    time.Duration
	terminateGrace    time.Duration
	waitDelay         time.Duration
	firstEventTimeout time.Duration
	idleTimeout       time.Duration
	maxLineSize       int
	stderrTail        int
	logger            *slog.Logger
	pty               bool
	subreaper         bool
	env               []string
	inheritEnv        func(key string) bool
	containment       Containment
	cgroupParent      string
	turnGrace         time.Duration // sessions: see WithTurnInterruptGrace
}

func newConfig(opts []Option) config {
	c := config{
		interruptGrace: DefaultInterruptGrace,
		terminateGrace: DefaultTerminateGrace,
		waitDelay:      DefaultWaitDelay,
		maxLineSize:    DefaultMaxLineSize,
		stderrTail:     DefaultStderrTail,
		turnGrace:      DefaultTurnInterruptGrace,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithBinary sets the CLI's executable. A name without a slash is looked up
// on PATH when Invoke runs; a path is used as given. The default is the
// CLI's usual name ("codex", "gemini", "claude").
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithInterruptGrace sets how long Invoke waits, after interrupting the CLI
// (SIGINT to its process group, or Ctrl-C through the PTY), before it sends
// SIGTERM. The default is DefaultInterruptGrace. Zero skips the interrupt
// step.
func WithInterruptGrace(d time.Duration) Option {
	return func(c *config) { c.interruptGrace = max(d, 0) }
}

// WithTerminateGrace sets how long Invoke waits after SIGTERM before it
// sends SIGKILL to the group and every descendant. The default is
// DefaultTerminateGrace. Zero skips the SIGTERM step.
func WithTerminateGrace(d time.Duration) Option {
	return func(c *config) { c.terminateGrace = max(d, 0) }
}

// WithWaitDelay bounds how long Invoke waits for the CLI's stdout and stderr
// to reach end of file once the process tree has been killed, for instance
// when a process outside the tree still holds them open. The delay is
// counted once, from the sweep; no write restarts it. At the delay each
// stream still open delivers what its pipe held at that moment and is then
// closed, whatever a writer does, and Invoke returns. Output the tree wrote
// is never cut short: with every writer dead, the streams are read to their
// end however long a slow OnEvent takes. The default is DefaultWaitDelay.
func WithWaitDelay(d time.Duration) Option {
	return func(c *config) { c.waitDelay = max(d, 0) }
}

// WithFirstEventTimeout stops the run with ErrFirstEventTimeout when the CLI
// has printed no event this long after it started. Zero (the default)
// means no limit.
func WithFirstEventTimeout(d time.Duration) Option {
	return func(c *config) { c.firstEventTimeout = max(d, 0) }
}

// WithIdleTimeout stops the run with ErrIdleTimeout when the CLI has
// printed nothing on stdout or stderr for this long. Zero (the default)
// means no limit.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) { c.idleTimeout = max(d, 0) }
}

// WithMaxLineSize sets the longest stdout line that is decoded. A longer
// line is skipped without being buffered, reported as a KindWarning event,
// and streaming goes on; since the line may have held the final answer or
// the terminal event, the run then fails with an error that matches
// ErrLineTooLong (and ErrNoResult when no terminal event came). The
// default is DefaultMaxLineSize (64 MiB); values below 64 KiB are raised
// to 64 KiB.
func WithMaxLineSize(n int) Option {
	return func(c *config) { c.maxLineSize = max(n, 64<<10) }
}

// WithStderrTail sets how many trailing bytes of stderr are kept for
// Result.Stderr and error messages. The default is DefaultStderrTail.
func WithStderrTail(n int) Option {
	return func(c *config) { c.stderrTail = max(n, 1024) }
}

// WithLogger sets a logger for the lifecycle of runs: start, signals sent,
// processes swept. A nil logger (the default) discards everything.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPTY runs the CLI with a pseudo-terminal as its controlling terminal
// and standard output. Cancellation then begins by writing Ctrl-C (0x03)
// to the terminal instead of sending SIGINT. The prompt is still written
// to a pipe on standard input: a terminal cannot carry a prompt of any size
// followed by end of file. PTY mode is not available on Windows.
func WithPTY(on bool) Option { return func(c *config) { c.pty = on } }

// WithSubreaper makes the host process a child subreaper (Linux
// PR_SET_CHILD_SUBREAPER) for the lifetime of the process, so that
// processes a CLI double-forks re-parent to the host instead of init. It
// matters at the tracking level (see ContainTracking), where it keeps
// such orphans findable; at the cgroup level nothing escapes anyway, and
// the host then reaps the orphans it adopts. It changes the whole host process; re-parented
// processes of a run are reaped by pid, never by waiting for any child.
// It has no effect on other systems. Off by default.
func WithSubreaper(on bool) Option { return func(c *config) { c.subreaper = on } }

// WithEnv adds KEY=VALUE pairs to the environment of every run. They
// override the host's values; Request.Env overrides them.
func WithEnv(kv ...string) Option {
	return func(c *config) { c.env = append(c.env, kv...) }
}

// WithInheritEnv sets which of the host's environment variables a run
// inherits: those for which keep returns true. The default (nil) inherits
// all but the variables known to break nested runs, which backends strip in
// any case.
func WithInheritEnv(keep func(key string) bool) Option {
	return func(c *config) { c.inheritEnv = keep }
}

// WithContainment asks for a containment level (see Containment). The
// default, ContainAuto, takes the best the host allows; ContainCgroup
// makes Invoke fail with ErrContainment, before anything starts, where no
// cgroup can be had; ContainTracking forces the fallback.
func WithContainment(c Containment) Option { return func(cfg *config) { cfg.containment = c } }

// WithCgroupParent names the cgroup v2 directory under which runs get
// their cgroups, such as a delegated subtree of a service
// (/sys/fs/cgroup/system.slice/app.service/runs). The default is the
// host's own cgroup. The host makes one cgroup of its own there and one
// per run below it, and removes them; a keeper process removes them if
// the host dies.
func WithCgroupParent(dir string) Option { return func(cfg *config) { cfg.cgroupParent = dir } }
