//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/workspace"
)

// A probe is one thing a sandboxed shell tries, and whether it must work.
type probe struct {
	name    string
	command string
	allowed bool
}

// rig is a working directory, a home with secrets and a CLI home, and a
// private temporary directory, under one test directory.
type rig struct {
	root, work, home, temp string
}

func newRig(t testing.TB) rig {
	t.Helper()
	root := t.TempDir()
	r := rig{root: root, work: filepath.Join(root, "work"), home: filepath.Join(root, "home"), temp: filepath.Join(root, "run-tmp")}
	for _, d := range []string{
		r.work + "/src", r.work + "/.claude", r.work + "/.git",
		r.home + "/.ssh", r.home + "/.codex/sessions", r.temp,
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		r.work + "/a.txt": "a", r.work + "/src/b.txt": "b", r.work + "/.claude/settings.json": "{}",
		r.work + "/.git/config": "[core]", r.work + "/.env": "APP=1\n", r.home + "/.ssh/id_ed25519": "SECRET",
		r.home + "/.codex/config.toml": "model = 'x'", r.home + "/.bash_history": "history",
	} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r rig) policy(level Level) Policy {
	return Policy{
		Level: level, Workdir: r.work, Temp: r.temp,
		Held:     workspace.ConfigNames(),
		Writable: []string{r.home + "/.codex/sessions"},
		Tops:     []Top{{Dir: r.home + "/.codex", Held: []string{"config.toml"}}},
		Hidden:   []string{r.home},
	}
}

// run runs each probe in one shell forked from a thread restricted by the
// ruleset of p, and reports each that did not end as it must.
func run(t *testing.T, p Policy, probes []probe) {
	t.Helper()
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	runBuilt(t, rs, p.Workdir, probes)
}

// runBuilt is run for the ruleset rs, built beforehand, the shell started
// in dir.
func runBuilt(t *testing.T, rs *Ruleset, dir string, probes []probe) {
	t.Helper()
	var script strings.Builder
	for _, pr := range probes {
		fmt.Fprintf(&script, "if ( %s ) >/dev/null 2>&1; then echo '%s yes'; else echo '%s no'; fi\n", pr.command, pr.name, pr.name)
	}
	// The thread ends with the shell's run, never running another
	// goroutine under the ruleset.
	var out []byte
	err := Retired(func() error {
		if err := rs.Restrict(); err != nil {
			return err
		}
		cmd := exec.Command("/bin/sh", "-c", script.String())
		cmd.Dir = dir
		var err error
		out, err = cmd.Output()
		return err
	})
	if err != nil {
		t.Fatalf("sandboxed shell: %v", err)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, verdict, _ := strings.Cut(line, " ")
		got[name] = verdict == "yes"
	}
	for _, pr := range probes {
		if ok, seen := got[pr.name]; !seen || ok != pr.allowed {
			t.Errorf("%s (%s): allowed %v, want %v", pr.name, pr.command, ok, pr.allowed)
		}
	}
}

