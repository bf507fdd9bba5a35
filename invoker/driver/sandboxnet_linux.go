package driver

import (
	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// wrapAttr makes attr start the run by egress's Wrap: the CLI born in new
// user and network namespaces as this program's binary, whose first stage
// sets the namespace up, applies rules (if not nil) and executes the CLI.
// The forking thread is not restricted then: the new namespace's id maps
// are written from it, which a restricted thread may not. The first
// stage's files follow attr's own ExtraFiles, which keep their numbers.
func (rn *runNet) wrapAttr(attr *proc.Attr, rules *sandbox.Ruleset) error {
	cmd := stageCmd(attr)
	if rules != nil {
		f, err := rules.File()
		if err != nil {
			return err
		}
		rn.ruleset = f
		attr.Restrict = nil
	}
	if err := rn.n.WrapPrivate(cmd, rn.ruleset, rules.PrivatePlan()); err != nil {
		return err
	}
	fromCmd(attr, cmd)
	return nil
}
