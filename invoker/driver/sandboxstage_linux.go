package driver

import (
	"os/exec"
	"slices"
	"syscall"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// stageAttr makes attr start the run by sandbox.Wrap: the CLI born in new
// user and mount namespaces as this program's binary, whose first stage
// makes the private /tmp and /dev/shm of rules' plan, applies rules and
// executes the CLI; the host's network stays the run's. The forking
// thread is not restricted then: the new namespace's id maps are written
// from it, which a restricted thread may not.
func (rs *runSandbox) stageAttr(attr *proc.Attr, plan []byte) error {
	f, err := rs.rules.File()
	if err != nil {
		return err
	}
	cmd := stageCmd(attr)
	st, err := sandbox.Wrap(cmd, f, plan)
	if err != nil {
		f.Close()
		return err
	}
	rs.stage, rs.stageRuleset = st, f
	attr.Restrict = nil
	fromCmd(attr, cmd)
	return nil
}

// stageCmd returns the command a first stage prepares for attr, in its
// working directory: its files follow attr's own ExtraFiles, which keep
// their numbers.
func stageCmd(attr *proc.Attr) *exec.Cmd {
	return &exec.Cmd{Path: attr.Path, Dir: attr.Dir, Env: attr.Env, ExtraFiles: slices.Clip(attr.ExtraFiles), SysProcAttr: &syscall.SysProcAttr{}}
}

// fromCmd gives attr what a first stage's Wrap prepared in cmd: the
// program's own binary, the stage's environment and files, and the new
// namespaces with their id maps and the capabilities the stage keeps.
func fromCmd(attr *proc.Attr, cmd *exec.Cmd) {
	attr.Path, attr.Env = cmd.Path, cmd.Env
	attr.ExtraFiles = cmd.ExtraFiles
	w := cmd.SysProcAttr
	attr.SysAttr = func(s *syscall.SysProcAttr) {
		s.Cloneflags |= w.Cloneflags
		s.UidMappings, s.GidMappings, s.GidMappingsEnableSetgroups = w.UidMappings, w.GidMappings, w.GidMappingsEnableSetgroups
		s.AmbientCaps = append(s.AmbientCaps, w.AmbientCaps...)
	}
}

// stageProbe says once whether a user's run may get its private /tmp
// and /dev/shm by a first stage in a user namespace of its own (nil), or
// why not.
var stageProbe = sandbox.ProbeStage
