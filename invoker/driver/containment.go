package driver

import (
	"errors"
	"fmt"
	"strings"
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
			p.note = containmentError(err).Error()
		}
		if err == nil || !errors.Is(err, proc.ErrUnavailable) || want == proc.Auto {
			p.level = level(lvl)
		}
	})
	return p.level, p.note
}

// containmentError turns proc's error about a level into ErrContainment
// with a hint.
func containmentError(err error) error {
	hint := ""
	if errors.Is(err, proc.ErrUnavailable) && strings.Contains(err.Error(), "cgroup") {
		hint = " (run as root, start the host in a delegated cgroup such as `systemd-run --user -p Delegate=yes --scope CMD`, or name a writable cgroup with Options.CgroupParent)"
	}
	return &containmentErr{err: err, hint: hint}
}

type containmentErr struct {
	err  error
	hint string
}

func (e *containmentErr) Error() string {
	return invoker.ErrContainment.Error() + ": " + e.err.Error() + e.hint
}

func (e *containmentErr) Unwrap() []error { return []error{invoker.ErrContainment, e.err} }
