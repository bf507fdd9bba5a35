//go:build !linux

package driver

import (
	"errors"

	"github.com/clinvoke/clinvoke/internal/proc"
)

// stageAttr fails: only Linux has user namespaces (stageProbe never
// allows the route elsewhere).
func (rs *runSandbox) stageAttr(*proc.Attr, []byte) error { return errors.ErrUnsupported }

// stageProbe fails: only Linux has user namespaces.
func stageProbe() error { return errors.ErrUnsupported }
