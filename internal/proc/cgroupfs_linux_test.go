//go:build linux

package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cgroup v2 controllers cannot be enabled on a hybrid host (they are
// bound to the v1 hierarchies), so their files are checked on a fake
// cgroupfs: directories laid out as the kernel lays them out, whose files
// the tests fill in for the kernel and read back after the code wrote
// them. Unlike cgroupfs, a plain file keeps what was written last, and
// reads back what the test put there.

// fakeFS lays out files (path relative to root → content) under a new
// temporary directory and returns it.
func fakeFS(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// put writes content to root/name, as the kernel would change it.
func put(t *testing.T, root, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantFiles checks the content of files under root.
func wantFiles(t *testing.T, root string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := strings.TrimSpace(string(b)); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
}

// v2RunFiles are the files of a tree's cgroup with the memory, pids and
// cpu controllers, as a new cgroup has them.
var v2RunFiles = map[string]string{
	"memory.max": "max\n", "memory.swap.max": "max\n", "memory.high": "max\n",
	"memory.peak": "0\n", "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
	"pids.max": "max\n", "pids.peak": "0\n", "pids.events": "max 0\n",
	"cpu.max": "max 100000\n", "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
}

// TestLimitsV2Files: on a cgroup v2 parent that delegates the memory,
// pids and cpu controllers, the home enables them, a tree's limits are
// written to its cgroup's files, its usage and the limits' events are
// read from them, a Mark resets the memory peak for its open file, and
// the host's limits go to the home.
func TestLimitsV2Files(t *testing.T) {
	files := map[string]string{
		"parent/cgroup.controllers":      "cpuset cpu io memory hugetlb pids rdma misc\n",
		"parent/cgroup.subtree_control":  "\n",
		"parent/home/cgroup.controllers": "cpu memory pids\n", "parent/home/cgroup.subtree_control": "\n",
		"parent/home/memory.oom.group": "1\n", "parent/home/memory.peak": "0\n", "parent/home/pids.peak": "0\n",
		"parent/home/memory.max": "max\n", "parent/home/memory.swap.max": "max\n", "parent/home/pids.max": "max\n",
	}
	for name, content := range v2RunFiles {
		files["parent/home/r1/"+name] = content
	}
	root := fakeFS(t, files)
	parent, homeDir := filepath.Join(root, "parent"), filepath.Join(root, "parent/home")
	run := filepath.Join(homeDir, "r1")

	ctl := setUpControllers(parent, homeDir, true)
	if ctl != ctlWanted {
		t.Fatalf("setUpControllers() = %q, want %q", ctl, ctlWanted)
	}
	wantFiles(t, root, map[string]string{
		"parent/cgroup.subtree_control":      "+memory +pids +cpu",
		"parent/home/cgroup.subtree_control": "+memory +pids +cpu",
		"parent/home/memory.oom.group":       "0",
	})
	home := &cgroupHome{dir: homeDir, ctl: ctl, peaks: peakFiles(homeDir) & ctl}
	if home.peaks != ctlMemory|ctlPids {
		t.Errorf("peakFiles() = %q, want memory pids", home.peaks)
	}

	limits := Limits{MemoryMax: 100 * mib, MemoryHigh: 80 * mib, Tasks: 64, CPU: 0.5}
	plan, err := planLimits(&Attr{Limits: limits, Account: true}, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.v2 != ctlWanted || plan.need != 0 || plan.mem != srcV2 || plan.tasks != srcV2 || plan.cpu != srcV2 {
		t.Fatalf("planLimits() = %+v, want everything on the v2 controllers", plan)
	}
	if err := applyV2(run, limits, plan.v2); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, run, map[string]string{
		"memory.max": "104857600", "memory.swap.max": "0", "memory.high": "83886080",
		"pids.max": "64", "cpu.max": "50000 100000",
	})

	tree := &Tree{exited: make(chan struct{})}
	tree.sys.acct = newAcct(plan, run, ctl, nil)
	put(t, run, "memory.peak", "104857600\n")
	put(t, run, "memory.events", "low 0\nhigh 7\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
	put(t, run, "pids.peak", "64\n")
	put(t, run, "pids.events", "max 12\n")
	put(t, run, "cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 30\n")
	u := tree.Usage()
	want := Usage{MemoryPeak: 100 * mib, CPU: 1500 * time.Millisecond, TasksPeak: 64, OOMKills: 1, ForksRefused: 12, Throttled: 7, Limits: limits}
	if u != want {
		t.Errorf("Usage() = %+v\nwant      %+v", u, want)
	}

	m := tree.Mark()
	if b, _ := os.ReadFile(filepath.Join(run, "memory.peak")); !strings.HasPrefix(string(b), "reset") {
		t.Errorf("Mark wrote %q to memory.peak, want a reset", b)
	}
	// The kernel: the peak seen through the mark's open file is now the
	// turn's; a process is OOM-killed at the tree's limit, another by a
	// limit above it (no new "max" event).
	put(t, run, "memory.peak", "20971520\n")
	put(t, run, "memory.events", "low 0\nhigh 9\nmax 5\noom 3\noom_kill 3\noom_group_kill 0\n")
	put(t, run, "cpu.stat", "usage_usec 2000000\n")
	u = tree.Since(m)
	if u.MemoryPeak != 20*mib || u.OOMKills != 2 || u.OOMOutside || u.Throttled != 2 || u.CPU != 500*time.Millisecond || u.ForksRefused != 0 {
		t.Errorf("Since(mark) = %+v, want the turn's peak 20 MiB, 2 OOM kills at the tree's limit, 2 throttlings, 0.5 s", u)
	}
	m = tree.Mark()
	put(t, run, "memory.events", "low 0\nhigh 9\nmax 5\noom 3\noom_kill 4\noom_group_kill 0\n")
	if u := tree.Since(m); u.OOMKills != 1 || !u.OOMOutside {
		t.Errorf("Since(mark) = %+v, want an OOM kill by a limit outside the tree", u)
	}
	if held := tree.sys.acct.release(0, nil); len(held) > 0 {
		t.Errorf("release returned descriptors %v of files never prepared", held)
	}
	if tree.sys.acct.markFd >= 0 {
		t.Error("release kept the mark's descriptor")
	}

	if err := setV2HostLimits(homeDir, Limits{MemoryMax: 1 << 30}, ctl); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, homeDir, map[string]string{"memory.max": "1073741824", "memory.swap.max": "0"})
	if err := setV2HostLimits(homeDir, Limits{}, ctl); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, homeDir, map[string]string{"memory.max": "max", "memory.swap.max": "max"})
}

// TestLimitsV2Controllers: what the home gets from the cgroups above it.
func TestLimitsV2Controllers(t *testing.T) {
	for _, tt := range []struct {
		name             string
		parentHas        string // the parent's cgroup.controllers
		homeHas          string // the home's (the parent's subtree_control, by the kernel)
		explicit         bool
		wantParent, want string
	}{
		{"explicit parent", "cpu io memory pids", "cpu memory pids", true, "+memory +pids +cpu", "memory pids cpu"},
		{"default parent is left alone", "cpu io memory pids", "memory", false, "", "memory"},
		{"nothing delegated", "", "", true, "", ""},
		{"io only", "io", "", true, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeFS(t, map[string]string{
				"p/cgroup.controllers": tt.parentHas, "p/cgroup.subtree_control": "",
				"p/h/cgroup.controllers": tt.homeHas, "p/h/cgroup.subtree_control": "", "p/h/memory.oom.group": "0",
			})
			got := setUpControllers(filepath.Join(root, "p"), filepath.Join(root, "p/h"), tt.explicit)
			if got.String() != tt.want {
				t.Errorf("setUpControllers() = %q, want %q", got, tt.want)
			}
			wantFiles(t, root, map[string]string{"p/cgroup.subtree_control": tt.wantParent})
		})
	}
}

// TestLimitsPlan: where each limit and figure goes, by what the host has.
func TestLimitsPlan(t *testing.T) {
	dir := t.TempDir()
	v1 := &v1Host{}
	for i := range numV1 {
		v1.hier[i] = &v1Hier{mount: dir, own: dir, home: dir}
	}
	v1.hier[v1CPU].err = errors.New("not writable")
	noV1 := &v1Host{}
	all := Limits{MemoryMax: 1 << 30, Tasks: 100, CPU: 1}
	for _, tt := range []struct {
		name    string
		a       Attr
		home    *cgroupHome
		v1      *v1Host
		wantErr Resource
		want    limitPlan
	}{
		{name: "v2 controllers", a: Attr{Limits: all, Account: true}, home: &cgroupHome{ctl: ctlWanted, peaks: ctlMemory | ctlPids},
			want: limitPlan{v2: ctlWanted, mem: srcV2, tasks: srcV2, cpu: srcV2}},
		{name: "hybrid: membership v2, limits v1", a: Attr{Limits: Limits{MemoryMax: 1 << 30, Tasks: 100}}, home: &cgroupHome{}, v1: v1,
			want: limitPlan{need: 1<<v1Memory | 1<<v1Pids, mem: srcV1, tasks: srcV1, cpu: srcV2}},
		{name: "hybrid without a writable cpu hierarchy", a: Attr{Limits: all}, home: &cgroupHome{}, v1: v1, wantErr: CPU},
		{name: "throttle level on v1", a: Attr{Limits: Limits{MemoryHigh: 1 << 30}}, home: &cgroupHome{}, v1: v1, wantErr: MemoryHigh},
		{name: "tracking, accounted on v1", a: Attr{Account: true}, v1: v1,
			want: limitPlan{need: 1<<v1Memory | 1<<v1Pids | 1<<v1CPUAcct, mem: srcV1, tasks: srcV1, cpu: srcV1}},
		{name: "no controller: sampled", a: Attr{Account: true}, home: &cgroupHome{}, v1: noV1,
			want: limitPlan{mem: srcSample, tasks: srcSample, cpu: srcV2}},
		{name: "no controller, tracking", a: Attr{Account: true},
			want: limitPlan{mem: srcSample, tasks: srcSample, cpu: srcSample}},
		{name: "no controller, a limit", a: Attr{Limits: Limits{Tasks: 10}}, home: &cgroupHome{}, wantErr: Tasks},
		{name: "v2 memory without memory.peak: v1 has the figure", a: Attr{Account: true}, home: &cgroupHome{ctl: ctlMemory}, v1: v1,
			want: limitPlan{need: 1<<v1Memory | 1<<v1Pids, mem: srcV1, tasks: srcV1, cpu: srcV2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// v1Host.hasPidsPeak looks for the file in the home.
			os.WriteFile(filepath.Join(dir, "pids.peak"), nil, 0o644)
			got, err := planLimits(&tt.a, tt.home, tt.v1)
			if tt.wantErr != 0 {
				var ue *LimitUnavailableError
				if !errors.As(err, &ue) || ue.Resource != tt.wantErr {
					t.Fatalf("planLimits() error = %v, want a *LimitUnavailableError for %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.limits, tt.want.account = tt.a.Limits, tt.a.Account
			if got != tt.want {
				t.Errorf("planLimits() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLimitsV1Files: the v1 limits written before the root starts, the
// task limit raised by one while the forking thread is in the cgroup.
func TestLimitsV1Files(t *testing.T) {
	root := fakeFS(t, map[string]string{
		"memory/r1/memory.limit_in_bytes": "9223372036854771712\n", "memory/r1/memory.memsw.limit_in_bytes": "9223372036854771712\n",
		"pids/r1/pids.max":         "max\n",
		"cpu/r1/cpu.cfs_period_us": "100000\n", "cpu/r1/cpu.cfs_quota_us": "-1\n",
	})
	r := &v1Run{}
	r.dir[v1Memory], r.dir[v1Pids], r.dir[v1CPU] = filepath.Join(root, "memory/r1"), filepath.Join(root, "pids/r1"), filepath.Join(root, "cpu/r1")
	if err := r.apply(Limits{MemoryMax: 512 * mib, Tasks: 64, CPU: 1.5}); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, root, map[string]string{
		"memory/r1/memory.limit_in_bytes": "536870912", "memory/r1/memory.memsw.limit_in_bytes": "536870912",
		"pids/r1/pids.max": "65", "cpu/r1/cpu.cfs_period_us": "100000", "cpu/r1/cpu.cfs_quota_us": "150000",
	})
	if err := r.started(); err != nil {
		t.Fatal(err)
	}
	wantFiles(t, root, map[string]string{"pids/r1/pids.max": "64"})
}

// TestLimitsV1Hierarchies: the v1 hierarchies found from mountinfo and
// the host's /proc/self/cgroup, co-mounted controllers sharing one.
func TestLimitsV1Hierarchies(t *testing.T) {
	mountinfo := `25 31 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
27 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
29 25 0:27 /docker/abc /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
30 25 0:28 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
31 1 0:29 / /other/memory rw - cgroup cgroup rw,memory
`
	cgroup := `12:pids:/docker/abc/app
5:cpu,cpuacct:/user.slice
4:memory:/user.slice/user-1000.slice
1:name=systemd:/user.slice
0::/user.slice
`
	h := v1Hierarchies([]byte(mountinfo), []byte(cgroup), "/sys/fs/cgroup")
	for i, want := range []string{"/sys/fs/cgroup/memory/user.slice/user-1000.slice", "/sys/fs/cgroup/pids/app", "/sys/fs/cgroup/cpu,cpuacct/user.slice", "/sys/fs/cgroup/cpu,cpuacct/user.slice"} {
		if h[i] == nil || h[i].err != nil || h[i].own != want {
			t.Errorf("%s: %+v, want the host's cgroup %s", v1Names[i], h[i], want)
		}
	}
	if h[v1CPU] != h[v1CPUAcct] {
		t.Error("cpu and cpuacct, mounted together, are two hierarchies")
	}
	if h := v1Hierarchies([]byte(mountinfo), []byte("0::/\n"), "/sys/fs/cgroup"); h[v1Memory] == nil || h[v1Memory].err == nil {
		t.Errorf("no memory line in /proc/self/cgroup: %+v, want an error", h[v1Memory])
	}
}

// TestLimitsDelegate: DelegateOwnCgroup moves the host into a leaf and
// enables in its cgroup the controllers delegated to it; it refuses,
// changing nothing, when the cgroup holds other processes or has no
// controller.
func TestLimitsDelegate(t *testing.T) {
	t.Run("host alone", func(t *testing.T) {
		root := fakeFS(t, map[string]string{
			"own/cgroup.controllers": "cpu io memory pids\n", "own/cgroup.procs": "100\n", "own/cgroup.subtree_control": "\n",
			"own/" + hostLeaf + "/cgroup.procs": "", // the kernel makes it with the directory
		})
		own := filepath.Join(root, "own")
		if err := delegate(own, map[int32]bool{100: true}); err != nil {
			t.Fatal(err)
		}
		wantFiles(t, own, map[string]string{hostLeaf + "/cgroup.procs": "100", "cgroup.subtree_control": "+memory +pids +cpu"})
	})
	t.Run("other processes", func(t *testing.T) {
		root := fakeFS(t, map[string]string{"own/cgroup.controllers": "memory pids\n", "own/cgroup.procs": "100\n300\n", "own/cgroup.subtree_control": ""})
		own := filepath.Join(root, "own")
		err := delegate(own, map[int32]bool{100: true})
		if err == nil || !strings.Contains(err.Error(), "300") {
			t.Errorf("delegate() error = %v, want one naming process 300", err)
		}
		if _, err := os.Stat(filepath.Join(own, hostLeaf)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused delegate made the leaf (%v)", err)
		}
	})
	t.Run("nothing delegated", func(t *testing.T) {
		root := fakeFS(t, map[string]string{"own/cgroup.controllers": "io\n", "own/cgroup.procs": "100\n"})
		if err := delegate(filepath.Join(root, "own"), map[int32]bool{100: true}); !errors.Is(err, ErrLimitUnavailable) {
			t.Errorf("delegate() error = %v, want ErrLimitUnavailable", err)
		}
	})
}
