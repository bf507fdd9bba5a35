//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/shellshim"
)

// shellScript is what a command of a fake CLI runs through bash -c: the
// CLI is timeout(1), a program that is no shell and stays its parent, as
// a CLI's node or app-server does.
func shellScript(work string) string {
	return strings.Join([]string{
		`if (exec 3</proc/$PPID/mem) 2>/dev/null; then echo "mem yes"; else echo "mem no"; fi`,
		`if cat /proc/$PPID/maps >/dev/null 2>&1; then echo "maps yes"; else echo "maps no"; fi`,
		`if cat /proc/$PPID/environ >/dev/null 2>&1; then echo "environ yes"; else echo "environ no"; fi`,
		`echo "bash ${BASH_VERSION:+yes}"`,
		`/bin/bash -c 'exit 3'; echo "exit $?"`,
		`/bin/bash -c 'kill -TERM $$'; echo "signal $?"`,
		`echo hi | /bin/sh -c 'read x; echo "stdin $x"'`,
		`/bin/sh -c 'echo "argv0 $0"'`,
		`(exec -a sh /bin/bash -c 'case :$SHELLOPTS: in *:posix:*) echo "sh-mode posix";; *) echo "sh-mode bash";; esac')`,
		`env -i /bin/bash -c 'echo "env-i ${BASH_VERSION:+bash}"'`,
		`CLI=$PPID /usr/bin/env bash -c 'echo "nested-mem $(if (exec 3</proc/$CLI/mem) 2>/dev/null; then echo yes; else echo no; fi)"'`,
		`if echo x >> ` + work + `/src/b.txt; then echo "write yes"; else echo "write no"; fi`,
		`if echo x > ` + work + `/new.txt 2>/dev/null; then echo "write-top yes"; else echo "write-top no"; fi`,
		`if echo x > ` + ShimDir + `/usr/bin/bash 2>/dev/null; then echo "real-shell-writable yes"; else echo "real-shell-writable no"; fi`,
		`if kill -0 $PPID 2>/dev/null; then echo "signal-cli yes"; else echo "signal-cli no"; fi`,
		`/bin/sh -c 'if kill -0 $PPID 2>/dev/null; then echo "signal-shell yes"; else echo "signal-shell no"; fi'`,
		`sleep 30 & if kill $! 2>/dev/null; then echo "signal-own yes"; else echo "signal-own no"; fi; wait`,
	}, "\n")
}

// wantShell is what shellScript prints where the command runs in a
// domain nested in the CLI's: the CLI's memory, maps and environment
// refused, and everything else as a shell does it.
var wantShell = []string{
	"mem no", "maps no", "environ no", "bash yes", "exit 3", "signal 143", "stdin hi", "argv0 /bin/sh",
	"sh-mode posix", "env-i bash", "nested-mem no", "write yes", "write-top no", "real-shell-writable no",
}

// checkShell reports each line of wantShell that out lacks, and that the
// command could signal its own processes, and the CLI only where Landlock
// scopes no signals (ABI 5 and before).
func checkShell(t *testing.T, route, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := append(slices.Clone(wantShell), "signal-own yes", "signal-shell yes", "signal-cli no")
	if abi, _ := Probe(); abi < 6 {
		want[len(want)-1] = "signal-cli yes"
	}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("%s: the command printed %q, want a line %q", route, out, w)
		}
	}
}

