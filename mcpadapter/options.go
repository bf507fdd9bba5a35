package mcpadapter

import (
	"context"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/clinvoke/clinvoke/internal/workspace"
	"github.com/clinvoke/clinvoke/invoker"
)

// Defaults of the settings in [Options].
const (
	// DefaultMaxConcurrent is how many runs may execute at once across all
	// calls of the tools registered by one Register call. Each agent CLI
	// is a heavy process tree (a Node runtime, a model stream, tools), so
	// the default is small.
	DefaultMaxConcurrent = 4

	// DefaultMaxTasks is the largest number of tasks one call of a
	// parallel tool accepts.
	DefaultMaxTasks = 16

	// DefaultProgressInterval is the shortest time between two progress
	// notifications of one call.
	DefaultProgressInterval = 2 * time.Second

	// DefaultHeartbeatInterval is the longest silence, in progress
	// notifications, of a call whose client asked for progress. Clients
	// commonly give up on a tool call after 30–60 s without a message;
	// 15 s keeps them waiting with a margin.
	DefaultHeartbeatInterval = 15 * time.Second
)

// Options configures the tools added by [Register]. A nil *Options, and a
// zero field, mean the documented default.
type Options struct {
	// MaxConcurrent bounds how many runs execute at once across all calls
	// (a parallel call's tasks count one each; a turn of a warm session
	// counts as a run, an idle warm session does not). A call that would exceed it
	// waits for a free slot, first come first served, reporting "queued, N
	// ahead for one of this server's M runs at once" in its progress, until
	// its context is done; the wait counts in its queued_ms (see the
	// package documentation, Concurrency). If zero, DefaultMaxConcurrent is
	// used; a negative value means no limit.
	MaxConcurrent int

	// MaxConcurrentPerIdentity, if positive, bounds how many runs of one
	// identity (see [HTTPAccess]) execute at once, so that one client
	// cannot take every slot of MaxConcurrent. A run beyond it waits, as
	// for MaxConcurrent, reporting "queued, N ahead for one of the M runs
	// of IDENTITY at once", until its context is done; it waits without
	// holding a slot of MaxConcurrent, so the
	// calls of other identities go first. A parallel call's tasks count
	// one each. Calls without identity (stdio, HTTP without
	// authentication) are bounded by MaxConcurrent alone. If zero, one
	// identity may use every slot.
	MaxConcurrentPerIdentity int

	// MaxTasks bounds the number of tasks in one call of a parallel tool.
	// If zero, DefaultMaxTasks is used.
	MaxTasks int

	// Roots are the directories under which a call's workdir (and its image
	// paths) must lie. Each must be an absolute path to an existing
	// directory; symbolic links are resolved once, by Register. If Roots is
	// empty, any existing absolute directory is accepted.
	//
	// A workdir is accepted when, after cleaning and resolving symbolic
	// links, it is a root or lies under one. A refused call starts nothing.
	Roots []string

	// DefaultPermission is the permission of a call that names none. If
	// empty, invoker.ReadOnly is used. It must not exceed MaxPermission.
	DefaultPermission invoker.Permission

	// MaxPermission is the highest permission a call may ask for; the
	// tools' input schemas list only the levels up to it. If empty,
	// invoker.WorkspaceWrite is used: invoker.Unlimited (no sandbox, no
	// approvals) must be allowed explicitly.
	MaxPermission invoker.Permission

	// MaxBudgetUSD, if positive, is the most one run may spend, in US
	// dollars as the CLI computes it: a call asking for a larger
	// max_budget_usd is refused, and a call giving none runs with this
	// budget. It bounds the CLIs that support a budget (those whose
	// invoker declares Capabilities.MaxBudget: Claude Code); the others
	// report no cost and cannot be bounded, and their tools offer no
	// max_budget_usd. Each task of a parallel call is one run. If zero, a
	// run is bounded only by the max_budget_usd it gives.
	MaxBudgetUSD float64

	// MaxTurns, if positive, is the most agent turns one run may take: a
	// call asking for a larger max_turns is refused, and a call giving
	// none runs with this limit. Like MaxBudgetUSD, it bounds only the
	// CLIs that support a turn limit (Capabilities.MaxTurns: Claude
	// Code). If zero, a run is bounded only by the max_turns it gives.
	MaxTurns int

	// ProgressInterval is the shortest time between two progress
	// notifications of one call; events arriving faster are coalesced, the
	// latest one winning. If zero, DefaultProgressInterval is used.
	ProgressInterval time.Duration

	// Deltas asks every CLI that can stream its answer as it is written
	// (invoker.Capabilities.Deltas) for it, so that progress notifications
	// show the answer growing ("writing: ...") rather than each message
	// once it is whole. A Codex call then runs on Codex's app-server (see
	// package codex), which starts more slowly than its exec mode.
	Deltas bool

	// HeartbeatInterval is the longest time a call that asked for progress
	// goes without a progress notification: when the agent is silent for
	// this long, a heartbeat ("still running, 45s") is sent. Heartbeats
	// keep ProgressInterval too, so a HeartbeatInterval shorter than it
	// acts as ProgressInterval. If zero, DefaultHeartbeatInterval is used.
	HeartbeatInterval time.Duration

	// TranscriptPath, if not empty, names a file to which every run
	// appends JSON lines (see [TranscriptEntry]): one of status "running"
	// as soon as its session id is known, and one when it ends, for
	// successes, failures and cancellations alike; a refused call, or a
	// parallel call refused as a whole, is one line. Calls the SDK rejects because their
	// arguments do not match the input schema never reach the tools and
	// are not recorded. The file is created with
	// mode 0600 if needed and opened in append mode for each line, which is
	// written with one write call under a lock, so concurrent calls (and
	// several processes sharing the file) never interleave their lines.
	TranscriptPath string

	// WarmSessions, if its MaxSessions is positive, keeps the CLI of a
	// conversation running between the calls that continue it, for the
	// CLIs that have a long-lived mode (invoker.Capabilities.Sessions):
	// such a call skips the CLI's start-up, and a client's cancel of it
	// becomes the CLI's own interrupt, which keeps the conversation's
	// process. Each warm session holds its process tree (150–400 MiB of
	// memory for the real CLIs) until it is idle for IdleTimeout. See
	// [WarmSessions]. The zero value keeps none: every call starts its CLI.
	WarmSessions WarmSessions

	// Approvals says who answers the questions an agent asks before it
	// acts (a command, a file change, an MCP tool call), for the CLIs
	// whose invoker takes an approval callback (invoker.Capabilities.Approve;
	// the others run as under ApprovalsAllow, bounded by the permission
	// level alone). ApprovalsAllow, the default, asks no one: the
	// call's permission level, which the client chose within
	// MaxPermission and the CLI's sandbox enforces, is the consent.
	// ApprovalsDeny refuses every such action. ApprovalsElicit asks the
	// call's client by elicitation, where the client can be asked (see
	// ApprovalFallback). Whatever the policy, the permission level stays
	// the ceiling: an action above it is refused without asking.
	Approvals ApprovalPolicy

	// ApprovalFallback is the policy, ApprovalsAllow or ApprovalsDeny,
	// for a call under ApprovalsElicit whose client cannot be asked: it
	// did not declare elicitation in its capabilities, or it speaks a
	// protocol version (2026-07-28 and later) in which a server sends no
	// request during a call. If empty, ApprovalsDeny is used: a question
	// nobody can answer is a no. A client that declared elicitation and
	// then fails to answer one (an error) is a denial too.
	ApprovalFallback ApprovalPolicy

	// HTTPAccess says who may reach the tools over streamable HTTP, which
	// Tools.Handler checks: bearer tokens, OAuth access tokens, browser
	// origins. The zero value authenticates nobody and serves only
	// requests from this machine. See [HTTPAccess].
	HTTPAccess HTTPAccess

	// Approve and MCPServers give every run of the tools what a program
	// gives a run of its own in invoker.Request: an approval policy and
	// tools, written in Go. The package documentation (# Approvals, # Go
	// tools) says how they compose with Approvals, and with an Invoker
	// that sets the same Request fields.

	// Approve, if not nil, is the server's approval policy written in Go.
	// It decides each action the agent of a run asks permission for (a
	// command, a file change, an MCP tool call: invoker.Approval), for
	// every run of the tools, the turns of warm sessions and the tasks of
	// parallel calls included, and call says which call of which client
	// the run serves. It decides first: what it returns is the answer,
	// and call.Defer(ctx, a) hands the question to Approvals instead,
	// which answers as it does without Approve (ApprovalsAllow, the
	// default, allows; ApprovalsDeny denies; ApprovalsElicit asks the
	// call's client, or applies ApprovalFallback). So a policy refuses
	// what it must and defers the rest:
	//
	//	Approve: func(ctx context.Context, call *mcpadapter.Call, a invoker.Approval) invoker.Decision {
	//		if a.Kind == invoker.ApprovalFileChange && !inside(dir, a.Paths) {
	//			return invoker.Decision{Message: "only files under " + dir + " may change"}
	//		}
	//		return call.Defer(ctx, a)
	//	},
	//
	// The permission level stays the ceiling, whatever Approve answers:
	// an action above it is refused without asking, or fails in the
	// CLI's sandbox. With Approve, every run takes an approval callback:
	// the CLIs run in their long-lived mode and ask about each action,
	// even one the permission level alone would let run (see
	// invoker.Request.Approve). Register refuses an invoker whose CLI
	// takes no callback (Capabilities.Approve): the policy could not reach
	// its runs.
	//
	// Approve is called with the turn's context, on a goroutine of the
	// run, concurrently for different runs; it may block, to ask someone,
	// until the turn ends. A panic in it fails the run, as a panic in the
	// invoker does; the server keeps serving. The invoker receives the
	// server's answer as its Request.Approve: an Invoker that wraps
	// another and sets Request.Approve itself decides after the server
	// (see the package documentation, Approvals).
	Approve func(ctx context.Context, call *Call, a invoker.Approval) invoker.Decision

	// MCPServers are MCP servers whose tools the agent of every run may
	// call (invoker.Request.MCPServers): tools written in Go
	// (MCPServer.Server, a go-sdk server, which serves any number of runs
	// at once) and servers of other programs (a command or a URL). A run
	// with servers runs in the CLI's long-lived mode. The agent's calls of
	// their tools are approval questions like its other actions
	// (Approval.Kind invoker.ApprovalMCPTool): under ApprovalsDeny, only an Approve
	// that allows them lets the agent call them.
	//
	// Register copies the list, and refuses it as a run's request would
	// be refused (a name that is not a usable server name or is given
	// twice, a server that sets not exactly one of Server, Command and
	// URL, a URL that is not http or https, an environment entry that is
	// not KEY=VALUE, ...), or when an invoker's CLI cannot take a server of
	// the list (Capabilities.GoTools for a Go server,
	// Capabilities.MCPServers for the others). Each run
	// gets a copy of the list, to which an Invoker that wraps another may
	// append servers of its own (see the package documentation, Go tools).
	MCPServers []invoker.MCPServer

	// Logger, if not nil, receives a record for each call: start, end,
	// refusal, recovered panic. A nil Logger discards everything.
	// Nothing is ever written to standard output, which a stdio server
	// uses for the protocol.
	Logger *slog.Logger

	// Tasks configures the tasks of the tools: a tools/call that a client
	// augments with a task returns the task at once, and its run goes on
	// without the client's connection, up to an abandonment bound; its
	// result is kept for a TTL after its end. See [TaskOptions].
	Tasks TaskOptions

	// SSERetry is the reconnection delay that Tools.Handler writes, as
	// the retry field, in the priming event of each resumable SSE stream
	// (SEP-1699): those the SDK primes when StreamableHTTPOptions.EventStore
	// is set, for clients of protocol 2025-11-25. A client whose stream
	// drops reconnects after it with Last-Event-ID and gets what it
	// missed. If zero, DefaultSSERetry is used.
	SSERetry time.Duration

	// TracerProvider receives a span for each tool call ("tools/call
	// <tool>", a server span), a child of the client's trace when the
	// request carries one: in its _meta ("traceparent", "tracestate"), or
	// else in the HTTP request's headers. The invokers' spans of the call's
	// runs are its children. Nil means otel.GetTracerProvider(), which
	// records nothing until the host installs an OpenTelemetry SDK.
	TracerProvider trace.TracerProvider
}

