package egress

import (
	"os/exec"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
)

// TestSandboxNetStageOnlyEnv: the first stage under network rules starts
// its runtime with the host's GOMAXPROCS=1 (where the command sets none)
// and executes the run's program with the environment the host gave it,
// without that variable nor sandbox.StageOnlyVar.
func TestSandboxNetStageOnlyEnv(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireWrapLandlock(t)
	cmd := exec.Command("/usr/bin/env")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	serr, werr, out := wrapRun(t, sandbox.Policy{}, cmd, func(cmd *exec.Cmd) {
		if !slices.Contains(cmd.Env, "GOMAXPROCS=1") {
			t.Errorf("the stage's environment %q sets no GOMAXPROCS=1", cmd.Env)
		}
	})
	stagetest.CheckEnv(t, serr, werr, out, []string{"PATH=/usr/bin:/bin"})
}
