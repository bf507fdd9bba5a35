package driver

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// Limits and accounting: a run's invoker.Limits as proc's, checked before
// anything starts; what proc measured as invoker.Resources; and what the
// limits did, as warnings while the CLI lives and as the run's error once
// the CLI was killed. Admission to the Budget is in admission.go.

// overrideLimits returns base with each non-zero field of over in its
// place: Options.Limits with a request's.
func overrideLimits(base, over invoker.Limits) invoker.Limits {
	set(&base.Memory, over.Memory)
	set(&base.MemoryHigh, over.MemoryHigh)
	set(&base.Processes, over.Processes)
	set(&base.CPU, over.CPU)
	return base
}

// procLimits returns l as proc holds it.
func procLimits(l invoker.Limits) proc.Limits {
	return proc.Limits{MemoryMax: l.Memory, MemoryHigh: l.MemoryHigh, Tasks: int64(l.Processes), CPU: l.CPU}
}

// limitFields ties each field of invoker.Limits to proc's resource, in the
// order of the struct.
var limitFields = []struct {
	name string
	res  proc.Resource
	set  func(l invoker.Limits) bool
}{
	{"Memory", proc.Memory, func(l invoker.Limits) bool { return l.Memory != 0 }},
	{"MemoryHigh", proc.MemoryHigh, func(l invoker.Limits) bool { return l.MemoryHigh != 0 }},
	{"Processes", proc.Tasks, func(l invoker.Limits) bool { return l.Processes != 0 }},
	{"CPU", proc.CPU, func(l invoker.Limits) bool { return l.CPU != 0 }},
}

// limitsFor returns the limits of a run whose request asks for req: the
// Options' with the request's non-zero fields in their place.
func (c *config) limitsFor(req invoker.Limits) invoker.Limits { return overrideLimits(c.limits, req) }

// checkLimits checks the limits of a run or session whose request asks for
// req, before anything starts: values the kernel can take
// (ErrInvalidRequest), limits this host can enforce (ErrUnsupported), and
// a promise that fits the Budget (ErrInvalidRequest).
func (e *engine) checkLimits(req invoker.Limits) error {
	if err := e.cfg.budgetErr; err != nil {
		return err
	}
	l := e.cfg.limitsFor(req)
	if err := validLimits(l); err != nil {
		return err
	}
	if !l.IsZero() {
		s := e.limits.get(&e.cfg)
		for _, f := range limitFields {
			if f.set(l) {
				if err := s.Err(f.res); err != nil {
					return &limitUnavailableError{field: f.name, err: err, delegate: e.cfg.delegateErr}
				}
			}
		}
	}
	return e.cfg.checkPromise(l)
}

// validLimits rejects limits no kernel can hold, naming the field and the
// fix. A limit comes from Options.Limits or the request's, whichever set
// it: the message names the field of Limits.
func validLimits(l invoker.Limits) error {
	switch {
	case l.Memory < 0:
		return invalid("Limits.Memory is negative (%d): set the most bytes the run may hold, or 0 for no limit", l.Memory)
	case l.MemoryHigh < 0:
		return invalid("Limits.MemoryHigh is negative (%d): set a throttle level in bytes, or 0 for none", l.MemoryHigh)
	case l.Processes < 0:
		return invalid("Limits.Processes is negative (%d): set the most processes at once, or 0 for no limit", l.Processes)
	case l.CPU < 0 || math.IsNaN(l.CPU) || math.IsInf(l.CPU, 0):
		return invalid("Limits.CPU is %v: set a number of cores such as 0.5, or 0 for no limit", l.CPU)
	case l.Memory > 0 && l.Memory < 1<<20:
		return invalid("Limits.Memory is %d bytes, below 1 MiB, under which no process can start: give it in bytes (512 << 20 is 512 MiB)", l.Memory)
	case l.MemoryHigh > 0 && l.Memory > 0 && l.MemoryHigh > l.Memory:
		return invalid("Limits.MemoryHigh (%s) is above Limits.Memory (%s): a throttle level must be below the hard limit", proc.FormatBytes(l.MemoryHigh), proc.FormatBytes(l.Memory))
	case l.CPU > 0 && l.CPU < 0.01:
		return invalid("Limits.CPU is %g cores, below the kernel's least quota of 0.01", l.CPU)
	}
	return limitsInRange(l)
}

