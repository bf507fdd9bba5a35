//go:build !linux

package egress

import (
	"errors"
	"os"
	"os/exec"
)

// enterNamespace reports that only Linux has network namespaces.
func enterNamespace() error {
	return &NamespaceError{Op: "network namespace", Err: errors.ErrUnsupported, Missing: "network namespaces exist only on Linux; this system gives no network sandbox"}
}

func ipv6Loopback() bool { return false }

// NetCaps is Linux's: no other system's threads hold capabilities.
var NetCaps []int

// dropNetCaps is never called where joinNamespace fails.
func dropNetCaps() error { return nil }

// catchDirect reports that only Linux has network namespaces.
func catchDirect() (int, error) { return -1, errors.ErrUnsupported }

// recordDirect is never called where catchDirect fails.
func (n *Net) recordDirect(fd int) {}

// releaseDirect has nothing to release without recordDirect.
func (n *Net) releaseDirect() {}

// openNamespace is never called where enterNamespace fails.
func openNamespace() (*os.File, error) { return nil, enterNamespace() }

// joinNamespace is never called where openNamespace fails.
func joinNamespace(*os.File) error { return enterNamespace() }

// drain is never called without recordDirect.
func (n *Net) drain(fd uintptr) {}

// Probe reports whether this process can give a run a network namespace
// through Enter:
// nil if so, else a *NamespaceError (matching ErrUnavailable) naming what
// is missing. Only Linux can.
func Probe() error { return enterNamespace() }

// Wrap reports that only Linux has network namespaces.
func (n *Net) Wrap(cmd *exec.Cmd) error { return enterNamespace() }

// Started reports that only Linux has network namespaces.
func (n *Net) Started() error { return enterNamespace() }

// ProbeWrap reports whether Wrap can give a run a network sandbox here:
// nil if so, else a *NamespaceError (matching ErrUnavailable) naming what
// is missing. Only Linux can.
func ProbeWrap() error { return enterNamespace() }

// counters is never opened where there is no namespace.
type counters struct{}

func openCounters(string) *counters { return nil }

func (c *counters) close() {}

// countUnanswered is never called without recordDirect.
func (n *Net) countUnanswered() {}

// prepareKept has no namespace made ahead to take: it returns the work
// of Prepare's thread, which reports that only Linux has network
// namespaces.
func (n *Net) prepareKept() func() (*os.File, error) {
	return func() (*os.File, error) { return nil, enterNamespace() }
}

// refillNamespaces has nothing to make where there are no namespaces.
func refillNamespaces() {}

// running has no namespaces to make where there are none.
func (n *Net) running() {}