// commonProbes hold at ReadOnly and WorkspaceWrite alike.
func commonProbes(r rig) []probe {
	return []probe{
		{"read-workdir", "cat " + r.work + "/a.txt", true},
		{"read-system", "cat /etc/passwd", true},
		{"read-ssh-key", "cat " + r.home + "/.ssh/id_ed25519", false},
		{"list-ssh", "ls " + r.home + "/.ssh", false},
		{"read-history", "cat " + r.home + "/.bash_history", false},
		{"read-cli-config", "cat " + r.home + "/.codex/config.toml", true},
		{"write-cli-config", "echo x >> " + r.home + "/.codex/config.toml", false},
		{"write-cli-state", "echo x > " + r.home + "/.codex/sessions/s.jsonl", true},
		{"new-in-cli-home", "echo x > " + r.home + "/.codex/new.toml", false},
		{"write-temp", "echo x > " + r.temp + "/x && mkdir " + r.temp + "/d && mv " + r.temp + "/x " + r.temp + "/d/y", true},
		{"write-beside-temp", "echo x > " + r.root + "/outside", false},
		{"write-dev-null", "echo x > /dev/null", true},
		{"write-tmp", "echo x > /tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root), false},
		{"write-etc", "echo x >> /etc/hosts", false},
		{"write-claude-settings", "echo x > " + r.work + "/.claude/settings.json", false},
		{"write-git-config", "echo x >> " + r.work + "/.git/config", false},
		{"write-dotenv", "echo X=1 >> " + r.work + "/.env", false},
		{"replace-dotenv", "echo X=1 > " + r.temp + "/e && mv " + r.temp + "/e " + r.work + "/.env", false},
		{"make-mcp-json", "echo x > " + r.work + "/.mcp.json", false},
		{"rename-claude", "mv " + r.work + "/.claude " + r.work + "/old", false},
		{"link-to-mcp-json", "ln -s " + r.temp + " " + r.work + "/.mcp.json", false},
		{"move-into-mcp-json", "echo x > " + r.temp + "/m && mv " + r.temp + "/m " + r.work + "/.mcp.json", false},
	}
}

// capProbes: a run as root keeps no capability that reaches past the
// ceiling (EscapeCaps), in its bounding set (so no execve gives it back)
// nor its effective set, and keeps the rest of root's (CAP_DAC_OVERRIDE,
// bit 1). A user's run has none to give up.
func capProbes() []probe {
	if os.Geteuid() != 0 {
		return nil
	}
	has := func(set string, bit int) string {
		return fmt.Sprintf("[ $(( 0x$(awk '/^%s:/{print $2}' /proc/self/status) & (1<<%d) )) -ne 0 ]", set, bit)
	}
	ps := []probe{{"keeps-dac-override", has("CapEff", unix.CAP_DAC_OVERRIDE), true}}
	for _, c := range []struct {
		name string
		bit  int
	}{{"sys-admin", unix.CAP_SYS_ADMIN}, {"sys-module", unix.CAP_SYS_MODULE}, {"bpf", unix.CAP_BPF}, {"net-admin", unix.CAP_NET_ADMIN}, {"sys-ptrace", unix.CAP_SYS_PTRACE}} {
		ps = append(ps, probe{"bounding-" + c.name, has("CapBnd", c.bit), false}, probe{"effective-" + c.name, has("CapEff", c.bit), false})
	}
	return ps
}

func TestSandboxReadOnly(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	probes := append(append(commonProbes(r), capProbes()...),
		probe{"write-workdir-file", "echo x >> " + r.work + "/a.txt", false},
		probe{"write-workdir-dir", "echo x > " + r.work + "/src/new.txt", false},
		probe{"make-top", "echo x > " + r.work + "/new.txt", false},
	)
	run(t, r.policy(ReadOnly), probes)
	assertUntouched(t, r)
}

func TestSandboxWorkspaceWrite(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	probes := append(commonProbes(r),
		probe{"write-workdir-file", "echo x >> " + r.work + "/a.txt", true},
		probe{"write-workdir-dir", "echo x > " + r.work + "/src/new.txt && mkdir -p " + r.work + "/src/d/e && rm " + r.work + "/src/b.txt", true},
		probe{"make-top", "echo x > " + r.work + "/new.txt", false},
		probe{"make-claude-in-src", "mkdir " + r.work + "/src/.claude", true},
	)
	run(t, r.policy(WorkspaceWrite), probes)
	assertUntouched(t, r)
}

func TestSandboxUnlimitedHidesReads(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	run(t, r.policy(Unlimited), []probe{
		{"write-workdir", "echo x > " + r.work + "/new.txt", true},
		{"write-temp", "echo x > " + r.temp + "/x", true},
		{"read-ssh-key", "cat " + r.home + "/.ssh/id_ed25519", false},
		{"read-cli-config", "cat " + r.home + "/.codex/config.toml", true},
	})
}

// TestSandboxHomeAsWorkdir: a working directory that is the hidden home
// directory stays readable (at ReadOnly, where nothing else allows it),
// and writable at WorkspaceWrite.
func TestSandboxHomeAsWorkdir(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	p := r.policy(ReadOnly)
	p.Workdir = r.home
	run(t, p, []probe{
		{"read-history", "cat " + r.home + "/.bash_history", true},
		{"list-home", "ls " + r.home, true},
		{"write-history", "echo x >> " + r.home + "/.bash_history", false},
	})
	p.Level = WorkspaceWrite
	run(t, p, []probe{
		{"write-history", "echo x >> " + r.home + "/.bash_history", true},
		{"write-cli-config", "echo x >> " + r.home + "/.codex/config.toml", false},
	})
}

// TestSandboxCgroupsReadOnly checks that at every level, Unlimited with
// and without hidden paths included, the run opens no file of a cgroup
// mount for writing (a root cgroup.procs, a limit of its own cgroups),
// while it reads them and, at Unlimited, writes elsewhere. Each write
// opens the file for appending and writes nothing: root's open would
// succeed without the ceiling.
func TestSandboxCgroupsReadOnly(t *testing.T) {
	requireLandlock(t)
	mounts := cgroupMounts()
	if len(mounts) == 0 {
		t.Fatal("no cgroup file system in /proc/self/mountinfo")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var probes []probe
	for _, m := range mounts {
		probes = append(probes,
			probe{"read:" + m, "cat " + m + "/cgroup.procs", true},
			probe{"write:" + m + "/cgroup.procs", ": >> " + m + "/cgroup.procs", false},
			probe{"mkdir:" + m, "mkdir " + m + "/clinvoke-sandbox-test", false})
	}
	for line := range strings.SplitSeq(string(own), "\n") {
		// 0::/a/b, or 4:memory:/a/b: its own cgroup's limits.
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, m := range mounts {
			for _, limit := range []string{"memory.max", "pids.max", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
				if p := filepath.Join(m, f[2], limit); fileExists(p) {
					probes = append(probes, probe{"write:" + p, ": >> " + p, false})
				}
			}
		}
	}
	r := newRig(t)
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"read-only", r.policy(ReadOnly)},
		{"workspace-write", r.policy(WorkspaceWrite)},
		{"unlimited", r.policy(Unlimited)},
		{"unlimited-nothing-hidden", Policy{Level: Unlimited, Workdir: r.work, Temp: r.temp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := probes
			if tc.p.Level == Unlimited {
				ps = append(ps, probe{"write-beside", "echo x > " + r.work + "/beside-" + tc.name, true})
			}
			run(t, tc.p, ps)
		})
	}
	t.Cleanup(func() {
		for _, m := range mounts {
			os.Remove(m + "/clinvoke-sandbox-test")
		}
	})
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestSandboxCgroupMounts checks that every cgroup and cgroup2 mount of
// a mountinfo text is found, each once, its escapes undone, and nothing
// else.
func TestSandboxCgroupMounts(t *testing.T) {
	mi := `24 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
31 24 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 31 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup cgroup rw,memory
36 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct
90 24 0:30 /a /srv/my\040cg rw shared:14 - cgroup cgroup rw,memory
91 24 0:30 /a /srv/my\040cg rw shared:14 - cgroup cgroup rw,memory
92 24 0:40 / /mnt/cgroupish rw - ext4 /dev/sda1 rw
`
	got := parseCgroupMounts([]byte(mi))
	want := []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu,cpuacct", "/srv/my cg"}
	if !slices.Equal(got, want) {
		t.Errorf("parseCgroupMounts = %q, want %q", got, want)
	}
}

// TestSandboxHostUnrestricted checks that restricting one thread leaves
// the host free: the test writes where the sandboxed shell could not.
func TestSandboxHostUnrestricted(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	run(t, r.policy(ReadOnly), []probe{{"write-beside-temp", "echo x > " + r.root + "/outside", false}})
	if err := os.WriteFile(filepath.Join(r.root, "outside"), []byte("host"), 0o644); err != nil {
		t.Fatalf("the host was restricted too: %v", err)
	}
}

func TestSandboxState(t *testing.T) {
	for _, tc := range []struct {
		cli, env    string
		dirs, files []string
	}{
		{"codex", "CODEX_HOME=/srv/codex", []string{"/srv/codex"}, nil},
		{"gemini", "GEMINI_CLI_HOME=/srv", []string{"/srv/.gemini"}, nil},
		{"claude", "", []string{"/home/u/.claude"}, []string{"/home/u/.claude.json"}},
		{"claude", "CLAUDE_CONFIG_DIR=/srv/c", []string{"/srv/c"}, nil},
		{"opencode", "", []string{"/home/u/.local/share/opencode", "/home/u/.local/state/opencode", "/home/u/.config/opencode", "/home/u/.cache/opencode"}, nil},
		{"some-acp-agent", "", nil, nil},
	} {
		dirs, files := State(tc.cli, []string{tc.env}, "/home/u")
		if !slices.Equal(dirs, tc.dirs) || !slices.Equal(files, tc.files) {
			t.Errorf("State(%q, %q) = %v, %v; want %v, %v", tc.cli, tc.env, dirs, files, tc.dirs, tc.files)
		}
	}
}

// assertUntouched checks that the held files kept their contents and
// that nothing was made outside what the run may write.
func assertUntouched(t *testing.T, r rig) {
	t.Helper()
	for name, body := range map[string]string{
		r.work + "/.claude/settings.json": "{}", r.work + "/.git/config": "[core]",
		r.home + "/.codex/config.toml": "model = 'x'",
	} {
		if b, err := os.ReadFile(name); err != nil || !bytes.Equal(b, []byte(body)) {
			t.Errorf("%s: %q, %v; want %q", name, b, err, body)
		}
	}
	for _, name := range []string{r.work + "/.mcp.json", r.root + "/outside", r.work + "/new.txt", "/tmp/clinvoke-sandbox-probe-" + filepath.Base(r.root)} {
		if _, err := os.Lstat(name); err == nil {
			t.Errorf("%s was made", name)
			os.Remove(name)
		}
	}
}

func requireLandlock(t testing.TB) {
	t.Helper()
	if _, err := Probe(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs on a kernel with Landlock: %v", err)
		}
		t.Skipf("no Landlock on this kernel: %v", err)
	}
}

