package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// limitFlags are the flags of the runs' limits and the host's budget:
// what each run may use, and what all of them may use together.
type limitFlags struct {
	limits         invoker.Limits
	budget         invoker.Budget
	waitRateLimits bool
	delegate       bool
}

// register adds the flags to fs.
func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.Func("memory-max", "most memory each run may hold, its CLI and every process it starts together, such as 2GiB or 512M: past it the kernel kills the largest process of the run, usually the runaway tool (0: no limit)", func(s string) error {
		n, err := parseSize(s)
		l.limits.Memory = n
		return err
	})
	fs.Func("memory-high", "memory above which each run is slowed down and reclaimed hard, nothing killed (cgroup v2 only), such as 1536M", func(s string) error {
		n, err := parseSize(s)
		l.limits.MemoryHigh = n
		return err
	})
	fs.Func("processes-max", "most processes (threads included) each run may have at once; a fork past it fails (0: no limit)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want a number of processes", s)
		}
		l.limits.Processes = n
		return nil
	})
	fs.Func("cpu", "most CPU each run may use, in cores, such as 0.5 or 2 (0: no limit)", func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%q: want a number of cores, such as 0.5", s)
		}
		l.limits.CPU = v
		return nil
	})
	fs.IntVar(&l.budget.Runs, "budget-runs", 0, "most runs and warm conversations at once on this host, across all clients; more wait their turn, first come first served (0: no bound; -max bounds the calls)")
	fs.Func("budget-memory", "most memory the runs may promise together, the sum of their -memory-max, such as 8GiB: a run that does not fit waits (needs -memory-max; 0: no bound)", func(s string) error {
		n, err := parseSize(s)
		l.budget.Memory = n
		return err
	})
	fs.BoolVar(&l.waitRateLimits, "wait-rate-limits", false, "after a run fails because the model provider's rate limit was reached, hold the CLI's next runs until the limit resets instead of starting them to fail")
	fs.BoolVar(&l.delegate, "delegate-cgroup", false, "move this server into a leaf of its own cgroup so that the cgroup v2 controllers systemd delegated to it (Delegate=yes) hold the runs' limits; a change to the whole process")
}

// check refuses flags that cannot work together, in the flags' words.
func (l *limitFlags) check() error {
	if l.budget.Runs < 0 {
		return errors.New("-budget-runs is negative: give the most runs at once, or 0 for no bound")
	}
	if l.budget.Memory > 0 && l.limits.Memory == 0 {
		return errors.New("-budget-memory counts the memory the runs promise: add -memory-max, the most each run may hold")
	}
	if l.budget.Memory > 0 && l.limits.Memory > l.budget.Memory {
		return fmt.Errorf("-memory-max %s is more than -budget-memory %s: no run could start", formatSize(l.limits.Memory), formatSize(l.budget.Memory))
	}
	return nil
}

// options returns the invoker.Options of the flags: every invoker of the
// server shares the one Budget.
func (l *limitFlags) options() invoker.Options {
	o := invoker.Options{Limits: l.limits, DelegateCgroup: l.delegate}
	if l.budget.Runs > 0 || l.budget.Memory > 0 || l.waitRateLimits {
		b := l.budget
		b.WaitRateLimits = l.waitRateLimits
		o.Budget = &b
	}
	return o
}

// parseSize reads a size in bytes: a number with an optional unit, K, M,
// G, T (powers of 1024, with or without "iB" or "B").
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q: want a size such as 512M, 2GiB or 1073741824", s)
	}
	return int64(v * float64(mult)), nil
}

// formatSize formats n bytes in binary units.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// checkHost refuses, at start-up, limits this host cannot enforce on inv's
// runs, rather than fail every call: it names the flag, why and the fix.
func (l *limitFlags) checkHost(inv invoker.Invoker) error {
	c := inv.Capabilities()
	have := strings.Fields(c.Limits)
	for _, f := range []struct {
		flag, field string
		set         bool
	}{
		{"-memory-max", "Memory", l.limits.Memory != 0},
		{"-memory-high", "MemoryHigh", l.limits.MemoryHigh != 0},
		{"-processes-max", "Processes", l.limits.Processes != 0},
		{"-cpu", "CPU", l.limits.CPU != 0},
	} {
		if f.set && !slices.Contains(have, f.field) {
			return fmt.Errorf("%s cannot be enforced on this host (docs/limits.md says how to set one up): %s", f.flag, c.LimitsNote)
		}
	}
	return nil
}
