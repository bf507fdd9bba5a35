//go:build linux

package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/workspace"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// benchPolicy is a policy like the driver's for a run in a fresh working
// directory: the real home hidden, PATH's directories visible.
func benchPolicy(b testing.TB, level Level) Policy {
	home, _ := os.UserHomeDir()
	work := b.TempDir()
	for _, d := range []string{".git", "src", "docs", "internal", "cmd"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{"go.mod", "go.sum", "README.md", "Makefile", ".gitignore"} {
		if err := os.WriteFile(filepath.Join(work, f), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p := Policy{
		Level: level, Workdir: work, Temp: b.TempDir(), Held: workspace.ConfigNames(),
		Hidden: []string{home}, Private: true,
		Visible: filepath.SplitList(os.Getenv("PATH")),
		Named:   []string{"/usr/bin/true", "HOME=" + home, "PATH=" + os.Getenv("PATH")},
	}
	return p
}

// BenchmarkBuild builds the ruleset of a policy like the driver's at
// each level, paired: in each iteration once fresh (the records dropped:
// the policy's first build, recording nothing), once fresh and recorded
// (its second), and once from that record, checked first. It reports
// each's time a build and the ratios to the first.
func BenchmarkBuild(b *testing.B) {
	for _, level := range []Level{ReadOnly, WorkspaceWrite} {
		b.Run(map[Level]string{ReadOnly: "read-only", WorkspaceWrite: "workspace-write"}[level], func(b *testing.B) {
			p := benchPolicy(b, level)
			defer records.reset()
			build := func(reused bool) time.Duration {
				start := time.Now()
				rs, err := Build(p)
				took := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if rs.reused != reused {
					b.Fatalf("reused = %v; want %v", rs.reused, reused)
				}
				rs.Close()
				return took
			}
			var fresh, recorded, reused time.Duration
			for b.Loop() {
				records.reset()
				fresh += build(false)
				recorded += build(false)
				reused += build(true)
			}
			b.ReportMetric(float64(fresh.Microseconds())/float64(b.N), "fresh-µs/op")
			b.ReportMetric(float64(recorded.Microseconds())/float64(b.N), "recorded-µs/op")
			b.ReportMetric(float64(reused.Microseconds())/float64(b.N), "reused-µs/op")
			b.ReportMetric(float64(recorded)/float64(fresh), "recorded/fresh")
			b.ReportMetric(float64(reused)/float64(fresh), "reused/fresh")
		})
	}
}

// canon returns the rules rs added and what it plans beyond them, in a
// form that compares equal for equal rulesets.
func canon(t *testing.T, rs *Ruleset) string {
	t.Helper()
	rules := slices.Clone(rs.applied)
	slices.SortFunc(rules, func(a, b appliedRule) int {
		return cmp.Or(cmp.Compare(a.dev, b.dev), cmp.Compare(a.ino, b.ino), cmp.Compare(a.access, b.access))
	})
	plan := "none"
	if rs.private != nil {
		pl := *rs.private
		pl.walked = nil
		plan = fmt.Sprintf("%+v", pl)
		if w := rs.private.walked; w != nil {
			plan += fmt.Sprintf(" walked %s %q %v", w.dir, w.held, w.found)
		}
	}
	return fmt.Sprintf("rules %v\nplan %s (%s)\nheld %+v\nlinks %+v", slices.Compact(rules), plan, rs.noPriv, rs.held, rs.links)
}

// pollerOnce opens the runtime's network poller for openFDs.
var pollerOnce sync.Once

// quietRig is newRig beneath /mnt, in a test that runs with a tmpfs of
// its own there (inPrivateMnt), rather than beneath the host's temporary
// directory: the directories above a rig's hidden home are listed by each
// build, and /tmp or /dev/shm (or /dev itself), where other programs come
// and go, would differ between two builds made to be compared. Above the
// private /mnt there is only /. Where the host gives no mount namespace to
// the test's user (inPrivateMnt ran the test in place), the rig lies in
// /dev/shm, the quietest of the host's shared directories.
func quietRig(t *testing.T) rig {
	t.Helper()
	parent := "/mnt"
	if os.Getenv(privateMntVar) == "" {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "clinvoke-records-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("TMPDIR", dir)
	return newRig(t)
}

// privateMntVar marks a copy of the test binary that inPrivateMnt
// started: "mount" where it mounts its /mnt, "exec" where it then
// executes itself again without the capability it mounted with, "done"
// where that is done.
const privateMntVar = "CLINVOKE_TEST_PRIVATE_MNT"

var (
	mntOnce sync.Once
	mntErr  error
)

// mountMnt mounts a tmpfs at /mnt, in a mount namespace of this
// process's own, its mounts made private first.
func mountMnt() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return err
	}
	return unix.Mount("tmpfs", "/mnt", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m")
}

// inPrivateMnt runs the test t again in a copy of this test binary in a
// mount namespace of its own (and, as a user other than root, a user
// namespace mapping only that user to itself), with a tmpfs of its own at
// /mnt, where quietRig puts its rigs: programs that make or remove
// entries of the host's directories (another run of these tests in
// /dev/shm, say) cannot change a listing between two builds made to be
// compared. It returns true where it ran the copy, whose result is then
// t's, and false in the copy, where the test goes on; and false, with a
// log, where the copy cannot be started (a host that refuses the user a
// namespace): the test then runs in place, as exact but exposed to the
// host's /dev/shm.
func inPrivateMnt(t *testing.T) bool {
	t.Helper()
	switch os.Getenv(privateMntVar) {
	case "done":
		return false
	case "mount":
		mntOnce.Do(func() { mntErr = mountMnt() })
		if mntErr != nil {
			t.Fatalf("a private /mnt: %v", mntErr)
		}
		return false
	case "exec":
		// A user's copy holds CAP_SYS_ADMIN in its user namespace
		// (ambient) to mount; the test runs without: executed again
		// from a thread without the ambient capability, it has none.
		runtime.LockOSThread()
		err := mountMnt()
		if err == nil {
			err = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
		}
		if err == nil {
			os.Setenv(privateMntVar, "done")
			exe, _ := os.Executable()
			err = syscall.Exec(exe, os.Args, os.Environ())
		}
		t.Fatalf("a private /mnt: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), privateMntVar+"=mount")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		cmd.Env[len(cmd.Env)-1] = privateMntVar + "=exec"
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Logf("no mount namespace for a private /mnt (%v): run in place", err)
		return false
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s in a private /mnt: %v\n%s", t.Name(), err, out.String())
	} else if !strings.Contains(out.String(), "--- PASS: "+t.Name()+" ") {
		t.Errorf("%s in a private /mnt did not pass:\n%s", t.Name(), out.String())
	}
	return true
}

// openFDs returns how many files this process has open, once the
// runtime's network poller (an epoll and an eventfd, opened with the first
// pipe or socket) is open: a count taken before it would differ.
func openFDs(t *testing.T) int {
	t.Helper()
	pollerOnce.Do(func() {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		w.Close()
	})
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestSandboxRecordReuse: a policy built again, after a change since the
// build that recorded it (its second), gets the rules and the plan a
// fresh build gets: the record is reused only where nothing it read has
// changed, and never allows more. The changes are made at once after the
// recording build, within the filesystem's clock tick.
func TestSandboxRecordReuse(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		level  Level
		setup  func(t *testing.T, r rig, p *Policy)
		change func(t *testing.T, r rig)
		reused bool // the second build reuses the first's record
	}{
		{name: "nothing changed", level: WorkspaceWrite, change: func(*testing.T, rig) {}, reused: true},
		{name: "nothing changed, read-only", level: ReadOnly, change: func(*testing.T, rig) {}, reused: true},
		{name: "nothing changed, unlimited", level: Unlimited, change: func(*testing.T, rig) {}, reused: true},
		{name: "a file written in an entry", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.WriteFile(r.work+"/src/c.txt", []byte("c"), 0o644))
		}, reused: true},
		{name: "a new top-level entry", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.WriteFile(r.work+"/new.txt", nil, 0o644))
		}},
		{name: "a held name made", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.WriteFile(r.work+"/.mcp.json", []byte("{}"), 0o644))
		}},
		{name: "an entry renamed to a held name", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.Remove(r.work+"/.env"))
			must(t, os.Rename(r.work+"/a.txt", r.work+"/.env"))
			must(t, os.WriteFile(r.work+"/a.txt", nil, 0o644))
		}},
		{name: "a settings file replaced by a link", level: ReadOnly, change: func(t *testing.T, r rig) {
			must(t, os.Remove(r.home+"/.codex/config.toml"))
			must(t, os.Symlink(r.work+"/a.txt", r.home+"/.codex/config.toml"))
		}},
		{name: "a held link retargeted", level: WorkspaceWrite, setup: func(t *testing.T, r rig, _ *Policy) {
			must(t, os.Remove(r.work+"/.env"))
			must(t, os.Symlink("a.txt", r.work+"/.env"))
		}, change: func(t *testing.T, r rig) {
			must(t, os.Remove(r.work+"/.env"))
			must(t, os.Symlink("src/b.txt", r.work+"/.env"))
		}, reused: true}, // the held names' chains are followed for each build
		{name: "an entry renamed away and another made under its name", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.Rename(r.work+"/src", r.home+"/src-old")) // the home is never listed
			must(t, os.Mkdir(r.work+"/src", 0o755))
		}},
		{name: "a directory entry replaced by a file", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.Rename(r.work+"/src", r.root+"/src-old"))
			must(t, os.WriteFile(r.work+"/src", nil, 0o644))
		}},
		{name: "an entry replaced by a link out", level: WorkspaceWrite, change: func(t *testing.T, r rig) {
			must(t, os.Rename(r.work+"/src", r.root+"/src-old"))
			must(t, os.Symlink(r.home+"/.ssh", r.work+"/src"))
		}},
		{name: "a new entry above the hidden home", level: ReadOnly, change: func(t *testing.T, r rig) {
			must(t, os.Mkdir(r.root+"/new", 0o755))
		}},
		{name: "an entry above the hidden home renamed and remade", level: ReadOnly, change: func(t *testing.T, r rig) {
			must(t, os.Rename(r.work, r.home+"/work-old"))
			must(t, os.Mkdir(r.work, 0o755))
		}},
		{name: "a new directory in the home", level: ReadOnly, change: func(t *testing.T, r rig) {
			must(t, os.Mkdir(r.home+"/.aws", 0o700))
		}, reused: true}, // dark: never listed
		{name: "a new entry in a top", level: ReadOnly, change: func(t *testing.T, r rig) {
			must(t, os.Mkdir(r.home+"/.codex/log", 0o700))
		}},
		{name: "a hidden path appearing", level: ReadOnly, setup: func(t *testing.T, r rig, p *Policy) {
			p.Hidden = append(p.Hidden, r.root+"/secrets/keys")
		}, change: func(t *testing.T, r rig) {
			must(t, os.MkdirAll(r.root+"/secrets/keys", 0o700))
		}},
		{name: "a hidden path appearing as a link", level: ReadOnly, setup: func(t *testing.T, r rig, p *Policy) {
			p.Hidden = append(p.Hidden, r.root+"/keys")
		}, change: func(t *testing.T, r rig) {
			must(t, os.Symlink(r.work+"/src", r.root+"/keys"))
		}},
		{name: "a writable path made", level: ReadOnly, setup: func(t *testing.T, r rig, p *Policy) {
			p.Writable = append(p.Writable, r.home+"/.cache")
		}, change: func(t *testing.T, r rig) {
			must(t, os.Mkdir(r.home+"/.cache", 0o700))
		}},
		{name: "a visible link retargeted", level: ReadOnly, setup: func(t *testing.T, r rig, p *Policy) {
			must(t, os.Symlink(r.home+"/.codex", r.home+"/bin"))
			p.Visible = append(p.Visible, r.home+"/bin")
		}, change: func(t *testing.T, r rig) {
			must(t, os.Remove(r.home+"/bin"))
			must(t, os.Symlink(r.home+"/.ssh", r.home+"/bin"))
		}},
		{name: "a temporary directory beneath the hidden home", level: ReadOnly, setup: func(t *testing.T, r rig, p *Policy) {
			p.Temp = r.home + "/tmp"
			must(t, os.Mkdir(p.Temp, 0o700))
		}, change: func(*testing.T, rig) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records.reset()
			fds := openFDs(t)
			r := quietRig(t)
			p := r.policy(tc.level)
			p.Private, p.Settings = true, []string{r.home + "/.codex/config.toml"}
			if tc.setup != nil {
				tc.setup(t, r, &p)
			}
			for range 2 { // the second build records
				first, err := Build(p)
				must(t, err)
				first.Close()
			}
			tc.change(t, r)
			second, err := Build(p)
			must(t, err)
			defer second.Close()
			records.reset()
			fresh, err := Build(p)
			must(t, err)
			defer fresh.Close()
			if second.reused != tc.reused || fresh.reused {
				t.Errorf("reused = %v, fresh %v; want %v, false", second.reused, fresh.reused, tc.reused)
			}
			if got, want := canon(t, second), canon(t, fresh); got != want {
				t.Errorf("the second build differs from a fresh one:\n%s\nwant\n%s", got, want)
			}
			records.reset()
			second.Close()
			fresh.Close()
			if n := openFDs(t); n != fds {
				t.Errorf("%d files open after the builds, %d before", n, fds)
			}
		})
	}
}

