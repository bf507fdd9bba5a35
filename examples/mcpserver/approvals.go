package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

// checkApprovals checks -approvals and -approval-fallback, so that a bad
// value is reported in the server's own flags before Register sees it.
func checkApprovals(policy, fallback string) error {
	switch mcpadapter.ApprovalPolicy(policy) {
	case mcpadapter.ApprovalsAllow, mcpadapter.ApprovalsDeny, mcpadapter.ApprovalsElicit:
	default:
		return fmt.Errorf("-approvals %q: want allow, deny or elicit", policy)
	}
	switch mcpadapter.ApprovalPolicy(fallback) {
	case mcpadapter.ApprovalsAllow, mcpadapter.ApprovalsDeny:
	default:
		return fmt.Errorf("-approval-fallback %q: want allow or deny", fallback)
	}
	return nil
}

// logClient returns the handler of a client's notifications/initialized:
// it logs who the client is and whether it can be asked questions
// (elicitation), which decides how -approvals elicit treats its calls.
func logClient(logger *slog.Logger) func(context.Context, *mcp.InitializedRequest) {
	return func(ctx context.Context, req *mcp.InitializedRequest) {
		p := req.Session.InitializeParams()
		if p == nil {
			return
		}
		var name, version, elicitation string
		if p.ClientInfo != nil {
			name, version = p.ClientInfo.Name, p.ClientInfo.Version
		}
		switch c := p.Capabilities; {
		case c == nil || c.Elicitation == nil:
			elicitation = "none"
		case c.Elicitation.Form != nil && c.Elicitation.URL != nil:
			elicitation = "form,url"
		case c.Elicitation.URL != nil:
			elicitation = "url"
		default:
			elicitation = "form"
		}
		logger.InfoContext(ctx, "client initialized", "client", name, "client_version", version,
			"protocol", p.ProtocolVersion, "elicitation", elicitation)
	}
}
