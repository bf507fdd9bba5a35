package acp

import (
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// nester is the backend of an Agent with SandboxOff: its own sandbox
// cannot work inside the kernel's, which holds it instead where the host
// holds the network part too (driver.SandboxNester).
type nester struct{ backend }

var _ driver.SandboxNester = (*nester)(nil)

// SandboxRefused says why the agent cannot work inside the filesystem
// sandbox with its own sandbox on.
func (n *nester) SandboxRefused() string {
	return "its own sandbox cannot work inside it (Agent.SandboxOff is set), and keeps its commands off the network (docs/acp-agents.md)"
}

// ownSandboxOff reports whether a session whose request carries sb runs
// with the agent's own sandbox off: only an Agent with SandboxOff does,
// where the engine says the kernel holds the run's filesystem and
// network (driver.OwnSandboxOff).
func (b *backend) ownSandboxOff(sb invoker.Sandbox) bool {
	return len(b.a.SandboxOff) > 0 && driver.OwnSandboxOff(sb)
}