// TestSandboxRecordConcurrent: builds of more policies than are kept, run
// at once, each get the rules of a fresh build of their policy, while
// records are dropped under builds that use them; at most maxRecords are
// kept, and none leaves a file open once they are dropped.
func TestSandboxRecordConcurrent(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	records.reset()
	fds := openFDs(t)
	var policies []Policy
	for i := range maxRecords + 2 {
		r := quietRig(t)
		policies = append(policies, r.policy(Level(i%2))) // ReadOnly and WorkspaceWrite
	}
	var want []string
	for _, p := range policies {
		records.reset()
		rs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, canon(t, rs))
		rs.Close()
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*20)
	reused := make(chan bool, 8*20)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				k := (g + i) % len(policies)
				rs, err := Build(policies[k])
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := canon(t, rs); got != want[k] {
					errs <- fmt.Sprintf("policy %d:\n%s\nwant\n%s", k, got, want[k])
				}
				reused <- rs.reused
				rs.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	close(reused)
	for e := range errs {
		t.Error(e)
	}
	n := 0
	for r := range reused {
		if r {
			n++
		}
	}
	if n == 0 {
		t.Error("no build reused a record")
	}
	records.mu.Lock()
	kept := len(records.entries)
	records.mu.Unlock()
	if kept > maxRecords {
		t.Errorf("%d records kept; want at most %d", kept, maxRecords)
	}
	records.reset()
	if got := openFDs(t); got != fds {
		t.Errorf("%d files open after the builds, %d before", got, fds)
	}
}

