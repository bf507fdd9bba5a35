package sandbox

import (
	"os"
	"strings"
)

// A first stage is this program's binary started again: its Go runtime
// starts, the program's package initialisers run up to this package's
// (or internal/egress's), and the stage executes the run's program. The
// stage uses one processor, on the locked main thread; a runtime started
// with a processor per CPU makes threads for the idle ones while it
// starts, and ends them all at the execution. So a stage's runtime starts
// with GOMAXPROCS=1 where the command's environment sets no GOMAXPROCS
// (about 1 ms less CPU a start, measured on 2 CPUs); the variable is the
// stage's alone: StageOnlyVar names it, and the stage removes both before
// it executes the run's program, which gets the environment the host gave
// it. A caller's own GOMAXPROCS is left as it is, for the stage and the
// run alike.

// stageProcs is the variable a first stage's runtime starts with, and its
// value.
const stageProcs, stageProcsValue = "GOMAXPROCS", "1"

// stageOnlyEnv returns env, a first stage's environment without its spec
// nor any stage variable, with GOMAXPROCS=1 and StageOnlyVar naming it
// where env sets no GOMAXPROCS.
func stageOnlyEnv(env []string) []string {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == stageProcs {
			return env
		}
	}
	return append(env, stageProcs+"="+stageProcsValue, StageOnlyVar+"="+stageProcs)
}

// unsetStageOnly removes from a first stage's environment the variables
// the host set for the stage alone (StageOnlyVar names them) and
// StageOnlyVar, before the stage executes the run's program.
func unsetStageOnly() {
	v, ok := os.LookupEnv(StageOnlyVar)
	if !ok {
		return
	}
	for _, k := range strings.Split(v, ",") {
		os.Unsetenv(k)
	}
	os.Unsetenv(StageOnlyVar)
}
