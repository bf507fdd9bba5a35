//go:build linux

package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Where a tree's limits and figures live. At the Cgroup level the tree's
// v2 cgroup holds its membership (cgroup.kill, cgroup.events) and its CPU
// time (cpu.stat is a core file, there without any controller); its
// limits and other figures are held by the v2 controllers of its cgroup
// where the home has them (see controllers_linux.go), else by cgroup v1
// cgroups of its own (cgroupv1_linux.go), else they cannot be enforced
// (limits) or are sampled from /proc (figures, usage_sampled_linux.go).
// At the Tracking level there is no v2 cgroup: cgroup v1 or samples.

// src says where a figure of Usage comes from.
type src uint8

const (
	srcNone src = iota
	srcV2
	srcV1
	srcSample
)

// A limitPlan says which controllers hold a tree's limits and figures.
type limitPlan struct {
	limits  Limits
	account bool
	// v2 are the controllers of the tree's v2 cgroup: limits are
	// written there.
	v2 ctlSet
	// need are the v1 controllers the tree gets a cgroup in.
	need v1Need
	// Where each figure comes from.
	mem, tasks, cpu src
}

// sampled reports whether a figure is sampled.
func (p *limitPlan) sampled() bool {
	return p.mem == srcSample || p.tasks == srcSample || p.cpu == srcSample
}

// any reports whether the tree needs accounting state at all.
func (p *limitPlan) any() bool {
	return p.account || !p.limits.IsZero() || p.need != 0 || p.v2 != 0
}

// planLimits says where a's limits and, with a.Account, its figures live,
// for a tree in home (nil at the tracking level) on a host with the v1
// hierarchies of v1 (nil: none). It returns a *LimitUnavailableError for the
// first limit no controller can hold.
func planLimits(a *Attr, home *cgroupHome, v1 *v1Host) (limitPlan, error) {
	p := limitPlan{limits: a.Limits, account: a.Account}
	e := planEnv{home: home, v1: v1, account: a.Account}
	if home != nil {
		e.v2, e.peaks = home.ctl, home.peaks
	}
	if a.tune != nil && a.tune.noControllers {
		e.v2, e.v1 = 0, nil
	}
	var first error
	a.Limits.each(func(r Resource) {
		if err := e.place(&p, r); first == nil {
			first = err
		}
	})
	if first != nil {
		return p, first
	}
	if e.v1 != nil {
		p.need |= e.v1.hostNeed() &^ v2need(e.v2)
	}
	// The figures: from the controllers that hold the tree anyway, or,
	// with Account, from the best there is.
	for _, c := range controllers {
		c.plan(&p, &e)
	}
	return p, nil
}

// place adds to p the controller that holds the limit on r: the v2
// controller where the tree's cgroup has it, else the v1 controller. It
// returns a *LimitUnavailableError when neither can.
func (e *planEnv) place(p *limitPlan, r Resource) error {
	at := placeOf(r)
	if e.v2&at.v2 != 0 {
		p.v2 |= at.v2
		return nil
	}
	if at.v1 < 0 {
		return unavailable(r, e.home, at.v2, errors.New(at.noV1))
	}
	err := e.v1ok(at.v1)
	if err == nil {
		p.need |= 1 << at.v1
		return nil
	}
	return unavailable(r, e.home, at.v2, err)
}

// v2need returns the v1 controllers that the v2 controllers ctl replace.
func v2need(ctl ctlSet) v1Need {
	var n v1Need
	if ctl&ctlMemory != 0 {
		n |= 1 << v1Memory
	}
	if ctl&ctlPids != 0 {
		n |= 1 << v1Pids
	}
	return n
}

// unavailable builds the error for a limit on r that neither the v2
// controller c of home nor cgroup v1 (v1err) can hold.
func unavailable(r Resource, home *cgroupHome, c ctlSet, v1err error) error {
	var why string
	if home == nil {
		why = "the tree has no cgroup v2 of its own (tracking level)"
	} else {
		why = fmt.Sprintf("the cgroup v2 controllers of %s are %q, without %s", home.dir, home.ctl.String(), c)
	}
	why += "; cgroup v1: " + v1err.Error()
	return &LimitUnavailableError{
		Resource: r,
		Reason:   why,
		Fix:      "give the trees a cgroup v2 parent with the controller delegated: a systemd service or scope with Delegate=yes (then DelegateOwnCgroup), or Attr.CgroupParent naming an empty cgroup the host may write; or run as root on a host with cgroup v1 controllers; see docs/limits.md",
	}
}

// limitsSupported is checked by Start on every system: on Linux the
// plan made at Start decides.
func limitsSupported(*Attr) error { return nil }