// A fakeTimer is an idle timer the test fires by hand.
type fakeTimer struct {
	f       func()
	stopped bool
}

// Stop stops t, as a *time.Timer's Stop: a function already running
// still runs.
func (t *fakeTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

// fakeTimers makes the records' idle timers ones the test fires by hand,
// until it ends, and returns those set so far.
func fakeTimers(t *testing.T) func() []*fakeTimer {
	t.Helper()
	records.reset()
	var mu sync.Mutex
	var set []*fakeTimer
	records.mu.Lock()
	records.after = func(_ time.Duration, f func()) stopper {
		mu.Lock()
		defer mu.Unlock()
		ft := &fakeTimer{f: f}
		set = append(set, ft)
		return ft
	}
	records.mu.Unlock()
	t.Cleanup(func() {
		records.reset()
		records.mu.Lock()
		records.after = afterFunc
		records.mu.Unlock()
	})
	return func() []*fakeTimer {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(set)
	}
}

// kept returns the records kept, and how many of them hold a record
// (rather than the note of a first build).
func kept() (n, recorded int) {
	records.mu.Lock()
	defer records.mu.Unlock()
	for _, e := range records.entries {
		if e.rec != nil {
			recorded++
		}
	}
	return len(records.entries), recorded
}

// TestSandboxRecordIdle: a policy's first build holds no file once its
// ruleset is closed, its second records it, its third reuses the record;
// a record's idle timer drops it and closes every file it held, unless a
// build used it since the timer was set, even one that fired before the
// use and whose function runs after it.
func TestSandboxRecordIdle(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	for _, tc := range []struct {
		name string
		// fire fires the timers the test means to, of those set
		// after each build (set[i] after build i), and reports
		// the last fired.
		fire     func(sets [][]*fakeTimer) *fakeTimer
		dropped  bool // the record is dropped after fire
		fireLast bool // the last timer set is fired after fire
	}{
		{name: "idle after its last use", fire: func(sets [][]*fakeTimer) *fakeTimer {
			last := sets[len(sets)-1]
			return last[len(last)-1]
		}, dropped: true},
		{name: "timer fired before a use, its function run after it", fire: func(sets [][]*fakeTimer) *fakeTimer {
			before := sets[len(sets)-2] // set by the recording build
			return before[len(before)-1]
		}, fireLast: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timers := fakeTimers(t)
			fds := openFDs(t)
			p := quietRig(t).policy(WorkspaceWrite)
			var sets [][]*fakeTimer
			var reused []bool
			for i := range 3 {
				rs, err := Build(p)
				if err != nil {
					t.Fatal(err)
				}
				reused = append(reused, rs.reused)
				rs.Close()
				sets = append(sets, timers())
				n, recorded := kept()
				if i == 0 && (n != 1 || recorded != 0 || openFDs(t) != fds) {
					t.Errorf("after the first build: %d kept, %d recorded, %d files open, %d before; want the build noted, nothing held", n, recorded, openFDs(t), fds)
				}
				if i > 0 && (n != 1 || recorded != 1 || openFDs(t) <= fds) {
					t.Errorf("after build %d: %d kept, %d recorded, %d files open, %d before; want one record, its files held", i+1, n, recorded, openFDs(t), fds)
				}
			}
			if !slices.Equal(reused, []bool{false, false, true}) {
				t.Errorf("reused %v; want the third build only", reused)
			}
			ft := tc.fire(sets)
			ft.f()
			if _, recorded := kept(); (recorded == 0) != tc.dropped {
				t.Errorf("%d records kept after the timer's function; dropped: want %v", recorded, tc.dropped)
			}
			if tc.fireLast {
				last := timers()
				if lt := last[len(last)-1]; lt.stopped || lt == ft {
					t.Fatal("the last use set no timer of its own")
				}
				last[len(last)-1].f()
			}
			if n, _ := kept(); n != 0 {
				t.Errorf("%d records kept once idle; want none", n)
			}
			if n := openFDs(t); n != fds {
				t.Errorf("%d files open once idle, %d before the builds", n, fds)
			}
		})
	}
}