// limitsInRange rejects limits above the largest the kernel takes
// (proc.MaxLimits), which it would refuse half-written or, worse, read as
// no limit at all, naming the field and the largest.
func limitsInRange(l invoker.Limits) error {
	m := proc.MaxLimits()
	switch {
	case l.Memory > m.MemoryMax:
		return invalid("Limits.Memory is %d bytes, above the largest the kernel takes: %d (from %d bytes up it holds no limit at all): set at most that, or 0 for no limit", l.Memory, m.MemoryMax, m.MemoryMax+1)
	case l.MemoryHigh > m.MemoryHigh:
		return invalid("Limits.MemoryHigh is %d bytes, above the largest the kernel takes: %d (from %d bytes up it holds no throttle level at all): set at most that, or 0 for none", l.MemoryHigh, m.MemoryHigh, m.MemoryHigh+1)
	case int64(l.Processes) > m.Tasks:
		return invalid("Limits.Processes is %d, above the largest the kernel takes: %d (pids.max takes at most PID_MAX_LIMIT, one of which the run's start counts; this host has at most %s processes at once, kernel.pid_max): set at most that, or 0 for no limit", l.Processes, m.Tasks, pidMax())
	case l.CPU > m.CPU:
		return invalid("Limits.CPU is %g cores, above the largest the kernel takes: %s (a quota of 2^44-1 µs in every period of 100 ms): set at most that, or 0 for no limit", l.CPU, strconv.FormatFloat(m.CPU, 'f', -1, 64))
	}
	return nil
}

