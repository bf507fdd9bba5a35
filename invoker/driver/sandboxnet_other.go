//go:build !linux

package driver

import (
	"errors"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// wrapAttr fails: only Linux has network namespaces (netProbe never
// chooses Wrap elsewhere).
func (rn *runNet) wrapAttr(*proc.Attr, *sandbox.Ruleset) error {
	return errors.ErrUnsupported
}