// TestSandboxShellNested: a command a sandboxed CLI runs through a shell
// is in a Landlock domain nested in the CLI's, on root's route and on a
// user's (the first stage): it can read neither the CLI's memory nor its
// maps nor its environment, and runs as the shell does (exit status,
// signals, standard input, argv[0] and sh mode, an empty environment,
// writes where the level allows).
func TestSandboxShellNested(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	fakeCLI := func() *exec.Cmd {
		cmd := exec.Command("timeout", "60", "/bin/bash", "-c", shellScript(r.work))
		cmd.Dir = r.work
		return cmd
	}
	t.Run("root", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI())
		checkShell(t, "root's route", out)
	})
	t.Run("hidden-binary", func(t *testing.T) {
		// The program's binary in a hidden path (a Go program in ~/go/bin
		// beneath a hidden home) still runs as the shim: it is executed
		// by the shell's path, bound over it.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		q := p
		q.Hidden = append(slices.Clip(q.Hidden), filepath.Dir(exe))
		_, out := onRootsRoute(t, q, fakeCLI())
		checkShell(t, "a hidden binary", out)
	})
	t.Run("launched-wrapper", func(t *testing.T) {
		// A launcher (timeout, no shell) starts a wrapper script, which
		// starts the CLI (timeout again) without executing it: the
		// wrapper nests, the CLI shares its domain, and the CLI's
		// command, though below the wrapper, nests again.
		cmd := exec.Command("timeout", "60", "/bin/bash", "-c", `timeout 50 /bin/bash -c "$CLINVOKE_TEST_SCRIPT"; true`)
		cmd.Dir = r.work
		cmd.Env = append(os.Environ(), "CLINVOKE_TEST_SCRIPT="+shellScript(r.work))
		_, out := onRootsRoute(t, p, cmd)
		checkShell(t, "a CLI beneath a launched wrapper", out)
	})
	t.Run("stage", func(t *testing.T) {
		requireStage(t)
		serr, werr, out := stageRun(t, p, fakeCLI(), nil)
		if serr != nil || werr != nil {
			t.Fatalf("sandboxed CLI by the first stage: Started() = %v, Wait() = %v: %s", serr, werr, out)
		}
		checkShell(t, "the first stage", out)
	})
}

// onRootsRoute runs cmd, as a fake CLI, on root's route under the ruleset
// of p (closed at t's end), which must give it its private roots, and
// returns the ruleset and what cmd printed.
func onRootsRoute(t *testing.T, p Policy, cmd *exec.Cmd) (*Ruleset, string) {
	t.Helper()
	return onRootsRouteAfter(t, p, nil, cmd)
}

// onRootsRouteAfter is onRootsRoute with before, if not nil, run first
// on the thread that restricts itself and forks cmd.
func onRootsRouteAfter(t *testing.T, p Policy, before func() error, cmd *exec.Cmd) (*Ruleset, string) {
	t.Helper()
	requirePrivate(t)
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	var out []byte
	err = Retired(func() error {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		if err := rs.Restrict(); err != nil {
			return err
		}
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("sandboxed CLI: %v: %s", err, out)
	}
	if ok, why := rs.Private(); !ok {
		t.Fatalf("Private() = false, %q; want the private roots", why)
	}
	return rs, string(out)
}

// BenchmarkShellNested measures what the shim adds to a command: a
// sandboxed shell runs /bin/sh -c : b.N times, through the shim (this
// test binary started, the domain nested, the real shell executed) and
// straight through the real shell kept beneath ShimDir, on root's route
// and by the first stage (a user's).
func BenchmarkShellNested(b *testing.B) {
	requireLandlock(b)
	real, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		b.Fatal(err)
	}
	for _, route := range []string{"root", "stage"} {
		for _, c := range []struct{ name, sh string }{{"shim", "/bin/sh"}, {"real", ShimDir + real}} {
			b.Run(route+"/"+c.name, func(b *testing.B) {
				r := newRig(b)
				p := r.policy(WorkspaceWrite)
				p.Private = true
				script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do %s -c : || exit 1; i=$((i+1)); done", b.N, c.sh)
				cmd := exec.Command(real, "-c", script)
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := shellOnRoute(b, route, p, cmd); err != nil {
					b.Fatalf("%v: %s", err, out.String())
				}
			})
		}
	}
}