// TestSandboxRecordIdleTimer: with the real timer, an idle record is
// dropped, its files closed, and no goroutine is left behind.
func TestSandboxRecordIdleTimer(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	defer goleak.VerifyNone(t)
	records.reset()
	idled := make(chan struct{}, 16)
	records.mu.Lock()
	records.idle, records.idled = time.Millisecond, func() { idled <- struct{}{} }
	records.mu.Unlock()
	defer func() {
		records.reset()
		records.mu.Lock()
		records.idle, records.idled = recordIdle, nil
		records.mu.Unlock()
	}()
	fds := openFDs(t)
	p := quietRig(t).policy(ReadOnly)
	for range 2 {
		rs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Close()
	}
	for n := -1; n != 0; n, _ = kept() {
		<-idled // a timer's function ran: the last set drops the record
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d files open once idle, %d before the builds", n, fds)
	}
}

// TestSandboxRecordUnmount: a filesystem mounted beneath a recorded path
// cannot be unmounted while the record holds it, and can once the record
// is dropped as idle.
func TestSandboxRecordUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if inPrivateMnt(t) {
		return
	}
	timers := fakeTimers(t)
	r := quietRig(t)
	mnt := r.work + "/src"
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	p := r.policy(WorkspaceWrite)
	for range 2 {
		rs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Close()
	}
	if err := unix.Unmount(mnt, 0); !errors.Is(err, unix.EBUSY) {
		mounted = err != nil
		t.Fatalf("unmount while recorded: %v; want EBUSY", err)
	}
	set := timers()
	set[len(set)-1].f()
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatalf("unmount once the record is idle: %v", err)
	}
	mounted = false
}

