package agentflow

import (
	"fmt"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// DefaultSandbox is the sandbox mode of the example's workers unless told
// otherwise: the kernel holds what each turn may touch where the host can
// (Codex, whose own sandbox cannot nest, with its own off where the network
// part holds too, else without), and a turn runs without it where the host
// cannot.
const DefaultSandbox = "available"

// SandboxOf returns the sandbox a worker's runs start under, from the
// worker's -sandbox and -network flags (the library's docs/sandbox.md):
// mode is "available", "required" (a turn fails where the host cannot hold
// it, and a Codex turn below Unlimited where the network part does not)
// or "off"; network is ""
// (no network rules: the turns reach what the host reaches), "none" (only
// the CLI's model endpoint and its MCP servers) or a comma-separated list
// of the hosts the turns may reach besides them ("host", "host:port",
// "*.domain"), which the Invoker checks at each turn. The network rules
// hold only in the sandbox: with mode "off" they are an error.
func SandboxOf(mode, network string) (invoker.Sandbox, error) {
	switch mode {
	case "available", "required", "off":
	default:
		return invoker.Sandbox{}, fmt.Errorf("sandbox %q: use available, required or off", mode)
	}
	var rules []string
	for _, r := range strings.Split(network, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rules = append(rules, r)
		}
	}
	if rules != nil && mode == "off" {
		return invoker.Sandbox{}, fmt.Errorf("network %q with sandbox off: the network rules hold only in the sandbox; use sandbox available or required", network)
	}
	return invoker.Sandbox{Mode: mode, Network: rules}, nil
}