// shellOnRoute runs cmd under the ruleset of p and its private roots, on
// root's route or by the first stage, skipping b where the route is not
// this process's.
func shellOnRoute(b *testing.B, route string, p Policy, cmd *exec.Cmd) error {
	if route == "root" {
		requirePrivate(b)
	} else if err := ProbeStage(); err != nil {
		b.Skipf("no user namespace for a first stage here: %v", err)
	}
	rs, err := Build(p)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	b.ResetTimer()
	if route == "root" {
		return Retired(func() error {
			if err := rs.Restrict(); err != nil {
				return err
			}
			return cmd.Run()
		})
	}
	f, err := rs.File()
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := Wrap(cmd, f, rs.PrivatePlan())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := cmd.Start(); err != nil {
		return err
	}
	serr := st.Started()
	if werr := cmd.Wait(); serr == nil {
		serr = werr
	}
	return serr
}

// TestShimRefusesForgedShells: this program's binary started through a
// shell's path where ShimDir is not the run's read-only mount (a
// directory anyone may make in a /tmp, holding a "real shell" of their
// own) executes nothing and does not run as the program: it exits 126
// and says why, whatever its environment.
func TestShimRefusesForgedShells(t *testing.T) {
	defer goleak.VerifyNone(t)
	requirePrivate(t)
	real, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{nil, {}} {
		var out []byte
		var code int
		err := Retired(func() error {
			// A mount namespace of this thread's own, nothing of it
			// reaching the host: a tmpfs on /tmp holding a forged
			// ShimDir, and this binary bound over the shell.
			if err := ownMountNS(); err != nil {
				return err
			}
			exe, err := readOnlyClone(unix.AT_FDCWD, mustReadlink(t, "/proc/self/exe"), unix.AT_SYMLINK_NOFOLLOW)
			if err != nil {
				return err
			}
			defer unix.Close(exe)
			if err := unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777"); err != nil {
				return err
			}
			forged := ShimDir + real
			if err := os.MkdirAll(filepath.Dir(forged), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(forged, []byte("#!/usr/bin/perl\nprint \"forged shell ran\\n\";\n"), 0o755); err != nil {
				return err
			}
			if err := unix.MoveMount(exe, "", unix.AT_FDCWD, real, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return err
			}
			cmd := exec.Command("/bin/sh", "-c", "echo shell ran")
			cmd.Env = env
			out, err = cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); ok {
				code, err = ee.ExitCode(), nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if code != 126 || !strings.Contains(string(out), "is not the run's read-only mount of the real shells") || strings.Contains(string(out), "ran") || strings.Contains(string(out), "PASS") {
			t.Errorf("env %q: /bin/sh exited %d: %q; want 126, the refusal, and neither the forged shell nor this program run", env, code, out)
		}
	}
}

// deletedBinaryVar marks the copy of this test binary that
// TestShimDeletedBinary runs and removes.
const deletedBinaryVar = "CLINVOKE_TEST_SHIM_DELETED"

// TestShimDeletedBinary: a program whose binary is removed or replaced on
// disk while a run goes on (an upgrade) still nests its CLI's commands.
// The kernel then names the binary bound over a shell "/usr/bin/bash
// (deleted)"; the shim recognises it all the same and executes the real
// shell, rather than run the program's own main in the CLI's domain with
// the command for arguments. A copy of this test binary is the program:
// it removes itself once the run's binds are made, before its fake CLI
// starts its shell.
func TestShimDeletedBinary(t *testing.T) {
	defer goleak.VerifyNone(t)
	requirePrivate(t)
	if os.Getenv(deletedBinaryVar) == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(t.TempDir(), "sandbox.test")
		if err := os.WriteFile(cp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cp, "-test.run=^TestShimDeletedBinary$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), deletedBinaryVar+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestShimDeletedBinary ") {
			if len(out) > 4096 {
				out = out[:4096]
			}
			t.Fatalf("the removed program: %v\n%s", err, out)
		}
		if _, err := os.Stat(cp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the program's binary was not removed: %v", err)
		}
		return
	}
	r, rs := privateWorkspace(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The fake CLI (xargs, no shell) waits for its command on standard
	// input, which comes once the binary is removed.
	cmd := exec.Command("timeout", "60", "xargs", "-0", "-r", "/bin/bash", "-c")
	cmd.Dir = r.work
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = Retired(func() error {
		if err := rs.Restrict(); err != nil {
			return err
		}
		return cmd.Start()
	})
	if err != nil {
		t.Fatal(err)
	}
	rmErr := os.Remove(exe)
	in.Write([]byte(shellScript(r.work) + "\x00"))
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the fake CLI: %v: %s", err, out.String())
	}
	if rmErr != nil {
		t.Fatalf("removing the program's binary: %v", rmErr)
	}
	checkShell(t, "a removed binary", out.String())
}

// privateWorkspace returns a rig and the ruleset of its WorkspaceWrite
// policy with private roots, closed at t's end.
func privateWorkspace(t *testing.T) (rig, *Ruleset) {
	t.Helper()
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	rs, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return r, rs
}

func mustReadlink(t *testing.T, path string) string {
	t.Helper()
	s, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShimFailureKeepsPrivateRoots: shells that cannot be bound (this
// program's binary replaced on disk since it started, say) cost the
// nesting of the CLI's commands only: the run keeps its private roots,
// Unheld says why, and the command runs in the real shell, unnested.
func TestShimFailureKeepsPrivateRoots(t *testing.T) {
	defer goleak.VerifyNone(t)
	requirePrivate(t)
	shimFault = func() error { return errors.New("the file at its path is another one now") }
	t.Cleanup(func() { shimFault = nil })
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	rs, out := onRootsRoute(t, p, exec.Command("timeout", "60", "/bin/bash", "-c", `readlink /proc/$$/exe; if (exec 3</proc/$PPID/mem) 2>/dev/null; then echo "mem yes"; fi; echo x > /tmp/f && echo "private tmp"`))
	if u := rs.Unheld(); len(u) != 1 || !strings.Contains(u[0], "the shells are not bound") || !strings.Contains(u[0], "another one now") {
		t.Errorf("Unheld() = %q, want why the shells are not bound", u)
	}
	bash, err := filepath.EvalSymlinks("/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	if want := bash + "\nmem yes\nprivate tmp\n"; !strings.HasSuffix(out, want) {
		t.Errorf("the command printed %q, want %q: the real shell, unnested, in the private /tmp", out, want)
	}
}

// depthScript is a shell script that runs itself through /bin/sh to the
// depth of its first argument and, at depths 1 and 5, tries to open the
// memory of the CLI (its second argument, or the parent of depth 1).
const depthScript = `d=$1; cli=${3:-$PPID}
case $d in 1|5) if (exec 3</proc/$cli/mem) 2>/dev/null; then echo "mem $d yes"; else echo "mem $d no"; fi;; esac
if [ "$d" -lt "$2" ]; then /bin/sh "$0" $((d+1)) "$2" "$cli" || { echo "depth $d: child failed with $?"; exit 1; }; else echo "depth $d"; fi
`

// TestShimDepth: a chain of 30 shells, each started by the one above it,
// runs in a sandbox (Landlock allows 16 layers: a shell beneath a shell
// of a command's domain adds none), on root's route and by the first
// stage, and a command at depth 1 and at depth 5 still cannot open its
// CLI's memory, whether the CLI runs shells itself or was started through
// a shell (a wrapper script) and runs them from a program of its own.
func TestShimDepth(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	script := filepath.Join(r.work, "depth.sh")
	if err := os.WriteFile(script, []byte(depthScript), 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{"mem 1 no", "mem 5 no", "depth 30"}
	clis := map[string]func() *exec.Cmd{
		"direct": func() *exec.Cmd { return exec.Command("timeout", "60", "/bin/sh", script, "1", "30") },
		"wrapper": func() *exec.Cmd {
			return exec.Command("/bin/sh", "-c", "timeout 60 /bin/sh "+script+" 1 30; exit $?")
		},
	}
	for name, cli := range clis {
		check := func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if !slices.Equal(lines, want) {
				t.Errorf("%s CLI: the chain printed %q, want %q", name, out, want)
			}
		}
		t.Run(name+"/root", func(t *testing.T) {
			cmd := cli()
			cmd.Dir = r.work
			_, out := onRootsRoute(t, p, cmd)
			check(t, out)
		})
		t.Run(name+"/stage", func(t *testing.T) {
			requireStage(t)
			cmd := cli()
			cmd.Dir = r.work
			serr, werr, out := stageRun(t, p, cmd, nil)
			if serr != nil || werr != nil {
				t.Fatalf("sandboxed CLI by the first stage: Started() = %v, Wait() = %v: %s", serr, werr, out)
			}
			check(t, out)
		})
	}
}

// TestShimNestFlags: a command's nested domain scopes what the run's own
// ruleset scopes and is restricted with the same flags, at every Landlock
// ABI (the shim writes its own on syscall alone).
func TestShimNestFlags(t *testing.T) {
	for abi := 1; abi <= 8; abi++ {
		r := rightsFor(abi)
		scoped, restrict := shellshim.NestFlags(abi)
		if scoped != r.scope || restrict != r.restrict {
			t.Errorf("ABI %d: the shim nests with scope %#x, flags %#x; the run's ruleset has %#x, %#x", abi, scoped, restrict, r.scope, r.restrict)
		}
	}
}

// TestShimLayerLimit: where the CLI already runs under 16 Landlock layers
// (the program's own and the run's), a shell it starts cannot have a
// domain of its own: it exits 126 and says why, and the command does not
// run in the CLI's domain instead.
func TestShimLayerLimit(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	requirePrivate(t)
	r, rs := privateWorkspace(t)
	cmd := exec.Command("/bin/sh", "-c", "echo ran")
	cmd.Dir = r.work
	var out []byte
	err := Retired(func() error {
		if err := rs.Restrict(); err != nil {
			return err
		}
		for range 15 {
			if err := shellshim.Nest(); err != nil {
				return err
			}
		}
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 126 {
		t.Fatalf("a shell under 16 layers: %v, want exit status 126: %s", err, out)
	}
	if !strings.Contains(string(out), "17th layer") || strings.Contains(string(out), "ran") {
		t.Errorf("a shell under 16 layers printed %q, want why it did not run, and no command's output", out)
	}
}

// TestShimInitFirst: in a binary that links this package, the shell
// shim's initialiser (internal/shellshim) runs right after os's, before
// those of unicode and of the heavy packages this package imports and a
// program links (crypto/…, encoding/json, golang.org/x/sys/unix) and
// before this package's own: a shell's start never pays for them. The order is Go's, printed by
// GODEBUG=inittrace=1 for this test binary.
func TestShimInitFirst(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	at := map[string]int{}
	for i, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			at[f[1]] = i + 1
		}
	}
	shim := at["github.com/clinvoke/clinvoke/internal/shellshim"]
	if shim == 0 {
		t.Fatalf("no initialiser of internal/shellshim in the trace: %s", out)
	}
	if at["os"] == 0 || at["os"]+1 != shim {
		t.Errorf("internal/shellshim initialised at line %d of the trace, os at %d: want it right after", shim, at["os"])
	}
	for _, pkg := range []string{"unicode", "crypto/sha256", "encoding/json", "golang.org/x/sys/unix", "reflect", "github.com/clinvoke/clinvoke/internal/sandbox"} {
		if at[pkg] == 0 || at[pkg] < shim {
			t.Errorf("%s initialised at line %d of the trace, internal/shellshim at %d: want it after", pkg, at[pkg], shim)
		}
	}
}

// TestShimOtherPaths: the shells at the other paths a host may have them
// are bound too, a bash in /usr/local/bin and a busybox whose applets run
// through its links: a thread's mount namespace of its own (nothing of it
// reaching the host) puts a copy of bash and a multi-call binary (built
// from testdata/multicall) on a tmpfs over /usr/local/bin, with a link
// readmem to the latter. A command the fake CLI runs through
// /usr/local/bin/bash, and the applet it starts with no shell, are in a
// domain nested in the CLI's, and the applet ran by its name, on root's
// route and by the first stage (a user's).
func TestShimOtherPaths(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	requirePrivate(t)
	multicall := filepath.Join(t.TempDir(), "multicall")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", multicall, "./testdata/multicall").CombinedOutput(); err != nil {
		t.Fatalf("build the multi-call binary: %v: %s", err, out)
	}
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	for _, c := range []struct {
		name  string
		cmd   []string
		check func(t *testing.T, out string)
	}{
		{"usr-local-bash", []string{"timeout", "60", "/usr/local/bin/bash", "-c", shellScript(r.work)}, func(t *testing.T, out string) {
			checkShell(t, "/usr/local/bin/bash", out)
		}},
		{"busybox-applet", []string{"timeout", "60", "/usr/local/bin/readmem"}, func(t *testing.T, out string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, w := range []string{"applet mem no", "applet environ no", "applet argv0 /usr/local/bin/readmem"} {
				if !slices.Contains(lines, w) {
					t.Errorf("the applet printed %q, want a line %q", out, w)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(c.cmd[0], c.cmd[1:]...)
			cmd.Dir = r.work
			_, out := onRootsRouteAfter(t, p, func() error { return localShells(multicall) }, cmd)
			c.check(t, out)
		})
		t.Run(c.name+"-stage", func(t *testing.T) {
			requireStage(t)
			rs, ruleset := built(t, p)
			var out strings.Builder
			err := Retired(func() error {
				if err := localShells(multicall); err != nil {
					return err
				}
				cmd := exec.Command(c.cmd[0], c.cmd[1:]...)
				cmd.Dir, cmd.Stdout, cmd.Stderr = r.work, &out, &out
				s, err := Wrap(cmd, ruleset, rs.PrivatePlan())
				if err != nil {
					return err
				}
				defer s.Close()
				if err := cmd.Start(); err != nil {
					return err
				}
				serr := s.Started()
				if serr != nil {
					cmd.Process.Kill()
				}
				werr := cmd.Wait()
				return errors.Join(serr, werr)
			})
			if err != nil {
				t.Fatalf("sandboxed CLI by the first stage: %v: %s", err, out.String())
			}
			c.check(t, out.String())
		})
	}
}

// ownMountNS gives the calling thread, locked and retired (Retired), a
// mount namespace of its own whose mounts reach nothing of the host's.
func ownMountNS() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return err
	}
	return unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, "")
}

// localShells puts, in a mount namespace of the calling thread's own, a
// tmpfs on /usr/local/bin holding a copy of /bin/bash, a copy of
// multicall as busybox and a link readmem to it.
func localShells(multicall string) error {
	if err := ownMountNS(); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/usr/local/bin", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	for dst, src := range map[string]string{"/usr/local/bin/bash": "/bin/bash", "/usr/local/bin/busybox": multicall} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			return err
		}
	}
	return os.Symlink("busybox", "/usr/local/bin/readmem")
}