// TestSandboxRestrictLogsAfterExec: from Landlock ABI 7 the ruleset is
// applied with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so that a host with
// audit enabled records the denials of the run's programs (after execve);
// an older kernel, which refuses the flag, gets none. On this host the
// call with the flag succeeds, and the ceiling holds; an unknown flag is
// refused (EINVAL), so the success says the kernel took the flag.
func TestSandboxRestrictLogsAfterExec(t *testing.T) {
	for abi := 1; abi <= 8; abi++ {
		want := uintptr(0)
		if abi >= 7 {
			want = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
		}
		if got := rightsFor(abi).restrict; got != want {
			t.Errorf("rightsFor(%d).restrict = %#x, want %#x", abi, got, want)
		}
	}
	requireLandlock(t)
	abi, _ := Probe()
	r := newRig(t)
	rs, err := Build(r.policy(ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if want := rightsFor(abi).restrict; rs.rt.restrict != want {
		t.Errorf("the ruleset's flags on ABI %d = %#x, want %#x", abi, rs.rt.restrict, want)
	}
	runBuilt(t, rs, r.work, []probe{{"write-beside-temp", "echo x > " + r.root + "/outside", false}, {"write-temp", "echo x > " + r.temp + "/x", true}})
	// The route of a process that applies the ruleset itself.
	f, err := rs.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Retired(func() error { return RestrictSelf(int(f.Fd())) }); err != nil {
		t.Errorf("RestrictSelf: %v", err)
	}
	if abi < 7 {
		t.Logf("Landlock ABI %d: the flag is not the kernel's", abi)
		return
	}
	other, err := Build(r.policy(ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = Retired(func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(other.fd), 1<<20, 0); errno != 0 {
			return errno
		}
		return nil
	})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("landlock_restrict_self with an unknown flag: %v, want EINVAL", err)
	}
}

// TestSandboxHiddenThroughLink: a Hide path reached through a symbolic
// link to a directory (/srv/keys with /srv a link to /data/srv) is hidden
// by both names, its Visible path beneath it stays readable by both, and
// the rest of the link's target stays readable.
func TestSandboxHiddenThroughLink(t *testing.T) {
	requireLandlock(t)
	r := newRig(t)
	data, srv := r.root+"/data/srv", r.root+"/srv"
	if err := os.MkdirAll(data+"/keys/pub", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{data + "/keys/id": "SECRET", data + "/keys/pub/id.pub": "PUBLIC", data + "/other": "other"} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("data/srv", srv); err != nil {
		t.Fatal(err)
	}
	for _, level := range []Level{ReadOnly, Unlimited} {
		p := r.policy(level)
		p.Hidden = append(p.Hidden, srv+"/keys")
		p.Visible = append(p.Visible, srv+"/keys/pub")
		run(t, p, []probe{
			{"read-key-by-link", "cat " + srv + "/keys/id", false},
			{"read-key", "cat " + data + "/keys/id", false},
			{"list-keys", "ls " + data + "/keys", false},
			{"read-shown-by-link", "cat " + srv + "/keys/pub/id.pub", true},
			{"read-shown", "cat " + data + "/keys/pub/id.pub", true},
			{"read-other", "cat " + data + "/other", true},
		})
	}
}