// config is Options with the defaults applied and the roots resolved.
type config struct {
	maxConcurrent int64
	maxTasks      int
	roots         []string
	defaultPerm   invoker.Permission
	maxPerm       invoker.Permission
	progressEvery time.Duration
	heartbeat     time.Duration
	deltas        bool
	transcript    string
	log           *slog.Logger
	maxBudget     float64
	maxTurns      int
	warm          WarmSessions
	tracer        trace.Tracer
	approvals     ApprovalPolicy
	// approvalFallback is ApprovalsAllow or ApprovalsDeny.
	approvalFallback ApprovalPolicy

	// maxPerIdentity is Options.MaxConcurrentPerIdentity; 0 for no limit.
	maxPerIdentity int64
	// access is Options.HTTPAccess, checked.
	access *access
	// approve is Options.Approve; servers is a copy of Options.MCPServers.
	approve func(ctx context.Context, call *Call, a invoker.Approval) invoker.Decision
	servers []invoker.MCPServer
	// tasks is Options.Tasks with its defaults.
	tasks TaskOptions
	// sseRetry is Options.SSERetry, or its default.
	sseRetry time.Duration
}

func newConfig(o *Options) (*config, error) {
	if o == nil {
		o = &Options{}
	}
	c := &config{
		maxConcurrent:    int64(o.MaxConcurrent),
		maxPerIdentity:   int64(o.MaxConcurrentPerIdentity),
		maxTasks:         o.MaxTasks,
		defaultPerm:      o.DefaultPermission,
		maxPerm:          o.MaxPermission,
		progressEvery:    o.ProgressInterval,
		heartbeat:        o.HeartbeatInterval,
		deltas:           o.Deltas,
		transcript:       o.TranscriptPath,
		log:              o.Logger,
		maxBudget:        o.MaxBudgetUSD,
		maxTurns:         o.MaxTurns,
		warm:             o.WarmSessions,
		tracer:           tracer(o.TracerProvider),
		approvals:        o.Approvals,
		approvalFallback: o.ApprovalFallback,
		approve:          o.Approve,
		servers:          slices.Clone(o.MCPServers),
		tasks:            o.Tasks,
		sseRetry:         o.SSERetry,
	}
	switch {
	case c.sseRetry < 0:
		return nil, fmt.Errorf("Options.SSERetry is %v: give a positive duration, or 0 for %v", c.sseRetry, DefaultSSERetry)
	case c.sseRetry == 0:
		c.sseRetry = DefaultSSERetry
	}
	if err := c.tasks.check(); err != nil {
		return nil, fmt.Errorf("Options.Tasks: %w", err)
	}
	switch {
	case c.maxConcurrent == 0:
		c.maxConcurrent = DefaultMaxConcurrent
	case c.maxConcurrent < 0:
		c.maxConcurrent = math.MaxInt64
	}
	if c.maxPerIdentity < 0 {
		return nil, fmt.Errorf("Options.MaxConcurrentPerIdentity is %d: give a positive number of runs, or 0 for no limit per identity", c.maxPerIdentity)
	}
	if c.maxTasks <= 0 {
		c.maxTasks = DefaultMaxTasks
	}
	if c.defaultPerm == "" {
		c.defaultPerm = invoker.ReadOnly
	}
	if c.maxPerm == "" {
		c.maxPerm = invoker.WorkspaceWrite
	}
	if !c.defaultPerm.Valid() {
		return nil, fmt.Errorf("Options.DefaultPermission: unknown permission %q (want one of %v)", c.defaultPerm, permissions)
	}
	if !c.maxPerm.Valid() {
		return nil, fmt.Errorf("Options.MaxPermission: unknown permission %q (want one of %v)", c.maxPerm, permissions)
	}
	if c.defaultPerm.Rank() > c.maxPerm.Rank() {
		return nil, fmt.Errorf("Options.DefaultPermission %q exceeds Options.MaxPermission %q", c.defaultPerm, c.maxPerm)
	}
	if b := c.maxBudget; b < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
		return nil, fmt.Errorf("Options.MaxBudgetUSD is %v: give a positive amount in US dollars, or 0 for no server limit", b)
	}
	if c.maxTurns < 0 {
		return nil, fmt.Errorf("Options.MaxTurns is %d: give a positive number of turns, or 0 for no server limit", c.maxTurns)
	}
	if !c.approvals.Valid() {
		return nil, fmt.Errorf("Options.Approvals: unknown policy %q (want %q, %q or %q)", c.approvals, ApprovalsAllow, ApprovalsDeny, ApprovalsElicit)
	}
	if c.approvals == "" {
		c.approvals = ApprovalsAllow
	}
	switch c.approvalFallback {
	case "":
		c.approvalFallback = ApprovalsDeny
	case ApprovalsAllow, ApprovalsDeny:
	default:
		return nil, fmt.Errorf("Options.ApprovalFallback: %q is not a policy a server applies on its own (want %q or %q)", c.approvalFallback, ApprovalsAllow, ApprovalsDeny)
	}
	if err := checkServers(c.servers); err != nil {
		return nil, err
	}
	if err := c.warm.check(); err != nil {
		return nil, fmt.Errorf("Options.WarmSessions: %w", err)
	}
	if c.progressEvery <= 0 {
		c.progressEvery = DefaultProgressInterval
	}
	if c.heartbeat <= 0 {
		c.heartbeat = DefaultHeartbeatInterval
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	access, err := o.HTTPAccess.compile(c.log)
	if err != nil {
		return nil, fmt.Errorf("Options.HTTPAccess: %w", err)
	}
	c.access = access
	if c.transcript != "" && !filepath.IsAbs(c.transcript) {
		abs, err := filepath.Abs(c.transcript)
		if err != nil {
			return nil, fmt.Errorf("Options.TranscriptPath: %w", err)
		}
		c.transcript = abs
	}
	for _, r := range o.Roots {
		resolved, err := resolveRoot(r)
		if err != nil {
			return nil, fmt.Errorf("Options.Roots: %w", err)
		}
		c.roots = append(c.roots, resolved)
	}
	return c, nil
}

func resolveRoot(r string) (string, error) {
	if !filepath.IsAbs(r) {
		return "", fmt.Errorf("root %q is not an absolute path", r)
	}
	resolved, err := workspace.Existing(r)
	if err != nil {
		return "", fmt.Errorf("root %q: %w", r, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("root %q: %w", r, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("root %q is not a directory", r)
	}
	return resolved, nil
}

// allowedPermissions returns the levels up to c.maxPerm, least privileged
// first.
func (c *config) allowedPermissions() []invoker.Permission {
	var out []invoker.Permission
	for _, p := range permissions {
		if p.Rank() <= c.maxPerm.Rank() {
			out = append(out, p)
		}
	}
	return out
}

// permissions are the permission levels, least privileged first.
var permissions = []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited}
