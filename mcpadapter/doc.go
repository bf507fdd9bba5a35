// Package mcpadapter serves agent CLIs as MCP tools on a server of the
// official Go SDK (github.com/modelcontextprotocol/go-sdk/mcp), with the
// cancellation semantics of package invoker: cancelling a tool call kills
// the agent's whole process tree and the server keeps serving.
//
// [Register] adds two tools per [invoker.Invoker]: one named after the
// invoker ("codex") that runs one agent turn, and one with the suffix
// "_parallel" that runs many independent turns at once. Their inputs,
// outputs and errors are described by [Input], [Output], [ParallelInput]
// and [ParallelOutput]; the tools' JSON schemas and descriptions, written
// for an LLM caller, say the same.
//
// It does not let a caller choose the program to run, its arguments or its
// environment: those are server configuration (the invokers' options). A
// workdir outside the configured roots, or a permission above the
// configured ceiling, is refused before anything starts. So is a
// session_id that is not a UUID, the form of the session ids the CLIs
// emit: their resume flags also take "latest", indexes, names or search
// terms, which on a server shared by several clients would resume another
// client's session.
//
// # Sandbox
//
// The kernel sandbox is set on the wrapped Invoker's options
// (invoker.Options.Sandbox), not on this package's [Options]: the Invoker
// holds it for every run it starts, so a server's tools, their parallel
// tasks and their warm sessions all get it, and a caller cannot turn it
// off through a tool's input. A tool call's [Output] says what held the
// run (Sandbox, from invoker.Result.Sandbox) and the connections its
// network rules saw (Connections: host, port, allowed, bytes).
// examples/mcpserver asks for the "available" sandbox by default.
//
// # Lifetime
//
// Register returns a [Tools], which owns the lifetime of the calls the way
// an *http.Server owns its connections'. A server that stops calls
// [Tools.Shutdown]: new calls are refused, the runs in flight are
// cancelled (their trees stopped by the invoker's ladder, which
// invoker.Options.StopGraces may shorten for ErrShuttingDown), the warm
// sessions are closed, and Shutdown returns once every run is reaped and
// recorded, or when its context is done. The SDK's Server.Run and
// ServerSession.Close wait for the tool handlers in flight instead of
// cancelling them, so Shutdown starts first:
//
//	tools, err := mcpadapter.Register(server, opts, codex.New())
//	...
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	stopped := make(chan error, 1)
//	go func() {
//		<-ctx.Done()
//		stopped <- tools.Shutdown(context.Background()) // cancels the runs, waits for their records
//	}()
//	err = server.Run(ctx, &mcp.StdioTransport{}) // returns once the handlers have returned
//	...
//	<-stopped
//
// # Cancellation
//
// A call's run is cancelled, and its process tree killed, when:
//   - the client cancels the call (notifications/cancelled);
//   - the client's connection ends: for stdio, standard input reaches end
//     of file; over streamable HTTP, the call's request ends unanswered
//     (the client disconnected, deleted its session, or the session timed
//     out), which takes wrapping the SDK's handler with [Tools.Handler];
//   - the server stops: [Tools.Shutdown].
//
// A failed run, or one cancelled by the server (shutdown, timeouts), is
// answered with an isError result (CallToolResult.IsError) whose structured
// content still holds the partial text and the session id, and whose text
// says how to resume. A client that cancels a call itself gets no answer
// to it, as the MCP specification has it (the SDK's CallTool returns the
// context's error); its partial text and session id are then in the
// transcript (Options.TranscriptPath) and in the server's log.
// Errors returned to the SDK are kept for protocol failures. A panic in an
// invoker is recovered and answered the same way: one broken run never
// takes the server down.
//
// # Tasks
//
// A client that cannot hold a connection as long as a run takes augments
// its tools/call with a task (MCP 2025-11-25): the call returns the task at
// once and the run goes on without the connection. tasks/get shows its
// status, progress and text so far, tasks/result returns what a plain call
// would have, tasks/list lists the caller's tasks, and tasks/cancel stops
// the run as a client's cancel of a call does, with [ErrTaskCancelled] as
// the cause. A task belongs to the identity that made it. A task nobody
// asks about for TaskOptions.AbandonAfter is cancelled with
// [ErrTaskAbandoned]; a finished one is kept for its TTL. The SDK drops
// the task of a tools/call: serve HTTP through [Tools.Handler], and other
// transports through [Tools.Transport]. A client of MCP 2026-07-28 that
// declares the tasks extension (io.modelcontextprotocol/tasks) gets a task
// for every call, polls tasks/get for the result or the run's question,
// and answers it with tasks/update. See [TaskOptions].
//
// # Who may call over HTTP
//
// Over streamable HTTP, [Tools.Handler] lets in only whom
// Options.HTTPAccess allows (see [HTTPAccess]): requests carrying one of a
// set of named bearer tokens ([Tokens], a file that can be rotated while
// serving), or an OAuth 2.1 access token that the server's verifier
// accepts (the resource server of the MCP authorization specification,
// with its protected resource metadata), on every endpoint; a token in a
// URL is refused. Browser pages are refused unless their Origin is a
// loopback one or allowed. Without authentication, only requests from this
// machine (loopback) are served, unless HTTPAccess.InsecureNoAuth says
// otherwise. A call's identity (the token's name, the OAuth subject) is
// written in its transcript lines (TranscriptEntry.Identity), its log
// records and its span (enduser.id); Options.MaxConcurrentPerIdentity
// bounds the runs of one identity, [Tools.Calls] lists the calls in
// progress with their identity and [Tools.Cancel] stops those of one.
//
// # Approvals
//
// A CLI whose invoker takes an approval callback (Capabilities.Approve)
// asks before it runs a command, changes a file or calls an MCP tool.
// [Options].Approvals says who answers: nobody ([ApprovalsAllow], the
// default: the call's permission level decides, as for CLIs that cannot
// ask), the server ([ApprovalsDeny]), or the call's MCP client
// ([ApprovalsElicit]): each question becomes an elicitation on the call's
// stream (a form with decision allow or deny, for_session, and a message
// for the model), withdrawn when the call is cancelled or the turn ends.
// A client that cannot be asked (no elicitation declared, or protocol
// 2026-07-28, which takes no request from the server during a call) gets
// Options.ApprovalFallback, deny by default. The permission level stays
// the ceiling under every policy. docs/approvals.md records which MCP
// hosts declare elicitation and what they answer when run headless.
//
// A server with rules of its own sets Options.Approve, a policy written in
// Go, which sees each question with the [Call] it comes from (the tool,
// the task, the client's request, the run's workdir and permission). It
// decides first; [Call.Defer] hands a question on to Options.Approvals.
// So the order is: the permission level (the ceiling, never crossed),
// then Options.Approve, then, for what it defers, Options.Approvals
// (allow, deny, or the client asked, else Options.ApprovalFallback).
//
// Each run receives the server's answer as its Request.Approve: nil when
// the server asks no one (ApprovalsAllow without Approve), so that the
// CLI runs as it does without a callback. An Invoker given to Register
// that wraps another and sets Request.Approve itself decides after the
// server, since it hands the CLI its request: one that calls the
// Request.Approve it received for the questions it does not answer keeps
// the server's policy, as a middleware calls the next handler, and one
// that replaces it answers alone, leaving Options.Approve and
// Options.Approvals out. A wrapper that sets it in Invoke only is also
// left out of warm sessions, which run through Invoker.OpenSession. A
// policy for every run belongs in Options.Approve, which reaches them all.
//
// # Go tools
//
// Options.MCPServers gives the agent of every run MCP servers: tools
// written in Go (a go-sdk *mcp.Server, served by each run to its CLI) and
// servers of other programs. Each run receives a copy of the list, first,
// in its Request.MCPServers; an Invoker wrapper may append servers of its
// own, and one that adds a server under a name of the list has the call
// refused with invoker.ErrInvalidRequest before anything starts. The
// agent's calls of their tools are questions like its other actions, for
// Options.Approve and Options.Approvals to answer.
//
// # Testing
//
// Package mcpadapter/mcptest connects a client to a server in memory,
// calls its tools and waits until their runs are reaped, and
// invoker/invokertest scripts the agents: together they test a server
// built on this package with no CLI installed.
//
// # Progress
//
// When a call carries a progress token, the run's events become
// notifications/progress messages ("running: go test ./...", "thinking…",
// a snippet of the answer being written), at most one per
// Options.ProgressInterval, and a heartbeat goes out after every
// Options.HeartbeatInterval of silence so that clients with idle timeouts
// keep waiting. Without a token nothing is sent. The SDK client may deliver
// a call's last notifications after its result.
//
// # Concurrency
//
// The SDK runs the calls of a session concurrently, without limit. The
// tools of one Register call share Options.MaxConcurrent slots, and an
// identity's calls Options.MaxConcurrentPerIdentity of them; a call (or a
// parallel call's task) beyond them waits, until its context is done.
//
// MaxConcurrent bounds the calls this server runs; the host's Budget
// (invoker.Options.Budget, given to the invokers) bounds the runs of the
// whole process, every Invoker given the same *invoker.Budget, this
// server's and others', by count and by the memory they promise
// (invoker.Limits.Memory). They compose, as one path of admission: a call
// waits for a slot of its identity, then for one of MaxConcurrent's, then
// its run waits for the Budget; each is a first-come-first-served queue of
// the same kind, the call holds nothing of the next while it waits in one,
// and every wait is told the same way. Its progress says "queued, 3 ahead"
// and what for ("queued, 0 ahead for one of this server's 4 runs at
// once"; nothing more for the Budget, the run's KindQueued events; "until
// the rate limit resets at …" at a rate limit's gate), and its Output's
// queued_ms is the time waited in all of them. A server alone on its host needs only one of them; a server
// beside other programs that run agents shares one Budget with them. Each
// run's Output and transcript line also carry what it used (resources:
// peak memory, CPU time, peak processes, whether sampled).
//
// # Tracing
//
// Each tool call is a server span "tools/call <tool>" of
// Options.TracerProvider (otel's global provider when nil), with the
// attributes of OpenTelemetry's MCP conventions (mcp.method.name,
// gen_ai.tool.name, mcp.session.id) and clinvoke.status. It continues the
// client's trace: from the request's _meta ("traceparent", "tracestate"),
// or else from the HTTP request's headers unless the call's context already
// holds a span (a host's HTTP middleware made one). The runs of the call are
// its children, and each CLI gets its run's span in TRACEPARENT (see the
// Telemetry section of package invoker). The call's log records take its
// context, so that a handler can add its trace and span ids. A call that
// waits for a slot (MaxConcurrent, MaxConcurrentPerIdentity) has the span
// events of a run that waits for the host's Budget, clinvoke.queued and
// clinvoke.admitted, with clinvoke.queue "server" or "identity"; the
// waits are counted in Options.MeterProvider's clinvoke.run.queued and
// clinvoke.runs.waiting, the instruments of the invokers' waits.
package mcpadapter
