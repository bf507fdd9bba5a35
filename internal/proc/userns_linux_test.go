//go:build linux

package proc

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// startInUserNS starts argv in a new user namespace (this process's user
// mapped to itself) and ends it with the test.
func startInUserNS(t testing.TB, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	nestUserNS(cmd)
	if err := cmd.Start(); err != nil {
		t.Skipf("no user namespace here: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// nestUserNS makes cmd start in a new user namespace, this process's user
// mapped to itself.
func nestUserNS(cmd *exec.Cmd) {
	uid, gid := syscall.Getuid(), syscall.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}
}

// TestInUserNS: a process is in a run's user namespace when it lives in
// it or in one nested in it, and not when it lives in this process's or
// in another run's.
func TestInUserNS(t *testing.T) {
	if runUserNS(int32(syscall.Getpid())) != (nsID{}) {
		t.Fatal("this process's own user namespace taken for a run's")
	}
	run := startInUserNS(t, "sleep", "600")
	other := startInUserNS(t, "sleep", "600")
	// A nested namespace: unshare -U in the run's; its child, a shell,
	// prints its pid once it runs there.
	nest := exec.Command("unshare", "-U", "--fork", "--kill-child", "sh", "-c", "echo $$; exec sleep 600")
	out, err := nest.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	nestUserNS(nest)
	if err := nest.Start(); err != nil {
		t.Skipf("no user namespace here: %v", err)
	}
	t.Cleanup(func() { nest.Process.Kill(); nest.Wait() })
	ns := runUserNS(int32(run.Process.Pid))
	if ns.zero() {
		t.Fatal("no user namespace read for a process started in one")
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the nested process: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	nested := int32(n)
	cases := []struct {
		name string
		run  int32 // the run's root
		pid  int32
		want bool
	}{
		{"the run's root", int32(run.Process.Pid), int32(run.Process.Pid), true},
		{"this process", int32(run.Process.Pid), int32(syscall.Getpid()), false},
		{"another run's", int32(run.Process.Pid), int32(other.Process.Pid), false},
		{"init", int32(run.Process.Pid), 1, false},
		{"nested in the run's", int32(nest.Process.Pid), nested, true},
		{"nested, seen from another run", int32(run.Process.Pid), nested, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := inUserNS(c.pid, runUserNS(c.run)); got != c.want {
				t.Errorf("inUserNS(%d, the namespace of %d) = %v, want %v", c.pid, c.run, got, c.want)
			}
		})
	}
}

// BenchmarkUserNSMark measures what the user-namespace mark adds to a
// scan at the Tracking level, per process started since the root that no
// other rule found, against the stat read every scan makes of such a
// process: "stat" reads /proc/PID/stat, "host" decides a process of this
// process's user namespace (one stat), "nested" one of another run's (a
// walk up its parents). Paired in one run; n processes each.
func BenchmarkUserNSMark(b *testing.B) {
	const n = 200
	run := startInUserNS(b, "sleep", "600")
	ns := runUserNS(int32(run.Process.Pid))
	var host, nested []int32
	for range n {
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Process.Kill(); c.Wait() })
		host = append(host, int32(c.Process.Pid))
		o := startInUserNS(b, "sleep", "600")
		nested = append(nested, int32(o.Process.Pid))
	}
	b.Run("stat", func(b *testing.B) {
		for b.Loop() {
			for _, pid := range host {
				if _, err := readStat(pid); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, c := range []struct {
		name string
		pids []int32
	}{{"host", host}, {"nested", nested}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, pid := range c.pids {
					if inUserNS(pid, ns) {
						b.Fatal(strconv.Itoa(int(pid)) + " taken for the run's")
					}
				}
			}
		})
	}
}