// pidMax returns this host's kernel.pid_max, or "?".
func pidMax() string {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// limitUnavailableError is ErrUnsupported for a limit this host cannot
// enforce, with proc's reason and fix.
type limitUnavailableError struct {
	field    string // the field of Limits
	err      error  // proc's *LimitUnavailableError
	delegate error  // why Options.DelegateCgroup failed, if it did
}

func (e *limitUnavailableError) Error() string {
	msg := "Limits." + e.field + " cannot be enforced on this host: " + limitReason(e.err)
	if e.delegate != nil {
		msg += "; " + delegateFailed(e.delegate)
	}
	if fix := limitFix(e.err); fix != "" {
		msg += "; to get it, " + fix
	}
	return msg
}

// limitReason returns why proc cannot enforce a limit, without the fix.
func limitReason(err error) string {
	var le *proc.LimitUnavailableError
	if !errors.As(err, &le) {
		return strings.TrimPrefix(err.Error(), "proc: ")
	}
	if le.Err != nil {
		return le.Reason + ": " + le.Err.Error()
	}
	return le.Reason
}

// limitFix returns how to get a limit proc cannot enforce, in the names
// of Options, or "".
func limitFix(err error) string {
	var le *proc.LimitUnavailableError
	if !errors.As(err, &le) {
		return ""
	}
	return procNames.Replace(le.Fix)
}

func delegateFailed(err error) string {
	return "Options.DelegateCgroup failed: " + strings.TrimPrefix(err.Error(), "proc: ")
}

func (e *limitUnavailableError) Is(target error) bool {
	return target == invoker.ErrUnsupported || target == invoker.ErrInvalidRequest
}

// Unwrap returns ErrUnsupported, through which errors.ErrUnsupported
// matches too.
func (e *limitUnavailableError) Unwrap() error { return invoker.ErrUnsupported }

// procNames turns the names of proc's API in its messages into the
// Options fields that reach them.
var procNames = strings.NewReplacer(
	"(then DelegateOwnCgroup)", "(then Options.DelegateCgroup)",
	"DelegateOwnCgroup", "Options.DelegateCgroup",
	"Attr.CgroupParent", "Options.CgroupParent",
	"SetHostLimits", "Budget.Memory",
)

// limitsProbe is the limits part of an engine's Capabilities, found once:
// what proc can enforce for the engine's containment and cgroup parent.
type limitsProbe struct {
	once sync.Once
	s    proc.Support
}

// get probes what runs with cfg can get, once.
func (p *limitsProbe) get(cfg *config) proc.Support {
	p.once.Do(func() {
		want, err := cfg.want()
		if err != nil {
			want = proc.Auto
		}
		p.s = proc.ProbeLimits(want, cfg.cgroupParent)
	})
	return p.s
}

// capabilities returns Capabilities.Limits and LimitsNote.
func (p *limitsProbe) capabilities(cfg *config) (string, string) {
	return limitsNote(p.get(cfg), cfg.delegateErr)
}

// limitsNote returns Capabilities.Limits and LimitsNote for what s says
// this host enforces; delegateErr is why Options.DelegateCgroup failed, if
// it did. The limits it cannot enforce are named each with its reason, and
// the fix, the same for all of them on every host proc knows, is said once.
func limitsNote(s proc.Support, delegateErr error) (string, string) {
	var names, missing, fixes []string
	for _, f := range limitFields {
		err := s.Err(f.res)
		if err == nil {
			names = append(names, f.name)
			continue
		}
		missing = append(missing, "Limits."+f.name+": "+limitReason(err))
		if fix := limitFix(err); fix != "" && !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	note := "limits held by " + s.Where
	if len(names) == 0 {
		note = "no limit can be enforced (" + s.Where + ")"
	}
	if len(missing) > 0 {
		note += "; cannot be enforced on this host: " + strings.Join(missing, "; ")
	}
	if delegateErr != nil {
		note += "; " + delegateFailed(delegateErr)
	}
	if len(fixes) > 0 {
		note += "; to get " + plural(int64(len(missing)), "it", "them") + ", " + strings.Join(fixes, "; or ")
	}
	if s.HostMemory == nil {
		note += "; the kernel holds a Budget's memory sum"
	} else {
		note += "; the kernel cannot hold a Budget's memory sum (only admission does)"
	}
	var sampled []string
	if s.MemorySampled {
		sampled = append(sampled, "PeakMemory (resident set sizes)")
	}
	if s.CPUSampled {
		sampled = append(sampled, "CPUTime")
	}
	if s.TasksSampled {
		sampled = append(sampled, "PeakProcesses")
	}
	if len(sampled) > 0 {
		note += fmt.Sprintf("; Result.Resources sampled from /proc every %d ms: %s", proc.RecordEvery.Milliseconds(), strings.Join(sampled, ", "))
	} else {
		note += "; Result.Resources counted by the kernel"
	}
	return strings.Join(names, " "), note
}

// resources returns what proc measured as Result.Resources.
func resources(u proc.Usage) invoker.Resources {
	return invoker.Resources{
		PeakMemory:    u.MemoryPeak,
		CPUTime:       u.CPU,
		PeakProcesses: int(u.TasksPeak),
		Sampled:       u.MemorySampled || u.CPUSampled || u.TasksSampled,
		OOMKills:      int(u.OOMKills),
		ForksRefused:  int(u.ForksRefused),
	}
}

// limitWarnings returns a KindWarning event for each thing the run's
// limits did since the last call while the CLI lives: processes killed at
// the memory limit, forks refused at the process limit. tool is the tool
// whose result prompted the look, or nil. The stdout reader calls it after
// a tool's result and at a turn's end: it reads the counters alone (two
// files where a controller counts; nothing where the figures are sampled,
// which count no kill), and the peaks its warnings name only when a
// counter rose: a one-shot run that ends well reads its figures once, at
// the reap.
func (r *run) limitWarnings(tool *invoker.Tool) []invoker.Event {
	if r.tree == nil {
		return nil
	}
	u := r.tree.Counts()
	r.warnMu.Lock()
	defer r.warnMu.Unlock()
	if u.OOMKills <= r.warned.OOMKills && u.ForksRefused <= r.warned.ForksRefused {
		return nil
	}
	u = r.tree.Usage()
	var evs []invoker.Event
	if n := u.OOMKills - r.warned.OOMKills; n > 0 && !u.RootOOMKilled {
		text := fmt.Sprintf("%s of the run killed by the memory limit of %s (peak %s); the CLI runs on", processes(n), proc.FormatBytes(u.Limits.MemoryMax), proc.FormatBytes(u.MemoryPeak))
		if u.OOMOutside || u.Limits.MemoryMax == 0 {
			text = fmt.Sprintf("%s of the run killed by the kernel's OOM killer under a memory limit above the run's own (the host's budget, or the system's memory; peak %s); the CLI runs on", processes(n), proc.FormatBytes(u.MemoryPeak))
		}
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Text: text, Tool: tool})
	}
	if n := u.ForksRefused - r.warned.ForksRefused; n > 0 {
		text := fmt.Sprintf("%d %s refused at the run's process limit of %d (Limits.Processes; peak %d); the CLI runs on", n, plural(n, "fork was", "forks were"), u.Limits.Tasks, u.TasksPeak)
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Text: text, Tool: tool})
	}
	r.warned.OOMKills, r.warned.ForksRefused = max(r.warned.OOMKills, u.OOMKills), max(r.warned.ForksRefused, u.ForksRefused)
	return evs
}

