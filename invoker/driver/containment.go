package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// levels maps the names of invoker.Options.Containment and
// Result.Containment to proc's levels.
var levels = map[string]proc.Containment{
	"":         proc.Auto,
	"cgroup":   proc.Cgroup,
	"tracking": proc.Tracking,
	"job":      proc.Job,
	"group":    proc.Group,
}

// level returns the name of a level in force.
func level(c proc.Containment) string {
	if c == proc.Auto {
		return ""
	}
	return c.String()
}

// want returns the level Options.Containment asks for.
func (c *config) want() (proc.Containment, error) {
	lvl, ok := levels[c.containment]
	if !ok || c.containment == "job" || c.containment == "group" {
		return proc.Auto, fmt.Errorf("%w: unknown Options.Containment %q: use \"cgroup\", \"tracking\" or \"\" for the best level", invoker.ErrInvalidRequest, c.containment)
	}
	return lvl, nil
}

// probe is the containment part of an engine's Capabilities, found once.
type probe struct {
	once  sync.Once
	level string
	note  string
}

// get probes the level runs get with cfg, once.
func (p *probe) get(cfg *config) (string, string) {
	p.once.Do(func() {
		want, err := cfg.want()
		if err != nil {
			p.note = err.Error()
			return
		}
		lvl, err := proc.Probe(want, cfg.cgroupParent)
		if err != nil {
			p.note = containmentError(err, cfg.cgroupParent).Error()
		}
		if err == nil || !errors.Is(err, proc.ErrUnavailable) || want == proc.Auto {
			p.level = level(lvl)
		}
	})
	return p.level, p.note
}

// containmentError turns proc's error about a level into ErrContainment,
// with how to get the level; parent is Options.CgroupParent.
func containmentError(err error, parent string) error {
	e := &containmentErr{err: err, reason: err.Error()}
	var ue *proc.UnavailableError
	if !errors.As(err, &ue) {
		return e
	}
	e.reason = ue.Level.String() + ": " + ue.Err.Error()
	if ue.Level != proc.Cgroup || runtime.GOOS != "linux" {
		return e
	}
	const systemd = "`systemd-run --user -p Delegate=yes --scope CMD`"
	parent = filepath.Clean(parent)
	switch {
	case errors.Is(err, proc.ErrRefused) && !errors.Is(err, fs.ErrPermission):
		// Not the host's place: the reason says what blocks the start.
	case errors.Is(err, proc.ErrRefused) && parent != ".":
		e.hint = "run the host process inside " + parent + " (as root: echo PID > " + filepath.Join(parent, "cgroup.procs") +
			"), or leave Options.CgroupParent empty and start the host with " + systemd
	case errors.Is(err, proc.ErrRefused):
		e.hint = "start the host with " + systemd + ", or as root move it into a cgroup whose cgroup.procs its user may write"
	default:
		e.hint = "run as root, start the host with " + systemd +
			", or as root make a cgroup, chown it and its cgroup.procs to the host's user and move the host into it"
	}
	return e
}

// containmentErr is ErrContainment with proc's reason and a hint.
type containmentErr struct {
	err    error
	reason string // err's message without proc's prefix
	hint   string // how to get the level; "" for none
}

func (e *containmentErr) Error() string {
	msg := invoker.ErrContainment.Error() + ": " + e.reason
	if e.hint != "" {
		msg += "; to get the cgroup level, " + e.hint
	}
	return msg
}

func (e *containmentErr) Unwrap() []error { return []error{invoker.ErrContainment, e.err} }
