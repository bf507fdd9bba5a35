package sandbox

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/stagetest"
)

// TestStageOnlyEnv: a first stage's Go runtime starts with GOMAXPROCS=1
// where the command's environment sets no GOMAXPROCS, and the run's
// program gets the environment the host gave it: without that variable
// nor StageOnlyVar where the host added them, with the caller's own
// GOMAXPROCS where it set one, and with every variable a caller's forged
// StageOnlyVar names.
func TestStageOnlyEnv(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireStage(t)
	work := outsideTmpDir(t)
	for _, tc := range []struct {
		name  string
		env   []string
		stage []string // the stage's own entries among GOMAXPROCS and StageOnlyVar, in order
		run   []string // the run's program's environment
	}{
		{"unset", []string{"PATH=/usr/bin:/bin"},
			[]string{"GOMAXPROCS=1", StageOnlyVar + "=GOMAXPROCS"}, []string{"PATH=/usr/bin:/bin"}},
		{"caller's", []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=3"},
			[]string{"GOMAXPROCS=3"}, []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=3"}},
		{"forged", []string{StageOnlyVar + "=PATH,HOME", "PATH=/usr/bin:/bin", "HOME=/nowhere"},
			[]string{"GOMAXPROCS=1", StageOnlyVar + "=GOMAXPROCS"}, []string{"PATH=/usr/bin:/bin", "HOME=/nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/usr/bin/env")
			cmd.Env = tc.env
			serr, werr, out := stageRun(t, Policy{Level: ReadOnly, Workdir: work, Temp: work + "/t"}, cmd, func(cmd *exec.Cmd) {
				var got []string
				for _, kv := range cmd.Env {
					if k, _, _ := strings.Cut(kv, "="); k == "GOMAXPROCS" || k == StageOnlyVar {
						got = append(got, kv)
					}
				}
				if !slices.Equal(got, tc.stage) {
					t.Errorf("the stage's environment sets %q, want %q", got, tc.stage)
				}
				if k, _, _ := strings.Cut(cmd.Env[len(cmd.Env)-1], "="); k != stageEnv {
					t.Errorf("the stage's environment ends with %q, want its spec", cmd.Env[len(cmd.Env)-1])
				}
			})
			stagetest.CheckEnv(t, serr, werr, out, tc.run)
		})
	}
}
