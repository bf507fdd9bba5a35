package mcpadapter

import (
	"fmt"
	"slices"

	"github.com/clinvoke/clinvoke/internal/mcphost"
	"github.com/clinvoke/clinvoke/invoker"
)

// checkServers checks Options.MCPServers as every run's request would be
// checked (mcphost.CheckServers), so that a server no run could take is
// refused at Register rather than at each call.
func checkServers(servers []invoker.MCPServer) error {
	return mcphost.CheckServers("Options.MCPServers", servers)
}

// checkTakes refuses an invoker whose CLI cannot take the server's Go
// policy or its MCP servers: its runs would fail at every call, or run
// without the policy.
func (c *config) checkTakes(inv invoker.Invoker) error {
	caps := inv.Capabilities()
	if c.approve != nil && !caps.Approve {
		return fmt.Errorf("Options.Approve: the CLI of invoker %q takes no approval callback (Capabilities.Approve is false), so the policy could not decide its actions: register it in a Register call of its own, without Approve (its runs are then bounded by the permission level alone)", inv.Name())
	}
	for i, s := range c.servers {
		switch {
		case s.Server != nil && !caps.GoTools:
			return fmt.Errorf("Options.MCPServers[%d] (%q): invoker %q cannot serve tools written in Go to its CLI (Capabilities.GoTools is false): register it without this server", i, s.Name, inv.Name())
		case s.Server == nil && !caps.MCPServers:
			return fmt.Errorf("Options.MCPServers[%d] (%q): the CLI of invoker %q cannot reach MCP servers of other programs (Capabilities.MCPServers is false): register it without this server", i, s.Name, inv.Name())
		}
	}
	return nil
}

// runServers returns the MCP servers of one run: a copy of the server's,
// so that an Invoker that appends to its Request.MCPServers, or changes
// an entry, touches its run's list alone.
func (c *config) runServers() []invoker.MCPServer {
	if len(c.servers) == 0 {
		return nil
	}
	return slices.Clone(c.servers)
}