// BenchmarkShellPaths measures the look-up of the host's shells that
// every run with private roots makes, with today's paths (shellshim.Dirs
// and Names) against the four names in /bin and /usr/bin alone, in
// alternating rounds: where the other shells do not exist, what their
// paths add is a failed look-up each.
func BenchmarkShellPaths(b *testing.B) {
	for _, c := range []struct {
		name        string
		dirs, names []string
	}{
		{"two-dirs-four-names", []string{"/bin", "/usr/bin"}, []string{"sh", "bash", "dash", "zsh"}},
		{"now", shellshim.Dirs(), shellshim.Names()},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				n = len(shellPathsIn(c.dirs, c.names))
			}
			b.ReportMetric(float64(n), "shells")
		})
	}
}

// shellPathsResolving is the look-up shellPathsIn replaced, path by path
// (lstat, filepath.EvalSymlinks, stat): the reference its answers are
// checked against.
func shellPathsResolving(dirs, names []string) []string {
	var out []string
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil || !shellshim.IsShell(real) || slices.Contains(out, real) {
				continue
			}
			if fi, err := os.Stat(real); err == nil && fi.Mode().IsRegular() {
				out = append(out, real)
			}
		}
	}
	return out
}

// TestShellPathsAsResolved checks that shellPathsIn finds the shells that
// resolving each path finds, in the same order: on the host, with its
// directories in other orders and a directory that does not exist, and
// (where this process may make a mount namespace) with a /usr/local/bin
// holding shells, links to them (absolute, relative, through another
// link), a dangling link, a link to a directory and a directory at a
// shell's name, then with /usr/bin bound over /usr/local/bin (the same
// directory, at a path of its own whose shells are bound apart).
func TestShellPathsAsResolved(t *testing.T) {
	cases := []struct {
		name        string
		dirs, names []string
	}{
		{"now", shellshim.Dirs(), shellshim.Names()},
		{"usr-first", []string{"/usr/bin", "/bin", "/usr/local/bin"}, shellshim.Names()},
		{"missing-dir", []string{"/nonexistent-shells", "/bin", "/usr/bin", "/usr/local/bin"}, shellshim.Names()},
		{"names-twice", shellshim.Dirs(), append(shellshim.Names(), shellshim.Names()...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g, w := shellPathsIn(c.dirs, c.names), shellPathsResolving(c.dirs, c.names); !slices.Equal(g, w) {
				t.Errorf("shellPathsIn(%q, %q) = %q, want %q", c.dirs, c.names, g, w)
			}
		})
	}
	t.Run("local", func(t *testing.T) {
		requirePrivate(t)
		var got, want [][]string
		var bound, boundWant []string
		err := Retired(func() error {
			// A copy of bash stands in for busybox: a shell is known
			// by its path.
			if err := localShells("/bin/bash"); err != nil {
				return err
			}
			for link, target := range map[string]string{
				"/usr/local/bin/ksh":   "/usr/local/bin/busybox",
				"/usr/local/bin/zsh":   "readmem",
				"/usr/local/bin/mksh":  "/usr/local/bin/gone",
				"/usr/local/bin/ksh93": "/usr/local",
				"/usr/local/bin/sh":    "bash",
			} {
				if err := os.Symlink(target, link); err != nil {
					return err
				}
			}
			if err := os.Mkdir("/usr/local/bin/ash", 0o755); err != nil {
				return err
			}
			for _, c := range cases {
				got = append(got, shellPathsIn(c.dirs, c.names))
				want = append(want, shellPathsResolving(c.dirs, c.names))
			}
			// /usr/bin bound over /usr/local/bin: the same directory
			// at another mount, whose shells are bound apart.
			if err := unix.Mount("/usr/bin", "/usr/local/bin", "", unix.MS_BIND, ""); err != nil {
				return err
			}
			bound = shellPathsIn(shellshim.Dirs(), shellshim.Names())
			boundWant = shellPathsResolving(shellshim.Dirs(), shellshim.Names())
			return nil
		})
		if err != nil {
			t.Fatalf("a /usr/local/bin of shells: %v", err)
		}
		for i, c := range cases {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: shellPathsIn(%q, %q) = %q, want %q", c.name, c.dirs, c.names, got[i], want[i])
			}
			if !slices.Contains(got[i], "/usr/local/bin/busybox") || !slices.Contains(got[i], "/usr/local/bin/bash") {
				t.Errorf("%s: shellPathsIn(%q, %q) = %q, want /usr/local/bin's bash and busybox among them", c.name, c.dirs, c.names, got[i])
			}
		}
		if !slices.Equal(bound, boundWant) || !slices.Contains(bound, "/usr/local/bin/bash") {
			t.Errorf("with /usr/bin bound over /usr/local/bin: shellPaths() = %q, want %q, /usr/local/bin/bash among them", bound, boundWant)
		}
	})
}
