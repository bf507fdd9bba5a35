package mcpadapter

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

// An ApprovalPolicy says who answers the questions a nested agent asks
// before it acts (run a command, change a file, call an MCP tool):
// Options.Approvals.
type ApprovalPolicy string

// The approval policies.
const (
	// ApprovalsAllow lets the agent do whatever the call's permission
	// level permits without asking anyone: no approval callback is set,
	// and the CLI runs as it does without one (the permission level, which
	// the CLI's sandbox enforces, is the only control). It is the default.
	ApprovalsAllow ApprovalPolicy = "allow"

	// ApprovalsDeny denies every action the CLI asks permission for: the
	// agent reads, thinks and answers, and does only what its CLI does
	// without asking. The model reads the denial and the reason.
	ApprovalsDeny ApprovalPolicy = "deny"

	// ApprovalsElicit asks the MCP client: each question of the agent
	// becomes an elicitation (elicitation/create) sent to the client of the
	// call, on the call's own stream, which its user answers with allow or
	// deny (and, optionally, "for the rest of the run" or a message for
	// the model). A client that cannot be asked gets
	// Options.ApprovalFallback instead.
	ApprovalsElicit ApprovalPolicy = "elicit"
)

// Valid reports whether p is one of the policies (the empty policy is the
// default, ApprovalsAllow).
func (p ApprovalPolicy) Valid() bool {
	switch p {
	case "", ApprovalsAllow, ApprovalsDeny, ApprovalsElicit:
		return true
	}
	return false
}

// The content of the form an elicitation asks the client to fill in.
const (
	// elicitDecision is the form's required field: "allow" or "deny".
	elicitDecision = "decision"
	// elicitForSession, with "allow", allows actions of the same kind
	// for the rest of the run (Decision.ForSession).
	elicitForSession = "for_session"
	// elicitMessage, with "deny", tells the model why (Decision.Message).
	elicitMessage = "message"
)

// elicitSchema is the form of an approval question: flat, with primitive
// properties only, as the MCP specification requires of elicitation.
var elicitSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		elicitDecision: map[string]any{
			"type":        "string",
			"title":       "Decision",
			"description": "allow lets the agent do it; deny refuses it and the agent is told",
			"enum":        []string{"allow", "deny"},
		},
		elicitForSession: map[string]any{
			"type":        "boolean",
			"title":       "Allow the same for the rest of this run",
			"description": "with allow: do not ask again about actions of the same kind in this run",
			"default":     false,
		},
		elicitMessage: map[string]any{
			"type":        "string",
			"title":       "Message for the agent",
			"description": "with deny: why, or what to do instead; the agent reads it",
		},
	},
	"required": []string{elicitDecision},
}

// protocolNoServerRequests is the first MCP protocol version in which a
// server may not send requests to the client while it serves one (it
// returns input requests in the result instead, SEP-2322): go-sdk v1.8.0
// refuses ServerSession.Elicit on such a session.
const protocolNoServerRequests = "2026-07-28"

// canElicit reports whether the client of ss can be asked a question in
// the middle of a tool call: it declared form elicitation (or elicitation
// without modes, which means form), and its protocol version lets a
// server send it a request while a call is in flight.
func canElicit(ss *mcp.ServerSession) (ok bool, why string) {
	if ss == nil {
		return false, "no client session"
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false, "the client does not declare elicitation"
	}
	if e := p.Capabilities.Elicitation; e.Form == nil && e.URL != nil {
		return false, "the client declares only URL elicitation"
	}
	if p.ProtocolVersion >= protocolNoServerRequests {
		return false, "the client's protocol version " + p.ProtocolVersion + " takes no request from the server during a call"
	}
	return true, ""
}

// An approver answers the questions of one run (a call, or a task of a
// parallel call): Options.Approve first, when it is set, and the policy of
// Options.Approvals for the questions it defers (or all of them).
type approver struct {
	t      *tool
	c      *Call          // the call the run serves, for Options.Approve
	policy ApprovalPolicy // the policy of Options.Approvals that applies to this run
	why    string         // why a run under ApprovalsElicit falls back, for the log
	ss     *mcp.ServerSession
	// call is the call's context: its values route an elicitation onto
	// the call's own stream (streamable HTTP), and its end ends the
	// elicitation.
	call   context.Context
	rep    *reporter
	prefix string // "[3] " for a task of a parallel call
}

// approverFor returns the approver of a run of the call c whose context is
// ctx, or nil when the run is to go without an Approve callback: no
// Options.Approve, and Options.Approvals is ApprovalsAllow (or falls back
// to it); or the CLI cannot take a callback (Register refuses such a CLI
// when Options.Approve is set).
func (t *tool) approverFor(ctx context.Context, c *Call, rep *reporter, prefix string) *approver {
	if !t.inv.Capabilities().Approve {
		return nil
	}
	a := &approver{t: t, c: c, policy: t.cfg.approvals, ss: sessionOf(c.Request), call: ctx, rep: rep, prefix: prefix}
	if a.policy == ApprovalsElicit {
		// A task of the 2026-07-28 extension asks through tasks/get and
		// tasks/update, which need no request from the server.
		if ok, why := canElicit(a.ss); !ok && !extensionTask(ctx) {
			a.policy, a.why = t.cfg.approvalFallback, why
		}
	}
	if a.policy == ApprovalsAllow && t.cfg.approve == nil {
		return nil
	}
	c.ap = a
	return a
}

