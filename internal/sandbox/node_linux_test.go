//go:build linux

package sandbox

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/inspector"
	"go.uber.org/goleak"
)

// inspectorCLI is a fake node CLI: it holds a secret and runs its
// argument through /bin/bash -c.
const inspectorCLI = `globalThis.SECRET = 'Bearer tok-' + 'abc123XYZ';
const c = require('child_process').spawn('/bin/bash', ['-c', process.argv[2]], { stdio: ['ignore', 'inherit', 'inherit'] });
c.on('exit', (code) => { console.log('cli: command exit', code); process.exit(0); });
`

// TestSandboxNodeInspector: a command the fake node CLI runs signals the
// CLI with SIGUSR1 and looks for node's inspector (inspector.Attack).
// Under the sandbox (the command in the domain nested in the CLI's) the
// signal itself is refused where Landlock scopes signals (ABI 6), on root's
// route and by the first stage, with NodeOptions in the CLI's NODE_OPTIONS
// or without; where it is not, the option keeps the inspector closed. The
// option alone is shown without a sandbox, where the signal reaches the
// CLI: with it the inspector stays closed; without (the control) the
// command evaluates code in the CLI and reads its secret.
func TestSandboxNodeInspector(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node, which the test's fake CLI is: %v", err)
	}
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	cli, attack := filepath.Join(r.work, "cli.js"), filepath.Join(r.work, "attack.js")
	for f, s := range map[string]string{cli: inspectorCLI, attack: inspector.Attack} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The inspector's port is one this test alone uses (node's default,
	// 9229, may be another test's, run at once), and the attack counts
	// only the inspector of the node it signalled.
	port := inspectorPort(t)
	fakeCLI := func(opts string) *exec.Cmd {
		cmd := exec.Command("timeout", "60", node, "--inspect-port="+port, cli, node+" "+attack+" "+port)
		cmd.Dir = r.work
		cmd.Env = os.Environ()
		if opts != "" {
			cmd.Env = append(cmd.Env, "NODE_OPTIONS="+opts)
		}
		return cmd
	}
	closed := "attack: inspector closed ECONNREFUSED"
	sandboxed := closed
	if abi, _ := Probe(); abi >= 6 {
		sandboxed = "attack: signal refused EPERM"
	}
	held := func(t *testing.T, out, want string) {
		t.Helper()
		if !strings.Contains(out, want) || strings.Contains(out, "tok-abc123XYZ") || !strings.Contains(out, "cli: command exit 0") {
			t.Errorf("the command reached the CLI's inspector, or did not run; want %q:\n%s", want, out)
		}
	}
	unsandboxed := func(t *testing.T, opts string) string {
		t.Helper()
		out, err := fakeCLI(opts).CombinedOutput()
		if err != nil {
			t.Fatalf("the fake CLI without a sandbox: %v: %s", err, out)
		}
		return string(out)
	}
	t.Run("control", func(t *testing.T) {
		if out := unsandboxed(t, ""); !strings.Contains(out, "tok-abc123XYZ") {
			t.Errorf("without a sandbox and the option, want the command to read the CLI's secret through the inspector:\n%s", out)
		}
	})
	t.Run("option", func(t *testing.T) {
		held(t, unsandboxed(t, NodeOptions("")), closed)
	})
	t.Run("other-inspector", func(t *testing.T) {
		// Another node's inspector on the port (the control's of a test
		// run at once, had they shared one) is not the CLI's: the attack
		// reaches it and reads nothing.
		stop := otherInspector(t, node, port)
		out := unsandboxed(t, NodeOptions(""))
		pid := stop()
		held(t, out, "attack: another node's inspector, pid "+pid)
		if !strings.Contains(out, "attack: inspector closed EOTHER") {
			t.Errorf("want the attack to find no inspector of its own:\n%s", out)
		}
	})
	t.Run("root", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI(NodeOptions("")))
		held(t, out, sandboxed)
	})
	t.Run("root-without-option", func(t *testing.T) {
		if sandboxed == closed {
			t.Skip("Landlock scopes no signals before ABI 6: the option alone holds the inspector here")
		}
		_, out := onRootsRoute(t, p, fakeCLI(""))
		held(t, out, sandboxed)
	})
	t.Run("stage", func(t *testing.T) {
		requireStage(t)
		serr, werr, out := stageRun(t, p, fakeCLI(NodeOptions("--max-old-space-size=512")), nil)
		if serr != nil || werr != nil {
			t.Fatalf("sandboxed CLI by the first stage: Started() = %v, Wait() = %v: %s", serr, werr, out)
		}
		held(t, out, sandboxed)
	})
}

// inspectorPort returns a port of 127.0.0.1 that nothing listened on a
// moment ago, for a node inspector of this test's own.
func inspectorPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// otherInspector starts a node that holds the fake CLI's secret with its
// inspector open on port, and returns once it listens; stop ends it and
// returns its process ID.
func otherInspector(t *testing.T, node, port string) (stop func() string) {
	t.Helper()
	cmd := exec.Command(node, "--inspect=127.0.0.1:"+port, "-e", "globalThis.SECRET = 'Bearer tok-' + 'abc123XYZ'; setInterval(() => {}, 1000)")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() string {
		cmd.Process.Kill()
		cmd.Wait()
		return strconv.Itoa(cmd.Process.Pid)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Debugger listening on ") {
			return stop
		}
	}
	stop()
	t.Fatalf("node with its inspector on 127.0.0.1:%s did not say it listens", port)
	return nil
}