func processes(n int64) string { return fmt.Sprintf("%d %s", n, plural(n, "process", "processes")) }

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// killedByLimit returns the run's error when the kernel killed the CLI at
// a memory limit (the run's, or one above it), or nil. The message names
// the limit and the peak; id is the session to resume.
func (r *run) killedByLimit(id string) error {
	u := r.exit.usage
	if !u.RootOOMKilled {
		return nil
	}
	le := &invoker.LimitError{Limit: invoker.ErrResourceLimit, Resource: "memory", SessionID: id, Peak: u.MemoryPeak,
		Err: &invoker.ExitError{ExitCode: r.exit.state.Code, Signal: r.exit.state.Signal, Stderr: r.exit.stderr}}
	if !u.OOMOutside {
		le.Max = u.Limits.MemoryMax
	}
	return le
}

// limitEvidence returns err, the error of a run or a turn that failed on
// its own (not stopped, not a success), as a *LimitError for
// ErrResourceLimit when the kernel's counters for it (u) show that a limit
// acted: processes of the run OOM-killed (Resource "memory"), forks
// refused at its process limit ("processes"). The kernel's evidence wins
// over what the CLI or its decoder made of the failure: a CLI that cannot
// start a thread may exit with a status its decoder reads as a usage error
// or a crash, and a tool killed or refused a fork may fail the turn in
// the CLI's own words. err stays in the chain, its text in the message. A
// limit the CLI reported (a *LimitError already: a turn limit, a rate
// limit, the CLI killed) is what it says. id is the session to resume.
func limitEvidence(err error, u proc.Usage, id string) error {
	var le *invoker.LimitError
	if err == nil || errors.As(err, &le) {
		return err
	}
	switch {
	case u.OOMKills > 0:
		le = &invoker.LimitError{Limit: invoker.ErrResourceLimit, Resource: "memory", SessionID: id, Peak: u.MemoryPeak, Err: err}
		if !u.OOMOutside {
			le.Max = u.Limits.MemoryMax
		}
		return le
	case u.ForksRefused > 0 && u.Limits.Tasks > 0:
		return &invoker.LimitError{Limit: invoker.ErrResourceLimit, Resource: "processes", SessionID: id,
			Max: u.Limits.Tasks, Peak: u.TasksPeak, Err: err}
	}
	return err
}

// exhaustedError returns err, an error of a run's start, as a *LimitError
// for ErrResourceLimit when the host ran out of descriptors or processes
// (proc.ExhaustedError: the message names the limits in force and how to
// raise them), or nil.
func exhaustedError(err error) error {
	var ee *proc.ExhaustedError
	if !errors.As(proc.Exhausted(err), &ee) {
		return nil
	}
	return &invoker.LimitError{Limit: invoker.ErrResourceLimit, Resource: ee.Resource, Err: &startError{ee}}
}

// startError is proc's error of a start that could not be made, without
// proc's prefix; it unwraps to the failed call's error.
type startError struct{ ee *proc.ExhaustedError }

func (e *startError) Error() string { return strings.TrimPrefix(e.ee.Error(), "proc: ") }
func (e *startError) Unwrap() error { return e.ee.Err }

// limitField returns the name of the field of invoker.Limits of r.
func limitField(r proc.Resource) string {
	for _, f := range limitFields {
		if f.res == r {
			return f.name
		}
	}
	return r.String()
}