// probeLimits is ProbeLimits on Linux.
func probeLimits(want Containment, parent string) Support {
	var s Support
	lvl, _ := probe(want, parent)
	var home *cgroupHome
	if lvl == Cgroup {
		home, _ = homeFor(parent)
	}
	for r := Memory; r <= CPU; r++ {
		var l Limits
		switch r {
		case Memory:
			l.MemoryMax = 1 << 30
		case MemoryHigh:
			l.MemoryHigh = 1 << 30
		case Tasks:
			l.Tasks = 1024
		case CPU:
			l.CPU = 1
		}
		_, err := planLimits(&Attr{Limits: l}, home, theV1())
		switch r {
		case Memory:
			s.Memory = err
		case MemoryHigh:
			s.MemoryHigh = err
		case Tasks:
			s.Tasks = err
		case CPU:
			s.CPU = err
		}
	}
	p, _ := planLimits(&Attr{Account: true}, home, theV1())
	s.MemorySampled, s.TasksSampled, s.CPUSampled = p.mem == srcSample, p.tasks == srcSample, p.cpu == srcSample
	s.HostMemory = hostMemoryErr(parent)
	s.Where = where(home)
	return s
}

// where describes the controllers found.
func where(home *cgroupHome) string {
	var parts []string
	if home != nil {
		if home.ctl != 0 {
			parts = append(parts, fmt.Sprintf("cgroup v2 controllers %s in %s", home.ctl, home.dir))
		} else {
			parts = append(parts, "membership in cgroup v2 "+home.dir+" (no controller)")
		}
	}
	if v1 := v1IfOpen(); v1 != nil {
		var names []string
		for i, n := range v1Names {
			if _, err := v1.usable(i); err == nil {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			parts = append(parts, "cgroup v1 "+strings.Join(names, ", "))
		}
	}
	if len(parts) == 0 {
		return "no cgroup controller: figures sampled from /proc"
	}
	return strings.Join(parts, "; ")
}

// hostMemoryErr says whether SetHostLimits can hold the sum of the
// trees' memory.
func hostMemoryErr(parent string) error {
	home, err := homeFor(parent)
	if err == nil && home.ctl&ctlMemory != 0 {
		return nil
	}
	v1err := errors.New("no cgroup v1 hierarchy")
	if v1 := theV1(); v1 != nil {
		if _, v1err = v1.usable(v1Memory); v1err == nil {
			return nil
		}
	}
	if err != nil {
		home = nil
	}
	return unavailable(Memory, home, ctlMemory, v1err)
}

// setHostLimits is SetHostLimits on Linux: the memory limit goes to the
// v2 home where it has the memory controller, else to the v1 home.
func setHostLimits(parent string, l Limits) error {
	home, err := homeFor(parent)
	var v2 ctlSet
	if err == nil {
		v2 = home.ctl
	} else {
		home = nil
	}
	var onV2, onV1 Limits
	if v2&ctlMemory != 0 {
		onV2.MemoryMax = l.MemoryMax
	} else {
		onV1.MemoryMax = l.MemoryMax
	}
	// Check everything before writing anything.
	v1 := theV1()
	if onV1.MemoryMax != 0 {
		if _, err := v1.usable(v1Memory); err != nil {
			return unavailable(Memory, home, ctlMemory, err)
		}
	}
	if home != nil && v2&ctlMemory != 0 {
		if err := setV2HostLimits(home.dir, onV2, v2); err != nil {
			return fmt.Errorf("proc: setting the host's limits: %w", err)
		}
	}
	if err := v1.setLimits(onV1); err != nil {
		return fmt.Errorf("proc: setting the host's limits: %w", err)
	}
	return nil
}

// hostLeaf names the leaf cgroup DelegateOwnCgroup moves the host into.
// A host whose cgroup has this name takes the cgroup above it as its own
// (see ownCgroup).
const hostLeaf = "clinvoke-host"

// delegateOwnCgroup is DelegateOwnCgroup on Linux.
func delegateOwnCgroup() error {
	own, err := ownCgroup()
	if err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	homes.mu.Lock()
	defer homes.mu.Unlock()
	allowed := map[int32]bool{int32(os.Getpid()): true}
	for _, r := range homes.m {
		if r.home != nil && r.home.keeper.proc != nil {
			allowed[int32(r.home.keeper.proc.Pid)] = true
		}
	}
	if err := delegate(own, allowed); err != nil {
		return err
	}
	// Homes opened before get the controllers now.
	for parent, r := range homes.m {
		if r.home != nil && filepath.Dir(r.home.dir) == own {
			r.home.ctl = setUpControllers(own, r.home.dir, parent != "")
			r.home.peaks = peakFiles(r.home.dir)
		}
	}
	return nil
}

// delegate moves the processes of the cgroup own (all of them in allowed)
// into a new leaf below it, hostLeaf, and enables in own the wanted
// controllers it has. A host already in its leaf (own is the cgroup above
// it) has nothing to do.
func delegate(own string, allowed map[int32]bool) error {
	have := readControllers(filepath.Join(own, "cgroup.controllers")) & ctlWanted
	if have == 0 {
		return &LimitUnavailableError{Resource: Memory, Reason: fmt.Sprintf("no memory, pids or cpu controller is delegated to the host's cgroup %s", own),
			Fix: "run the host in a systemd service with Delegate=yes, or in `systemd-run --user -p Delegate=yes --scope`"}
	}
	procs := listPids(filepath.Join(own, "cgroup.procs"))
	var others []string
	for _, pid := range procs {
		if !allowed[pid] {
			others = append(others, strconv.Itoa(int(pid)))
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("proc: the host's cgroup %s holds other processes (%s): cgroup v2 lets a cgroup with processes give no controller to the cgroups below it; start the host in a cgroup of its own (a systemd service or scope with Delegate=yes)", own, strings.Join(others, " "))
	}
	leaf := filepath.Join(own, hostLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("proc: making the host's leaf cgroup: %w", err)
	}
	for _, pid := range procs {
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(int(pid))); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("proc: moving process %d into %s: %w", pid, leaf, err)
		}
	}
	if on, err := enableControllers(own, have); on == 0 {
		return fmt.Errorf("proc: enabling the controllers %s in %s: %w", have, own, err)
	}
	return nil
}

