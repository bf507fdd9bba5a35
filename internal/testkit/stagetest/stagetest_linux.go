// Package stagetest holds what the tests of a first stage share, whichever
// package's host starts it (internal/sandbox's Stage, internal/egress's
// Net): running a command the stage prepared, the directories its tests
// need, and the checks of what the run holds.
package stagetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A Host is the host's end of a command a first stage was prepared to
// start: sandbox.Stage, egress.Net.
type Host interface {
	// Started receives the stage's message once the command started.
	Started() error
}

// Run starts cmd, which h prepared, after edit (if not nil) changed it,
// and returns what h's Started returned, the command's end and its
// output (its standard output and error together). A command whose
// Started failed is killed before it is waited for.
func Run(t testing.TB, h Host, cmd *exec.Cmd, edit func(*exec.Cmd)) (serr, werr error, out string) {
	t.Helper()
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	if edit != nil {
		edit(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if serr = h.Started(); serr != nil {
		cmd.Process.Kill()
	}
	werr = cmd.Wait()
	return serr, werr, b.String()
}

// OutsideTmp returns a new directory outside /tmp (which a first stage's
// private roots cover), removed at t's end.
func OutsideTmp(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "clinvoke-stage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700); os.RemoveAll(dir) })
	return dir
}

// Unsearchable returns a file named name, holding body, in a directory
// outside /tmp that a user namespace of this process may not search:
// mode 0 for a user, and for root owned by a user the namespace does not
// map (nobody), mode 0700. Removed at t's end.
func Unsearchable(t testing.TB, name, body string) string {
	t.Helper()
	dir := OutsideTmp(t)
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	mode := os.FileMode(0)
	if os.Geteuid() == 0 {
		mode = 0o700
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return f
}

// FilesTo returns this process's open files that are target (a link of
// /proc/self/fd, such as "mnt:[4026532290]").
func FilesTo(t testing.TB, target string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == target {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// CheckHeld checks that ns, the mount namespace a first stage sent its
// host, is the one the run ran in (ran: what readlink of the run's
// /proc/self/ns/mnt printed), held by this one file of the host after
// the run exited, and that no file of the host refers to it once ns is
// closed, which it does.
func CheckHeld(t testing.TB, ns *os.File, ran string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := "mnt:[" + strconv.FormatUint(st.Ino, 10) + "]"
	if got := strings.TrimSpace(ran); got != want {
		t.Errorf("the run's mount namespace is %s, the host holds %s", got, want)
	}
	if got := FilesTo(t, want); len(got) != 1 {
		t.Errorf("files of the host that refer to %s after the run: %q, want the one held", want, got)
	}
	ns.Close()
	if got := FilesTo(t, want); len(got) != 0 {
		t.Errorf("files of the host that refer to %s once released: %q, want none", want, got)
	}
}

// CheckCaps checks a process's status (the text of /proc/…/status): its
// effective, permitted and bounding sets hold none of gone, its effective
// and permitted sets hold kept; it returns the status's fields by name.
func CheckCaps(t testing.TB, status string, gone []int, kept int) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields[k] = strings.TrimSpace(v)
	}
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd"} {
		v, err := strconv.ParseUint(fields[set], 16, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", set, fields[set], err)
		}
		for _, c := range gone {
			if v&(1<<c) != 0 {
				t.Errorf("%s = %s holds capability %d", set, fields[set], c)
			}
		}
		if v&(1<<kept) == 0 && set != "CapBnd" {
			t.Errorf("%s = %s lacks capability %d, which root keeps", set, fields[set], kept)
		}
	}
	return fields
}

// CheckEnv checks a run of /usr/bin/env a stage started (Run's serr, werr
// and out): it started and exited, and the run's environment is want.
func CheckEnv(t testing.TB, serr, werr error, out string, want []string) {
	t.Helper()
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if got := strings.Fields(out); !slices.Equal(got, want) {
		t.Errorf("the run's environment = %q, want %q", got, want)
	}
}

// StartedFunc is a Host whose Started calls the function: a host's
// Started with more to do at that moment (take the namespace it holds).
type StartedFunc func() error

// Started calls f.
func (f StartedFunc) Started() error { return f() }
