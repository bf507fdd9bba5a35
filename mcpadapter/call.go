package mcpadapter

import (
	"context"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

// A Call is a tool call of a client: in progress, as [Tools.Calls] lists
// it, or the one a run serves, as Options.Approve sees it (which tool,
// which task, which client, and the run's request). The adapter makes one
// for each run (each task of a parallel call, each turn of a warm
// session); a policy reads it and may call [Call.Defer].
type Call struct {
	// Tool is the name of the tool called: an invoker's name ("codex"),
	// or that name with ParallelSuffix.
	Tool string

	// Identity is who made the call (see [HTTPAccess]): the name of its
	// bearer token, or the subject of its OAuth access token; "" for a
	// call without authentication (stdio, or HTTP without it).
	Identity string

	// Session is the MCP session id of the call's client; "" over stdio
	// and in stateless HTTP.
	Session string

	// Start is when the call began.
	Start time.Time

	// Task is the index of the run's task among a parallel call's tasks,
	// or -1 for a call of the single-run tool and for a call as
	// Tools.Calls lists it.
	Task int

	// Request is the client's request. Its Session is the client's
	// session (Session.InitializeParams says which client it is); over
	// streamable HTTP, its Extra holds the HTTP request's headers and,
	// behind a middleware that authenticates clients, the client's
	// verified token (TokenInfo).
	Request *mcp.CallToolRequest

	// Run is the run's request as the adapter made it from the call's
	// arguments: the Workdir (absolute, symbolic links resolved, under
	// Options.Roots), the Permission (the call's, or
	// Options.DefaultPermission), the Prompt, Model, SessionID and the
	// rest. Its callbacks (OnEvent, Approve) and MCPServers are not set;
	// it is a copy, which the policy may keep. It is zero in a Call that
	// Tools.Calls lists: a call may have several runs.
	Run invoker.Request

	ap *approver // what Defer asks; nil in a Call the adapter did not make
}

// Defer answers a as Options.Approvals says, as the server answers when
// Options.Approve is nil: ApprovalsAllow allows it, ApprovalsDeny denies
// it, and ApprovalsElicit asks the call's client by elicitation, or
// applies Options.ApprovalFallback to a client that cannot be asked. ctx
// is the context Approve received: a question put to the client is
// withdrawn, and answered with a denial, when the turn ends first.
//
// On a Call the adapter did not make (a Call literal in a test of the
// policy itself), Defer denies, saying so in the Decision's message.
func (c *Call) Defer(ctx context.Context, a invoker.Approval) invoker.Decision {
	if c == nil || c.ap == nil {
		return invoker.Decision{Message: "denied: no MCP server's approval policy to defer to"}
	}
	return c.ap.builtin(ctx, a)
}

// newCall returns the Call of a run of req for the client's request creq;
// index is the task's, nil for the single-run tool.
func newCall(ctx context.Context, toolName string, index *int, creq *mcp.CallToolRequest, req invoker.Request) *Call {
	c := &Call{Tool: toolName, Identity: identityOf(creq), Task: -1, Request: creq, Run: req}
	if creq != nil && creq.Session != nil {
		c.Session = creq.Session.ID()
	}
	if start, ok := ctx.Value(callStartKey{}).(time.Time); ok {
		c.Start = start
	}
	if index != nil {
		c.Task = *index
	}
	// What the run holds by reference is copied, so that a policy that
	// keeps or changes the Call changes nothing of the run.
	c.Run.OnEvent, c.Run.Approve, c.Run.MCPServers = nil, nil, nil
	c.Run.Images = slices.Clone(req.Images)
	c.Run.OutputSchema = slices.Clone(req.OutputSchema)
	c.Run.Env = slices.Clone(req.Env)
	c.Run.ExtraArgs = slices.Clone(req.ExtraArgs)
	return c
}

// callStartKey is the context key of the time a call began, which begin
// sets for newCall.
type callStartKey struct{}
