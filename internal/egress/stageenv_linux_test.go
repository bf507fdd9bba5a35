package egress

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/sandbox"
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
	if serr != nil || werr != nil {
		t.Fatalf("Started: %v; the command: %v\n%s", serr, werr, out)
	}
	if got, want := strings.Fields(out), []string{"PATH=/usr/bin:/bin"}; !slices.Equal(got, want) {
		t.Errorf("the run's environment = %q, want %q", got, want)
	}
}