// approve is the run's Approve callback. ctx is the turn's context.
func (a *approver) approve(ctx context.Context, ap invoker.Approval) invoker.Decision {
	if a.t.cfg.approve == nil {
		return a.builtin(ctx, ap)
	}
	d := a.t.cfg.approve(ctx, a.c, ap)
	a.log(ctx, ap, d, "Options.Approve", "")
	return d
}

// builtin answers ap as the policy of Options.Approvals says: the whole
// answer without Options.Approve, and Call.Defer's with it.
func (a *approver) builtin(ctx context.Context, ap invoker.Approval) invoker.Decision {
	what := describeApproval(a.t.name, ap)
	switch a.policy {
	case ApprovalsAllow:
		d := invoker.Decision{Allow: true}
		a.log(ctx, ap, d, "policy", a.why)
		return d
	case ApprovalsElicit:
	default:
		d := invoker.Decision{Message: "denied by the MCP server's approval policy: " + what}
		a.log(ctx, ap, d, "policy", a.why)
		return d
	}
	a.rep.post(a.prefix + "waiting for approval: " + snippet(what, maxSnippet, false))
	// The elicitation goes out under the call's context (which carries the
	// call's request id, so that streamable HTTP sends it on the call's
	// stream) and ends with the turn's, whichever ends first.
	ectx, cancel := context.WithCancelCause(a.call)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	elicit := a.ss.Elicit
	if task := taskOf(a.call); task != nil {
		elicit = task.elicit // the task's input_required, asked on a tasks/result or tasks/get
	}
	res, err := elicit(ectx, &mcp.ElicitParams{
		Message:         "The " + a.t.name + " agent asks: " + what + ". Allow it?",
		RequestedSchema: elicitSchema,
	})
	var d invoker.Decision
	switch {
	case err != nil && ectx.Err() != nil:
		d.Message = "the question was withdrawn: the turn ended"
	case err != nil:
		d.Message = "denied: the MCP client could not be asked (" + err.Error() + ")"
	default:
		d = decisionOf(res)
	}
	a.log(ctx, ap, d, "client", errString(err))
	return d
}

// decisionOf maps the client's answer to a Decision. Anything but an
// accepted form saying "allow" denies.
func decisionOf(res *mcp.ElicitResult) invoker.Decision {
	switch res.Action {
	case "accept":
	case "decline":
		return invoker.Decision{Message: "denied by the user"}
	case "cancel":
		return invoker.Decision{Message: "denied: the user dismissed the question"}
	default:
		return invoker.Decision{Message: fmt.Sprintf("denied: the MCP client answered %q", res.Action)}
	}
	switch decision, _ := res.Content[elicitDecision].(string); decision {
	case "allow":
		forSession, _ := res.Content[elicitForSession].(bool)
		return invoker.Decision{Allow: true, ForSession: forSession}
	case "deny":
		msg, _ := res.Content[elicitMessage].(string)
		if strings.TrimSpace(msg) == "" {
			msg = "denied by the user"
		} else {
			msg = "denied by the user: " + msg
		}
		return invoker.Decision{Message: msg}
	default:
		return invoker.Decision{Message: "denied: the MCP client accepted the question without a decision"}
	}
}

// log records an approval and its decision.
func (a *approver) log(ctx context.Context, ap invoker.Approval, d invoker.Decision, by, note string) {
	args := []any{"cli", a.t.name, "kind", ap.Kind, "tool", ap.Tool.Name, "allow", d.Allow, "by", by}
	if ap.Command != "" {
		args = append(args, "command", ap.Command)
	}
	if len(ap.Paths) > 0 {
		args = append(args, "paths", ap.Paths)
	}
	if d.ForSession {
		args = append(args, "for_session", true)
	}
	if note != "" {
		args = append(args, "note", note)
	}
	a.t.cfg.log.InfoContext(ctx, "approval", args...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// describeApproval says in a line what the agent cli asks to do.
func describeApproval(cli string, ap invoker.Approval) string {
	var b strings.Builder
	switch ap.Kind {
	case invoker.ApprovalCommand:
		b.WriteString("run the command ")
		if ap.Command != "" {
			fmt.Fprintf(&b, "`%s`", ap.Command)
		} else {
			b.WriteString(toolLabel(ap))
		}
		if ap.Cwd != "" {
			fmt.Fprintf(&b, " in %s", ap.Cwd)
		}
	case invoker.ApprovalFileChange:
		b.WriteString("change ")
		if len(ap.Paths) > 0 {
			b.WriteString(strings.Join(ap.Paths, ", "))
		} else {
			b.WriteString("files")
		}
		if ap.Tool.Name != "" {
			fmt.Fprintf(&b, " (%s)", ap.Tool.Name)
		}
	case invoker.ApprovalMCPTool:
		b.WriteString("call the MCP tool " + toolLabel(ap))
	default:
		b.WriteString("use its tool " + toolLabel(ap))
	}
	if len(ap.Tool.Input) > 0 && ap.Kind != invoker.ApprovalCommand && ap.Kind != invoker.ApprovalFileChange {
		b.WriteString(" with " + snippet(string(ap.Tool.Input), 400, false))
	}
	if ap.Reason != "" {
		b.WriteString(" (" + ap.Reason + ")")
	}
	return b.String()
}

func toolLabel(ap invoker.Approval) string {
	if ap.Tool.Name == "" {
		return "(unnamed)"
	}
	return ap.Tool.Name
}
