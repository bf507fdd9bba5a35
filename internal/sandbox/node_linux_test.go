//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestSandboxNodeInspector: a command the fake node CLI runs (in the
// domain nested in the CLI's) signals the CLI with SIGUSR1 and looks for
// node's inspector (inspector.Attack). With NodeOptions in the CLI's
// NODE_OPTIONS the inspector stays closed, on root's route and by the
// first stage; without (the control), the command evaluates code in the
// CLI and reads its secret.
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
	fakeCLI := func(opts string) *exec.Cmd {
		cmd := exec.Command("timeout", "60", node, cli, node+" "+attack)
		cmd.Dir = r.work
		cmd.Env = os.Environ()
		if opts != "" {
			cmd.Env = append(cmd.Env, "NODE_OPTIONS="+opts)
		}
		return cmd
	}
	held := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "attack: inspector closed ECONNREFUSED") || strings.Contains(out, "tok-abc123XYZ") ||
			!strings.Contains(out, "cli: command exit 0") {
			t.Errorf("the command reached the CLI's inspector, or did not run:\n%s", out)
		}
	}
	t.Run("control", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI(""))
		if !strings.Contains(out, "tok-abc123XYZ") {
			t.Errorf("without the option, want the command to read the CLI's secret through the inspector:\n%s", out)
		}
	})
	t.Run("root", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI(NodeOptions("")))
		held(t, out)
	})
	t.Run("stage", func(t *testing.T) {
		requireStage(t)
		serr, werr, out := stageRun(t, p, fakeCLI(NodeOptions("--max-old-space-size=512")), nil)
		if serr != nil || werr != nil {
			t.Fatalf("sandboxed CLI by the first stage: Started() = %v, Wait() = %v: %s", serr, werr, out)
		}
		held(t, out)
	})
}
