//go:build linux

package proc

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pageCounterMax is what the memory controller's files read when they hold
// no limit, with this host's pages: LONG_MAX / page size pages.
func pageCounterMax() int64 {
	page := int64(os.Getpagesize())
	return math.MaxInt64 / page * page
}

// TestLimitsRangeChecked: a limit above what the kernel takes is refused
// before anything is written, rather than failing half-written (a pids.max
// past PID_MAX_LIMIT, a CPU quota past 2^44-1 µs are EINVAL) or being
// written as no limit (a CPU quota that overflows to a negative number,
// a memory limit at the page counter's maximum). Each largest value is
// taken by the files on the fake cgroupfs as a number in the kernel's
// range.
func TestLimitsRangeChecked(t *testing.T) {
	m := MaxLimits()
	if m.Tasks != 4194303 || m.CPU != 175921860.44415 || m.MemoryMax != pageCounterMax()-1 || m.MemoryHigh != m.MemoryMax {
		t.Errorf("MaxLimits() = %+v", m)
	}
	if err := m.validate(); err != nil {
		t.Errorf("MaxLimits().validate() = %v, want nil", err)
	}
	for _, tt := range []struct {
		l    Limits
		want string
	}{
		{Limits{CPU: 1e12}, "cpu limit of 1e+12 is above the largest the kernel takes, 175921860.44415"},
		{Limits{CPU: 1e15}, "cpu limit of 1e+15"},
		{Limits{CPU: math.MaxFloat64}, "cpu limit of 1.7976931348623157e+308"},
		{Limits{CPU: 175921860.44416}, "cpu limit"},
		{Limits{Tasks: 5_000_000}, "tasks limit of 5000000 is above the largest the kernel takes, 4194303"},
		{Limits{Tasks: 4194304}, "tasks limit of 4194304"},
		{Limits{Tasks: math.MaxInt64}, "tasks limit of 9223372036854775807"},
		{Limits{MemoryMax: pageCounterMax()}, "memory limit of " + strconv.FormatInt(pageCounterMax(), 10)},
		{Limits{MemoryMax: math.MaxInt64}, "memory limit of 9223372036854775807"},
		{Limits{MemoryHigh: pageCounterMax()}, "memory throttle limit"},
	} {
		err := tt.l.validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate(%+v) = %v, want an error saying %q", tt.l, err, tt.want)
		}
	}

	root := fakeFS(t, map[string]string{
		"memory/r1/memory.limit_in_bytes": "9223372036854771712\n", "memory/r1/memory.memsw.limit_in_bytes": "9223372036854771712\n",
		"pids/r1/pids.max":         "max\n",
		"cpu/r1/cpu.cfs_period_us": "100000\n", "cpu/r1/cpu.cfs_quota_us": "-1\n",
		"v2/r1/memory.max": "max\n", "v2/r1/memory.high": "max\n", "v2/r1/memory.swap.max": "max\n",
		"v2/r1/pids.max": "max\n", "v2/r1/cpu.max": "max 100000\n",
	})
	r := &v1Run{}
	r.dir[v1Memory], r.dir[v1Pids], r.dir[v1CPU] = filepath.Join(root, "memory/r1"), filepath.Join(root, "pids/r1"), filepath.Join(root, "cpu/r1")
	v1 := Limits{MemoryMax: m.MemoryMax, Tasks: m.Tasks, CPU: m.CPU}
	if err := r.apply(v1); err != nil {
		t.Fatal(err)
	}
	mem := strconv.FormatInt(m.MemoryMax, 10)
	wantFiles(t, root, map[string]string{
		"memory/r1/memory.limit_in_bytes": mem, "memory/r1/memory.memsw.limit_in_bytes": mem,
		"pids/r1/pids.max": "4194304", "cpu/r1/cpu.cfs_quota_us": "17592186044415",
	})
	if err := applyV2(filepath.Join(root, "v2/r1"), m, ctlWanted); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, root, map[string]string{
		"v2/r1/memory.max": mem, "v2/r1/memory.high": mem, "v2/r1/pids.max": "4194303", "v2/r1/cpu.max": "17592186044415 100000",
	})
}

// TestLimitsRangeOnThisKernel: the largest limits start a tree on this
// host's kernel, which holds each as a limit: the CPU quota at 2^44-1 µs,
// the task limit at 4194303, the memory limit below the page counter's
// maximum (the kernel rounds it down to a page); one more of any is
// refused before anything starts.
func TestLimitsRangeOnThisKernel(t *testing.T) {
	noLeaks(t)
	markUsed("hang") // also where the test skips
	requireLimits(t, Memory, Tasks, CPU)
	m := MaxLimits()
	l := Limits{MemoryMax: m.MemoryMax, Tasks: m.Tasks, CPU: m.CPU}
	r := startRun(t, Attr{Limits: l, Account: true}, "hang")
	r.tree.Usage() // the tree runs
	read := func(dir, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	var mem, pids, cpu string
	if v1 := r.tree.sys.v1; v1 != nil {
		mem = read(v1.dir[v1Memory], "memory.limit_in_bytes")
		pids = read(v1.dir[v1Pids], "pids.max")
		cpu = read(v1.dir[v1CPU], "cpu.cfs_quota_us")
	} else {
		dir := r.tree.sys.cg.dir
		mem, pids = read(dir, "memory.max"), read(dir, "pids.max")
		cpu, _, _ = strings.Cut(read(dir, "cpu.max"), " ")
	}
	t.Logf("the kernel holds memory %s, tasks %s, CPU quota %s µs", mem, pids, cpu)
	if n, err := strconv.ParseInt(mem, 10, 64); err != nil || n >= pageCounterMax() || n < m.MemoryMax-int64(os.Getpagesize()) {
		t.Errorf("memory limit read back %q, want a limit just below %d (no limit)", mem, pageCounterMax())
	}
	if pids != "4194303" || cpu != "17592186044415" {
		t.Errorf("pids.max %q, CPU quota %q; want 4194303 and 17592186044415", pids, cpu)
	}
	r.tree.Kill()
	r.wait()

	for _, over := range []Limits{{MemoryMax: m.MemoryMax + 1}, {Tasks: m.Tasks + 1}, {CPU: 175921860.4442}} {
		before := childrenOfHost()
		cmd := helperCmd("hang")
		tree, err := Start(&Attr{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Limits: over, Containment: testContainment})
		if err == nil {
			tree.Kill()
			tree.Wait()
			t.Errorf("Start(%+v) started a tree, want an error", over)
			continue
		}
		if !strings.Contains(err.Error(), "above the largest the kernel takes") {
			t.Errorf("Start(%+v) error = %v, want it to name the kernel's largest", over, err)
		}
		if after := childrenOfHost(); len(after) > len(before) {
			t.Errorf("children %v after a refused Start, %v before", after, before)
		}
	}
}