// TestSandboxRecordDescriptor: a record whose held file was closed behind
// its back (a stray close elsewhere in the program), or whose number now
// names another file, is not reused: the next build is fresh, succeeds,
// and allows nothing of the file now at that number.
func TestSandboxRecordDescriptor(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	for _, tc := range []struct {
		name string
		// harm does to fd, a descriptor the record holds for the
		// working directory's src, what a stray close (and an open
		// that got its number) elsewhere in the program would.
		harm func(t *testing.T, r rig, fd int)
	}{
		{"closed", func(t *testing.T, _ rig, fd int) { unix.Close(fd) }},
		{"another file at its number", func(t *testing.T, r rig, fd int) {
			ssh, err := unix.Open(r.home+"/.ssh", unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(ssh)
			if err := unix.Dup3(ssh, fd, unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			records.reset()
			t.Cleanup(records.reset)
			r := quietRig(t)
			p := r.policy(WorkspaceWrite)
			for range 2 { // the second build records p
				rs, err := Build(p)
				if err != nil {
					t.Fatal(err)
				}
				rs.Close()
			}
			fd := -1
			records.mu.Lock()
			for _, e := range records.entries {
				if e.rec == nil {
					continue
				}
				for _, pp := range e.rec.pinned {
					if pp.path == r.work+"/src" {
						fd = pp.fd
					}
				}
			}
			records.mu.Unlock()
			if fd < 0 {
				t.Fatalf("the record holds no file for %s", r.work+"/src")
			}
			tc.harm(t, r, fd)
			for i := range 2 {
				rs, err := Build(p)
				if err != nil {
					t.Fatalf("build %d after the harm: %v", i, err)
				}
				if i == 0 && rs.reused {
					t.Errorf("build %d reused a record whose file at %d is not the one recorded", i, fd)
				}
				if i == 0 {
					runBuilt(t, rs, r.work, []probe{
						{"read-hidden-key", "cat " + r.home + "/.ssh/id_ed25519", false},
						{"write-hidden-dir", "echo x > " + r.home + "/.ssh/planted", false},
						{"write-src", "echo x > " + r.work + "/src/ok", true},
					})
				}
				rs.Close()
			}
		})
	}
}

// TestSandboxRecordBounded: a policy whose build would hold more than
// maxPinned files (a working directory whose top the run filled) is built
// fresh each time and holds none of them.
func TestSandboxRecordBounded(t *testing.T) {
	if inPrivateMnt(t) {
		return
	}
	records.reset()
	t.Cleanup(records.reset)
	r := quietRig(t)
	for i := range maxPinned + 10 {
		if err := os.WriteFile(filepath.Join(r.work, fmt.Sprint("f", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := openFDs(t)
	p := r.policy(WorkspaceWrite)
	for i := range 3 {
		rs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		if rs.reused {
			t.Errorf("build %d reused a record past maxPinned", i)
		}
		rs.Close()
	}
	if _, recorded := kept(); recorded != 0 {
		t.Errorf("%d records kept of a policy past maxPinned, want none", recorded)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d files open after the builds, %d before", after, before)
	}
}
