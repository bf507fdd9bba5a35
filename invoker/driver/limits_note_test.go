package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// TestLimitsNoteSaysTheFixOnce: on a host that enforces no limit, the
// note names each limit with its own reason and says the fix, the same
// for all, once.
func TestLimitsNoteSaysTheFixOnce(t *testing.T) {
	const fix = "give the trees a cgroup v2 parent with the controller delegated (then DelegateOwnCgroup); see docs/limits.md"
	unavailable := func(r proc.Resource, why string) error {
		return &proc.LimitUnavailableError{Resource: r, Reason: "the tree has no cgroup v2 of its own; cgroup v1: " + why, Fix: fix}
	}
	s := proc.Support{
		Memory:     unavailable(proc.Memory, "making a cgroup in /sys/fs/cgroup/memory: permission denied"),
		MemoryHigh: unavailable(proc.MemoryHigh, "cgroup v1 has no throttle level"),
		Tasks:      unavailable(proc.Tasks, "making a cgroup in /sys/fs/cgroup/pids: permission denied"),
		CPU:        unavailable(proc.CPU, "making a cgroup in /sys/fs/cgroup/cpu: permission denied"),
		HostMemory: errors.New("no memory controller"),
		Where:      "no cgroup controller: figures sampled from /proc",
	}
	limits, note := limitsNote(s, nil)
	t.Logf("LimitsNote (%d bytes): %s", len(note), note)
	if limits != "" {
		t.Errorf("Limits = %q, want none", limits)
	}
	if n := strings.Count(note, "docs/limits.md"); n != 1 {
		t.Errorf("the note says the fix %d times, want once", n)
	}
	if !strings.Contains(note, "to get them, give the trees a cgroup v2 parent with the controller delegated (then Options.DelegateCgroup)") {
		t.Errorf("the note does not say the fix in the names of Options")
	}
	for _, want := range []string{"Limits.Memory: ", "Limits.MemoryHigh: ", "Limits.Processes: ", "Limits.CPU: ", "cgroup v1 has no throttle level", "/sys/fs/cgroup/pids: permission denied"} {
		if !strings.Contains(note, want) {
			t.Errorf("the note does not say %q", want)
		}
	}
	// The error of one limit says its reason and the fix, once.
	msg := (&limitUnavailableError{field: "Memory", err: s.Memory}).Error()
	if !strings.HasPrefix(msg, "Limits.Memory cannot be enforced on this host: the tree has no cgroup v2") || strings.Count(msg, "docs/limits.md") != 1 || !strings.Contains(msg, "; to get it, ") {
		t.Errorf("error = %q, want the limit, its reason and the fix once", msg)
	}
}