// exhausted is Exhausted on Linux.
func exhausted(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExhaustedError
	if errors.As(err, &ee) {
		return err
	}
	switch {
	case errors.Is(err, unix.EMFILE):
		var lim unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
		return &ExhaustedError{
			Resource: "descriptors",
			Limits:   []string{fmt.Sprintf("the host's RLIMIT_NOFILE (ulimit -n) is %d, its hard limit %d", lim.Cur, lim.Max)},
			Fix:      "raise it with ulimit -n, LimitNOFILE= in the systemd unit, or setrlimit; each running tree holds one descriptor at the cgroup level (its root's pidfd) and none at the tracking level, besides the host's ends of the command's pipes (two or three per run)",
			Err:      err,
		}
	case errors.Is(err, unix.ENFILE):
		max, _ := os.ReadFile("/proc/sys/fs/file-max")
		return &ExhaustedError{
			Resource: "descriptors",
			Limits:   []string{"the system's file table is full (fs.file-max is " + strings.TrimSpace(string(max)) + ")"},
			Fix:      "raise fs.file-max with sysctl, or run fewer processes",
			Err:      err,
		}
	case errors.Is(err, unix.EAGAIN):
		return &ExhaustedError{
			Resource: "processes",
			Limits:   processLimits(),
			Fix:      "raise the limit reached: ulimit -u or LimitNPROC= (RLIMIT_NPROC), TasksMax= in the systemd unit (its cgroup's pids.max), or kernel.pid_max and kernel.threads-max with sysctl; or run fewer at once",
			Err:      err,
		}
	}
	return err
}

// processLimits describes the limits on the number of the host's
// processes.
func processLimits() []string {
	var out []string
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &lim) == nil {
		s := fmt.Sprintf("RLIMIT_NPROC (ulimit -u) is %d", lim.Cur)
		if os.Geteuid() == 0 {
			s += " (not enforced for root)"
		}
		out = append(out, s)
	}
	if own, err := ownCgroup(); err == nil {
		if b, err := readSmall(filepath.Join(own, "pids.max"), unheld); err == nil {
			out = append(out, fmt.Sprintf("the host's cgroup %s has pids.max %s", own, strings.TrimSpace(string(b))))
		}
	}
	if v1 := v1IfOpen(); v1 != nil {
		if x, err := v1.usable(v1Pids); err == nil {
			if b, err := readSmall(filepath.Join(x.own, "pids.max"), unheld); err == nil && strings.TrimSpace(string(b)) != "max" {
				out = append(out, fmt.Sprintf("%s has pids.max %s", x.own, strings.TrimSpace(string(b))))
			}
		}
	}
	for _, f := range []string{"pid_max", "threads-max"} {
		if b, err := os.ReadFile("/proc/sys/kernel/" + f); err == nil {
			out = append(out, fmt.Sprintf("kernel.%s is %s", f, strings.TrimSpace(string(b))))
		}
	}
	return out
}
