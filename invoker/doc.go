// Package invoker runs AI coding-agent CLIs — OpenAI Codex, Google Gemini
// CLI, Anthropic Claude Code — as subprocesses under a context.Context, and
// guarantees that when a call returns, the CLI and every process it started
// are gone.
//
// The backend packages codex, gemini and claude each return an [Invoker];
// this package holds everything a program that uses them touches: the
// requests ([Request], and for conversations [SessionRequest] and
// [TurnRequest]), [Result], [Event], [Session], [Options], [Capabilities]
// and the errors. The engine that runs any backend lives with the contract
// backends implement, in package invoker/driver, as database/sql's pool
// lives apart from database/sql/driver's interfaces; package
// invoker/invokertest scripts a stand-in agent for tests without keys, as
// net/http/httptest does for HTTP. The engine never invokes a shell, never
// gives the CLI the host's standard input, and writes nothing to the host's
// standard output or error (a nil logger means silence), so it is safe
// inside an MCP server speaking on stdio.
//
//	inv := claude.New()
//	res, err := inv.Invoke(ctx, invoker.Request{
//		Prompt:  "Explain what main.go does",
//		Workdir: "/home/me/project",
//		OnEvent: func(ev invoker.Event) { fmt.Println(ev.Kind, ev.Text) },
//	})
//	// res is never nil: on error it still holds SessionID and partial Text.
//
// # Processes
//
// Each call starts the CLI in a new session and process group. The prompt
// is written to the CLI's standard input concurrently with reading its
// output, then stdin is closed. The environment is the host's (see
// Options.InheritEnv) minus variables known to break nested runs, plus
// Options.Env, the backend's own variables and [Request.Env].
//
// When the CLI exits — after success as after failure — the rest of its
// tree is killed, and Invoke waits until it is gone. A grandchild that
// still holds stdout open is therefore killed too. Output the tree wrote is
// read to its end, however large the pipe; if a process outside the tree
// holds a pipe open, Options.WaitDelay bounds the wait, counted once from
// the sweep whatever that process writes.
//
// # Containment
//
// What the tree is depends on the containment level, chosen at each start
// ([Result.Containment] says which one held a run, and
// [Capabilities].Containment which one runs get on this machine, and why
// not better):
//
//   - "cgroup" (Linux with a writable cgroup v2 the host runs in: root, a
//     delegated cgroup such as systemd-run --user -p Delegate=yes --scope,
//     or Options.CgroupParent naming a cgroup the host was moved into):
//     the CLI starts inside a cgroup of its own, so every process it
//     starts is born there and none can leave by anything it does to its
//     session, environment or process title. A process that may write
//     cgroupfs (a CLI run as root, as it runs when the host is root) can
//     move itself into another cgroup, out of the run's reach: see
//     # Limits and accounting. The sweep is one write to
//     cgroup.kill; "gone" is the kernel's word. A keeper process kills
//     every run of a host that dies without cleaning up (SIGKILL, OOM
//     kill).
//   - "tracking" (Linux otherwise): the process group, descendants by
//     parent links recorded every 300 ms, and every process carrying the
//     run's marker variable (CLINVOKE_RUN) in its environment, plus a
//     parent-death signal for the CLI. It misses a process that leaves the
//     session, clears or overwrites its environment and loses its parent
//     between two recordings, and a clone(CLONE_PARENT) sibling; a host
//     killed outright takes down the CLI only.
//   - "job" (Windows, a Job Object) and "group" (macOS, BSD: the process
//     group and the descendants found by parent links).
//
// Options.Containment forces a level: asking for "cgroup" where it cannot
// be had fails with [ErrContainment] before anything starts.
//
// # Cancellation
//
// Cancelling ctx, its deadline, a timeout (Options.FirstEventTimeout,
// Options.IdleTimeout) or a fatal signature recognised by the backend stops
// the CLI with a ladder of signals to its process group:
//
//  1. SIGINT (or Ctrl-C written to the terminal in Options.PTY mode), then
//     wait up to Options.InterruptGrace (1 s by default);
//  2. SIGTERM, then wait up to Options.TerminateGrace (2 s by default);
//  3. SIGKILL to the group and to every descendant of the run.
//
// The CLI exiting at any step ends the ladder and starts the sweep. On
// Linux a step whose signal the CLI's process ignores (SIG_IGN, as a CLI
// started by a host that ignores SIGINT inherits it: nohup, a shell
// script's background command) is not waited out: the signal is sent to
// the group all the same, for the tools in it that handle it, and the next
// step follows at once, so a CLI that ignores both SIGINT and SIGTERM gets
// SIGINT, SIGTERM and SIGKILL at once. SIGINT
// comes first because it is the signal the real CLIs handle best: Claude
// Code records the turn and stops its own tools on SIGINT, but orphans them
// on SIGTERM. The error then matches ctx.Err() (errors.Is(err,
// context.Canceled) or context.DeadlineExceeded), and the Result still
// holds the session id and partial text. If the CLI had already reported
// success before the stop took effect, the turn is complete: Invoke returns
// its Result with a nil error. A context already done when Invoke is called
// starts nothing and gives the same error.
//
// A cause given with context.WithCancelCause (or a deadline's cause) is
// named in the error's message, but errors.Is and errors.As do not find
// it: it is why the caller stopped the run, not what the run did. Ask
// context.Cause(ctx) for it. So in an errgroup.WithContext fan-out, the
// runs stopped because a sibling failed return context.Canceled, and never
// match the sibling's *ExitError.
//
// # Events
//
// Each line the CLI prints on stdout is decoded into zero or more [Event]
// values delivered in order to [Request.OnEvent] from one goroutine (see
// the package example). The line is kept in Event.Raw; a line that
// carries nothing gives no event. Once the CLI reported its session
// ([KindSession]), every event carries its id in Event.SessionID. Events
// encode to JSON and decode back, the kind as its name ("kind":"tool_call";
// see [EventKind.UnmarshalText]).
//
// Lines have no fixed length limit: single JSON lines of many MiB are
// normal for these CLIs. A line over Options.MaxLineSize (64 MiB by default)
// is skipped and reported as a [KindWarning] event; streaming goes on, but
// the run fails with [ErrLineTooLong]: the skipped line may have held the
// answer, and lost output is never reported as success. In the long-lived
// mode of a session, whose protocol cannot do without the line (it may
// have ended the turn), the turn fails at once and the session ends. Malformed lines
// become warnings; unknown event types pass through as [KindRaw].
//
// After an error or a cancel, [Result.Text] holds the partial answer the
// stream showed: the assistant's message text as far as it came (each
// backend's package says how its CLI's messages add up); reasoning and
// tool output never count.
//
// # Errors
//
// Invoke always returns a non-nil *Result. Its message starts with the
// CLI's name ("codex: ..."), and it wraps one of the errors of errors.go:
//
//   - the context's error (context.Canceled or context.DeadlineExceeded),
//     and nothing else: a cancel's cause is named but not matched (see
//     Cancellation);
//   - [ErrInvalidRequest] for a request rejected before any process
//     starts, and [ErrUnsupported] (which also matches
//     errors.ErrUnsupported) for a field the CLI cannot honour;
//   - [ErrNotInstalled] when the binary is missing (also exec.ErrNotFound
//     when looked up on PATH);
//   - [ErrFirstEventTimeout] or [ErrIdleTimeout];
//   - a [*StreamError] for a failure the CLI reported in its own stream,
//     possibly wrapping [ErrAuthRequired] or [ErrRateLimited];
//   - an [*ExitError] for a non-zero exit, or a death by a signal the run
//     did not send, with no better explanation: exit code, signal and
//     stderr tail, as in os/exec;
//   - [ErrLineTooLong] when a line over the line limit was skipped;
//   - a [*LimitError] ([ErrMaxTurns], [ErrMaxBudget]) wrapping the CLI's
//     *StreamError, for a turn the CLI stopped at Request.MaxTurns or
//     MaxBudgetUSD; a [*SchemaError], keeping the answer's text, for a
//     completed turn whose answer does not satisfy Request.OutputSchema;
//   - [ErrNoResult] for an exit status 0 without the CLI's terminal
//     success event (several CLIs exit 0 when interrupted), quoting what
//     the CLI printed instead, and also matching [ErrLineTooLong] when a
//     skipped line may have held it (output cut at the wait delay is named
//     in the message and reported by Result.OutputCut).
//
// Success is decided by the CLI's terminal event, never by the exit status
// alone. The exit code has one name everywhere: [Result.ExitCode], and
// [ExitError.ExitCode] for the exit that is the error. See the errors
// example.
//
// # Capabilities
//
// Not every CLI honours every [Request] field (Gemini takes no images and
// no system prompt). Each backend declares its [Capabilities] once;
// Invoker.Capabilities reports them (a wrapper that embeds the Invoker
// keeps them), and Invoke refuses a field the CLI cannot honour with
// [ErrUnsupported], naming the field and what to do instead, before
// anything starts. The MCP adapter builds its tool schemas from the same
// declaration. What depends on the machine rather than the CLI is there
// too: the containment level (Containment, ContainmentNote) and the limits
// the host can enforce (Limits, LimitsNote), found once per Invoker.
//
// # Sessions
//
// Invoker.OpenSession holds a conversation in one warm CLI process (Claude
// Code's stream-json input, Codex's app-server, Gemini CLI's Agent Client
// Protocol), where Capabilities.Sessions says the CLI has a reliable
// long-lived mode. A conversation's settings are a [SessionRequest] and
// each turn a [TurnRequest]; a Request is the two in one, and Invoke is a
// session of one turn: [Session].Turn returns the same Result and errors as
// Invoke for the same output of the CLI, without the CLI's start-up.
// Cancelling a turn's context first asks the CLI to end the turn in its own
// protocol and waits Options.TurnInterruptGrace; the session then goes on.
// A CLI that does not end the turn in time gets the ladder above, the
// session is closed and the error matches [ErrInterruptIgnored]. The
// session's tree is held as a run's: Session.Close, the session's context,
// the host's exit or crash end it, and Close returns once it is gone. One
// turn runs at a time; another gets [ErrTurnInProgress] at once.
//
// # Two-way control
//
// A program can decide what the agent may do, and give it tools of its
// own. Request.Approve (SessionRequest.Approve) is called for each action
// the CLI asks permission for — a command, a file change, an MCP tool
// call — with an [Approval] that describes it and the turn's context, and
// answers with a [Decision]: allow, allow for the rest of the session,
// allow with a changed input (Claude Code), or deny with a message the
// model reads. The request's Permission stays the ceiling: an action above
// it is refused without asking, and the callback decides what is within
// it. A callback may block (to ask a person); when the turn ends first,
// the CLI's question is withdrawn, and the turn does not return before the
// callback has.
//
// At most 64 questions of a turn wait for the callback at once. A CLI that
// asks more (a loop, a prompt injection) gets a denial for each question
// beyond them, without the callback being asked, and the run reports each
// with a [KindWarning] event: what a CLI can make the program hold is
// bounded, whatever it asks.
//
// Request.MCPServers gives the agent MCP servers: tools written in Go
// ([MCPServer].Server, a go-sdk *mcp.Server), which the run serves for its
// length (to Claude Code over its control protocol, to the others over
// streamable HTTP on 127.0.0.1 behind a per-run bearer token), and servers
// of other programs (a command the CLI starts inside the run's containment,
// or a URL). A tool call's context is cancelled when its turn is, and the
// run does not return while a handler runs. A panic in Approve or in a tool
// handler is handled as one in OnEvent. A run with Approve or MCPServers
// runs in the CLI's long-lived mode; Capabilities.Approve, GoTools and
// MCPServers say which CLIs can.
//
// # Limits and accounting
//
// Many agents on one host share its memory, processes and CPU, and a tool
// that runs away (a test suite, npm install, a fork bomb) would take the
// host and every other run with it. Limits (Options.Limits, Request.Limits,
// SessionRequest.Limits) have the kernel hold each run to a most memory, a
// most processes and a share of CPU, set on the run's cgroups before the
// CLI's first instruction. What happens past them:
//
//   - memory: the kernel's OOM killer kills the run's process that uses the
//     most, usually the runaway tool, never a process of another run. The CLI
//     sees its tool fail, as with any failing command, the run gets a
//     KindWarning event ("1 process of the run killed by the memory limit of
//     512 MiB (peak 511.8 MiB); the CLI runs on"), and the turn goes on. A
//     CLI killed itself fails the run with a *LimitError matching
//     ErrResourceLimit ("claude: the CLI was killed by the memory limit of
//     512 MiB (peak 511.8 MiB); resume session …"), and closes a session
//     with it. A run (or a turn) that fails after one of its processes was
//     killed is a *LimitError for "memory" too.
//   - processes: a fork past the limit fails, nothing is killed; a
//     KindWarning event says so, and a run (or a turn) that then fails is
//     a *LimitError for "processes".
//
// What the kernel counted wins over what the CLI said of its failure: a
// CLI that cannot start a thread may exit with a status its backend reads
// as a usage error or a crash, or report a failed turn; the error is then
// the *LimitError, what the CLI said kept in its Err and its message.
//   - CPU: the run is throttled to its share in every 100 ms.
//
// The limits hold a run that cannot write cgroupfs. A run as root can
// leave them: a process of it that moves itself into another cgroup is out
// of the run's limits and out of reach of the run's kill (cgroup.kill), and
// outlives the run; one that writes its own memory limit away has none. A
// host run as a non-root user with a delegated cgroup v2 (a systemd unit
// or scope with Delegate=yes) runs its CLIs as that user, who cannot leave
// the delegated cgroup nor the limits systemd set on it, but owns the
// run's cgroups below it, so a CLI can still move out of its run's cgroup
// into another below the delegated one and rewrite its run's limits. Memory
// a run leaves in a tmpfs (/dev/shm) outlives it, charged to the host's
// cgroup until the file is deleted, and a run that fills /dev/shm past its
// memory limit gets its CLI OOM-killed rather than the tool. docs/limits.md
// (# What a run can still do) has the measurements.
//
// Every run and every turn is accounted, limits or not: Result.Resources
// holds its peak memory, CPU time and most processes at once, and what the
// limits did (OOM kills, forks refused). Where no cgroup controller holds
// the run (a user on a host without delegated cgroup v2 controllers, macOS,
// Windows), no limit can be enforced: a request for one fails with
// ErrUnsupported before anything starts, naming the limit, why and how to
// get it, and the figures are sampled from /proc (Resources.Sampled).
// Capabilities.Limits lists what this host enforces, and LimitsNote why
// not the rest and how usage is measured. A host that runs out of
// descriptors or processes fails the run before anything starts with a
// *LimitError for "descriptors" or "processes" naming the limit in force
// and how to raise it.
//
// A Budget (Options.Budget, one pointer shared by every Invoker of the
// process) bounds the runs at once and the memory they promise together:
// a run that does not fit waits, first come first served, visibly
// (KindQueued events, Result.Queued) and cancellably, before anything
// starts; with Budget.WaitRateLimits, a run that fails rate limited holds
// the backend's next runs back until the limit resets. Where it can, the
// kernel holds the Budget's memory sum too, so that runs that use more
// than they promise still cannot take the host. docs/limits.md says how to
// set a host up (root, a systemd service or user scope with Delegate=yes
// and Options.DelegateCgroup, Options.CgroupParent) and what each host
// gives.
//
// # Sandbox
//
// The permission level is enforced on the CLI's requests; Sandbox
// (Options.Sandbox, Request.Sandbox, SessionRequest.Sandbox) also has the
// kernel hold it on the run's filesystem: the CLI and every process it
// starts may write only where the level allows (its own configuration
// home and a private TMPDIR at ReadOnly; the working directory's existing
// entries but its configuration names at WorkspaceWrite), and cannot read
// the home directory beyond the CLI's own files. A sandboxed run cannot
// write the cgroup filesystem either, so a CLI running as root can no
// longer leave its limits. Mode "required" fails with ErrSandbox where
// the host cannot hold it; "available" runs without it there, and
// Result.Sandbox says which. Sandbox.Network adds a network ceiling: the
// run's tree in a network namespace whose only way out is a proxy the
// library runs, which lets through the run's model endpoint, its MCP
// servers and the hosts the rules name; every attempt is in
// Result.Connections, and a denied one is a KindWarning event. Where the
// run gets a mount namespace, the CLI's settings, memory and instruction
// files are held read-only; one that was missing when the run started
// cannot be, and one the run makes is a KindWarning event naming it.
// Capabilities.Sandbox says what this host holds; docs/sandbox.md what it
// costs.
//
// # Telemetry
//
// Runs record through the OpenTelemetry API only: Options.TracerProvider and
// Options.MeterProvider, or otel's global providers when they are nil. A
// program that installs no OpenTelemetry SDK records nothing, at the cost of
// a few small allocations per run; no SDK or exporter is imported here.
//
// Each Invoke is a span named "invoke_agent <cli>", a child of the span in
// its context; a session is a span "session <cli>" for its process, and each
// Session.Turn a span "invoke_agent <cli>" in the turn's context, linked to
// the session's. Their attributes follow the GenAI semantic conventions where
// they have a name (gen_ai.operation.name "invoke_agent",
// gen_ai.provider.name, gen_ai.agent.name, gen_ai.request.model,
// gen_ai.conversation.id for the session id, gen_ai.usage.input_tokens and
// output_tokens, error.type, process.exit.code) and are under clinvoke.*
// otherwise: clinvoke.cli, clinvoke.mode ("invoke", "turn", "session"),
// clinvoke.permission, clinvoke.containment, clinvoke.outcome,
// clinvoke.exit.signal, clinvoke.sweep.killed and clinvoke.sweep.survivors,
// and the resources used (Result.Resources: clinvoke.memory.peak in bytes,
// clinvoke.cpu.time in seconds, clinvoke.processes.peak,
// clinvoke.resources.sampled) with, for a run a limit ended,
// clinvoke.limit.resource ("memory", "processes", "descriptors") and
// clinvoke.limit.max.
// Events mark the start (process.pid), the first event, each tool call
// (gen_ai.tool.name), the decision to stop (clinvoke.stop with its reason),
// each step of the ladder (clinvoke.interrupt, clinvoke.terminate,
// clinvoke.kill; a step whose signal the CLI ignores, its grace not
// waited, is marked clinvoke.signal.ignored) and the sweep; a run that waits for the
// Budget has an event clinvoke.queued when the wait starts and at each
// change (clinvoke.queue.ahead; at a rate limit's gate clinvoke.queue.gate
// and clinvoke.queue.until) and clinvoke.admitted when it ends
// (clinvoke.queue.waited in seconds, clinvoke.queue.admitted false when the
// context ended it), both with clinvoke.queue "budget". A session's wait is
// on its process span.
//
// clinvoke.outcome says how a run or turn ended: "answered" (nil error),
// "cancelled" and "deadline" (the caller's context), "timeout" (first-event
// or idle timeout), "rate_limited", "auth_required", "limit" (MaxTurns,
// MaxBudgetUSD), "resource_limit" (ErrResourceLimit), "rejected" (nothing started: invalid request, not
// installed, containment unavailable, a turn already running), "panic"
// (OnEvent panicked) and "failed" (anything else: the CLI's own failure, an
// exit status, no result); a session's process span ends "closed".
//
// The metrics: clinvoke.runs.started, clinvoke.runs.ended (by
// clinvoke.outcome) and clinvoke.runs.active, by clinvoke.cli and
// clinvoke.mode; clinvoke.sessions.active; the histograms clinvoke.run.duration,
// clinvoke.run.first_event and clinvoke.stop.duration (from the decision to
// stop to the whole tree gone, by clinvoke.stop.reason), in seconds; the
// counters clinvoke.sweep.processes (killed by the sweep) and
// clinvoke.sweep.survivors (alive after SIGKILL: it must stay 0);
// gen_ai.client.token.usage by gen_ai.token.type, and clinvoke.cost in US
// dollars where the CLI reports one; the histograms clinvoke.run.memory.peak
// (bytes) and clinvoke.run.cpu.time (seconds) of each run of Invoke and each
// session's whole life; for the Budget, the histogram clinvoke.run.queued
// (seconds waited, by clinvoke.queue.admitted) and the up/down counter
// clinvoke.runs.waiting, with clinvoke.queue "budget" (mcpadapter records
// the waits for its slots in the same instruments, with "server" and
// "identity").
//
// The CLI receives the span's context in the W3C Trace Context variables
// TRACEPARENT and TRACESTATE (replacing any the host inherited; Options.Env
// and Request.Env may set their own), and its tools inherit them. A CLI
// that reads them and exports OpenTelemetry (Codex and Claude Code, once
// their telemetry is on; see docs/cli-facts.md) continues the caller's
// trace. The engine's log records carry trace_id and span_id.
//
// # Testing
//
// Package invoker/invokertest scripts a stand-in for each CLI (answers,
// streamed text, tool calls, a stall, a failure, a session of several
// turns) that the real backends run as they run the CLI, with no CLI
// installed and no network: see its Agent. Its Run checks a backend of
// your own against the contract.
package invoker
