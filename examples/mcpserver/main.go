// Command mcpserver is an MCP server that lets an AI client delegate work to
// the Codex, Gemini and Claude Code CLIs installed on this machine, with the
// cancellation guarantees of clinvoke: cancelling a tool call kills the
// agent and every process it started, and the server keeps serving.
//
// It shows how little a Go MCP server needs: one mcpadapter.Register call
// with the backends, and a call of the returned Tools' Shutdown when the
// server stops, which cancels the runs in flight and waits for their
// records.
//
// Run it over stdio (the default; how MCP clients start local servers):
//
//	go run ./examples/mcpserver -root ~/src
//	go run ./examples/mcpserver -cli codex,claude -root ~/src -max 2 -max-permission workspace-write
//
// or over streamable HTTP:
//
//	go run ./examples/mcpserver -http 127.0.0.1:8700 -root ~/src
//
// Each CLI gets two tools, NAME (one agent turn) and NAME_parallel (many
// independent turns at once); see package mcpadapter. By default the CLIs
// whose binary is on PATH are served (all three when none is found, so that
// their calls say how to install them). A binary elsewhere is named with
// -codex-bin, -gemini-bin or -claude-bin.
//
// Without -root, the current directory is the one root. MCP clients often
// start stdio servers in / or the home directory, so the server refuses to
// start when the current directory is / and no -root is given (pass -root /
// to allow every directory explicitly), and warns on standard error when a
// root is / or the home directory.
//
// In stdio mode standard output carries only the protocol; logs go to
// standard error.
//
// To try the server with no CLI, no key and no network, -fake-agent serves
// scripted stand-ins of the CLIs (invokertest.Agent, this program started
// again) through the real backends: each call reports a session, runs a
// shell tool, streams progress for two seconds and answers.
//
//	go run ./examples/mcpserver -fake-agent -http 127.0.0.1:8700 -root /tmp
//
// # Shutdown
//
// The first signal (SIGINT, SIGTERM or SIGHUP), standard input reaching end of file
// (stdio), or an error of the HTTP listener starts one orderly shutdown:
//
//  1. The server stops accepting: over HTTP it closes its listener, so
//     that a load balancer sends new requests to another replica.
//  2. It shuts the tools down (mcpadapter.Tools.Shutdown): calls still
//     arriving on open connections are refused, and every run in flight
//     is cancelled: its CLI gets SIGINT, then SIGTERM after
//     -shutdown-grace, then SIGKILL 100 ms later, and its whole process
//     tree is swept. The default (200 ms) reaps a run well within 400 ms,
//     even a CLI that ignores both signals: an MCP host that stops its
//     server sends SIGKILL 500 ms after its first signal (Claude Code
//     does), and whatever is still ours by then dies without its record.
//     A client's cancel of one call walks the longer ladder of
//     -interrupt-grace and -terminate-grace, which gives the CLI time to
//     record its turn. Shutdown returns once every run is reaped and
//     recorded: its transcript line (-transcript) and log record are
//     written, and the warm sessions (-warm) are closed. Signals do not
//     shorten this wait, which the host's SIGKILL ends anyway; it is
//     bounded by recordBound in case a run never ends.
//  3. The calls are answered: an isError result holding the partial text
//     and the session id. The server waits answerGrace for the answers to
//     be written (HTTP: for the connections to finish), then exits 0.
//
// Signals after the first only shorten the wait of step 3 (to 100 ms): the host
// repeating itself (Claude Code sends SIGINT, SIGINT at +22 ms, SIGTERM at
// +100 ms) never cuts a run's sweep or its record short. A run's transcript
// gets a first line as soon as its session id is known, so even a run cut
// off by SIGKILL can be resumed.
//
// # Approvals
//
// An agent CLI that can ask before it acts (invoker.Capabilities.Approve)
// asks about commands, file changes and MCP tool calls; -approvals says who
// answers (mcpadapter.Options.Approvals). allow, the default, asks nobody:
// the call's permission level, within -max-permission, decides, as for the
// CLIs that cannot ask. deny refuses every such request, and the model is
// told. elicit forwards each request to the MCP client as an elicitation,
// which its user answers; a client that did not declare elicitation (and
// one on protocol 2026-07-28, which takes no request from the server
// during a call) gets -approval-fallback, deny by default:
//
//	go run ./examples/mcpserver -root ~/src -approvals elicit -max-permission workspace-write
//
// Which hosts declare elicitation, and what they do with one when run
// headless, is measured in docs/approvals.md. The server logs each
// client's declaration ("client initialized", elicitation=form|url|none)
// and each request and its answer ("approval").
//
// # Telemetry
//
// The server installs the OpenTelemetry SDK the flags ask for and hands it
// to the library in invoker.Options and mcpadapter.Options:
//
//	go run ./examples/mcpserver -http 127.0.0.1:8700 -metrics 127.0.0.1:9464 -otlp http://127.0.0.1:4318/v1/traces
//
// -metrics ADDR serves the runs' metrics in Prometheus text on /metrics and
// "ok" on /healthz, on a listener of their own, or on the MCP listener when
// ADDR is the -http address; either way behind the same access checks as
// the MCP endpoint (with -auth-tokens, a scrape needs a token); -otlp URL, or the standard OTEL_EXPORTER_OTLP_ENDPOINT
// and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables, exports the traces over
// OTLP/HTTP. A tool call continues the client's trace (from the request's
// _meta or its HTTP headers) and each CLI gets its run's span in
// TRACEPARENT. Log records carry trace_id and span_id. Without these flags
// nothing is recorded. docs/observability.md lists the metrics and what
// to alert on.
//
// # HTTP
//
// With -http the server speaks streamable HTTP. A call is cancelled (its
// run's tree killed, the call recorded as cancelled) when its client goes
// away: the connection drops, the client deletes its session, or the
// session is idle for -session-timeout.
//
// -max-request bounds a request, whose prompt is part of it: 16 MiB by
// default. Over HTTP a larger body gets HTTP 413 with a message saying so;
// over stdio the SDK's transport ends the session on a longer line (the
// client sees its connection close), so keep the limit above what clients
// send.
//
// # On a network
//
// Over HTTP the server runs agents for whoever it lets in, so it refuses
// to listen beyond this machine (an address other than loopback, such as
// 0.0.0.0 or a LAN address, for -http or -metrics) unless it authenticates
// its clients:
//
//	printf 'alice:%s\n' "$(openssl rand -hex 32)" > tokens && chmod 600 tokens
//	go run ./examples/mcpserver -http 0.0.0.0:8700 -auth-tokens tokens -max-per-identity 2 -root ~/src
//
// -auth-tokens FILE requires a bearer token of the file (one NAME:TOKEN a
// line; a name may have several tokens, so a token is rotated by adding a
// line with the new one and removing the old line; the file is read again
// when it changes, best replaced whole with a rename, and a token removed
// stops the calls in flight it authorized). A file that does not parse
// stops the server at start; one that replaces a good file is not taken
// (the server logs why, and with -metrics clinvoke_tokens_file_rejected
// is 1 until a good file replaces it).
// -auth-token-env VAR takes one token (named VAR) or NAME:TOKEN lines from
// the environment. Clients send "Authorization: Bearer TOKEN"; a token in
// the URL is refused. -oauth-introspect URL accepts OAuth access tokens
// instead (the resource server of the MCP authorization specification):
// the authorization server's introspection endpoint (RFC 7662) must say a
// token is active and issued for -oauth-resource (this server's URL as
// clients reach it); -oauth-issuer names the authorization server in the
// protected resource metadata the server publishes, -oauth-client-id and
// -oauth-client-secret-env authenticate the server to the endpoint, and
// -oauth-scope requires scopes. Everything the server serves is covered:
// POST, the GET event stream, DELETE, and /metrics and /healthz, whether
// -metrics names the -http address or a listener of its own.
//
// The identity of a call (the token's name, the OAuth subject) is in its
// transcript lines, log records and span; -max-per-identity bounds the
// runs of one identity (its further calls wait), so that one client cannot
// take the -max slots; a shutdown logs the calls it cancels by identity.
// Browser pages are refused unless their Origin is a loopback one or
// given with -allow-origin. -insecure-no-auth serves without
// authentication on any address, with a warning at start: only behind
// something that authenticates for it.
//
// With -stateless, each request is served on its own: no Mcp-Session-Id,
// no state kept between requests, a call lives exactly as long as its POST.
// Any number of replicas can then sit behind any HTTP load balancer
// (docs/serving.md: "Scaling out"). Progress notifications still reach the client,
// on the call's own response stream; requests from the server to the
// client (sampling, elicitation) are not possible in this mode. A stateful
// server behind a load balancer needs sticky routing by the Mcp-Session-Id
// header instead.
//
// # Conformance
//
// -conformance-tools (with -http, without -stateless) adds the test tools
// of the official MCP conformance suite (@modelcontextprotocol/conformance)
// to the agents' tools: test_reconnection closes the SSE stream of its call
// (SEP-1699) and answers once the client has resumed it with Last-Event-ID,
// which shows a call's answer surviving a dropped stream. The suite's
// server-sse-polling scenario calls it. It is off by default: the tools are
// for testing the server, not for the clients of agents.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// backends maps a CLI's name to its constructor.
var backends = map[string]func(...invoker.Options) invoker.Invoker{
	"codex":  codex.New,
	"gemini": gemini.New,
	"claude": claude.New,
}

var order = []string{"codex", "gemini", "claude"}

// The server's defaults.
const (

	// defaultMaxRequest is the largest request: the default of the SDK's
	// stdio transport (mcp.DefaultMaxLineLength), also applied to HTTP
	// bodies (where the SDK's default is 4 MiB), so that a prompt one
	// transport takes the other takes too.
	defaultMaxRequest = mcp.DefaultMaxLineLength

	// defaultSessionTimeout closes an HTTP session that has made no
	// request for this long, cancelling its calls. A call in flight keeps
	// its session open (the SDK pauses the timer during a POST).
	defaultSessionTimeout = 10 * time.Minute

	// recordBound bounds step 2 of a shutdown, the wait for the runs to be
	// reaped and recorded, in case a run never ends (a bug): far above any
	// stop ladder.
	recordBound = 30 * time.Second

	// answerGrace bounds step 3, the wait for the calls' answers to be
	// written; a later signal cuts it short.
	answerGrace = 2 * time.Second

	// hurriedGrace is what a signal during the shutdown leaves of
	// answerGrace.
	hurriedGrace = 100 * time.Millisecond
)

func main() {
	if os.Getenv(standInVar) != "" {
		invokertest.RunAgent() // a stand-in agent of -fake-agent: this program, started again
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		clis           = flag.String("cli", "", "comma-separated CLIs to serve: codex,gemini,claude (default: those on PATH)")
		httpAddr       = flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
		stateless      = flag.Bool("stateless", false, "with -http: serve every request on its own, without sessions, so that replicas can sit behind any load balancer")
		maxRequest     = flag.Int64("max-request", defaultMaxRequest, "largest JSON-RPC request in bytes, a prompt included: an HTTP body, or a line on stdin; -1 means no limit")
		sessionTimeout = flag.Duration("session-timeout", defaultSessionTimeout, "with -http: close a session idle for this long, cancelling its calls (0: never)")
		maxRuns        = flag.Int("max", 0, fmt.Sprintf("runs executing at once across all calls; 0 means %d, -1 no limit", mcpadapter.DefaultMaxConcurrent))
		maxTasks       = flag.Int("max-tasks", 0, fmt.Sprintf("tasks per parallel call; 0 means %d", mcpadapter.DefaultMaxTasks))
		perm           = flag.String("permission", "read-only", "default permission: read-only, workspace-write or unlimited")
		maxPerm        = flag.String("max-permission", "workspace-write", "highest permission a call may ask for")
		transcript     = flag.String("transcript", "", "append JSON lines about every run to this file: one when its session id is known, one when it ends")
		idle           = flag.Duration("idle-timeout", 0, "stop a run whose CLI prints nothing for this long (0: the library's default, 15m; negative: no limit)")
		interruptGrace = flag.Duration("interrupt-grace", time.Second, "how long the CLI of a call its client cancelled has to exit after SIGINT before SIGTERM (0: no SIGINT)")
		terminateGrace = flag.Duration("terminate-grace", 2*time.Second, "how long it has after SIGTERM before SIGKILL and the sweep of its tree (0: no SIGTERM)")
		shutdownGrace  = flag.Duration("shutdown-grace", 200*time.Millisecond, "during a shutdown: how long a run's CLI has to exit after SIGINT before SIGTERM (then 100 ms before SIGKILL)")
		progress       = flag.Duration("progress", 0, "shortest time between progress notifications (0: default)")
		heartbeat      = flag.Duration("heartbeat", 0, "heartbeat after this much silence (0: default)")
		warm           = flag.Int("warm", 0, "keep up to this many conversations' CLIs running between the calls that continue them (each holds 150-400 MiB); 0: none")
		warmIdle       = flag.Duration("warm-idle", mcpadapter.DefaultWarmIdleTimeout, "with -warm: close a warm conversation's CLI after this long without a call")
		verbose        = flag.Bool("v", false, "log debug details, including the SDK's")
		metricsAddr    = flag.String("metrics", "", "serve Prometheus metrics on http://ADDR/metrics and a liveness probe on /healthz (such as 127.0.0.1:9464)")
		sandboxMode    = flag.String("sandbox", "available", "the filesystem sandbox of the runs (docs/sandbox.md): available (held by the kernel where the host can; codex, whose own sandbox cannot run inside it, is held with its own sandbox off where the network part holds too, below Unlimited with the network rules none unless -network says more (the command MCP servers it starts too), else it runs without), required (every CLI; a run fails where the host cannot hold it, a codex run below Unlimited where the network part does not hold) or off")
		network        = flag.String("network", "", "with -sandbox available or required: the runs' network rules (docs/sandbox.md, Network): none (only the CLI's model endpoint and its MCP servers), or a comma-separated list of the hosts the runs may reach besides them (host, host:port, *.domain); empty (the default): no network rules, as a server whose agents fetch from the web expects. Held for root, and for other users where unprivileged user namespaces are allowed; under available, where the host can")
		approvals      = flag.String("approvals", "allow", "who answers the agents' requests to run commands, edit files or call MCP tools (CLIs that can ask): allow (the permission level decides, nobody is asked), deny (refuse them all), or elicit (ask the MCP client's user)")
		fallback       = flag.String("approval-fallback", "deny", "with -approvals elicit: allow or deny the requests of a client that cannot be asked (no elicitation)")
		fake           = flag.Bool("fake-agent", false, "serve scripted stand-ins of the CLIs (all three unless -cli says otherwise): try the server with no CLI, no key and no network")
		conformance    = flag.Bool("conformance-tools", false, "with -http: also serve the test tools of the MCP conformance suite (@modelcontextprotocol/conformance), such as test_reconnection, which closes its call's SSE stream and answers on the resumed one; for testing the server, not for clients")
		otlpURL        = flag.String("otlp", "", "export traces over OTLP/HTTP to this URL (such as http://127.0.0.1:4318/v1/traces); the OTEL_EXPORTER_OTLP_* variables work too")
		roots          []string
		binaries       = map[string]*string{}
		access         accessFlags
	)
	access.register(flag.CommandLine)
	var limits limitFlags
	limits.register(flag.CommandLine)
	var tasks taskFlags
	tasks.register(flag.CommandLine)
	var acpAgents []acp.Agent
	flag.Func("acp", "serve an Agent Client Protocol agent as a tool: NAME=COMMAND, such as -acp 'opencode=opencode acp' (repeatable; with -acp and no -cli, only the ACP agents are served)", func(s string) error {
		name, command, ok := strings.Cut(s, "=")
		args := strings.Fields(command)
		if !ok || name == "" || len(args) == 0 {
			return fmt.Errorf("-acp %q: want NAME=COMMAND, such as 'opencode=opencode acp'", s)
		}
		acpAgents = append(acpAgents, acp.Agent{Name: name, Command: args})
		return nil
	})
	flag.Func("root", "directory under which workdirs must lie (repeatable; default: the current directory, unless it is /)", func(s string) error {
		roots = append(roots, s)
		return nil
	})
	for _, name := range order {
		binaries[name] = flag.String(name+"-bin", "", "path of the "+name+" binary (default: "+name+" on PATH)")
	}
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: mcpserver [flags]\n\nServes agent CLIs as MCP tools over stdio, or HTTP with -http.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	}
	if *httpAddr == "" && *stateless {
		return errors.New("-stateless applies to HTTP: add -http ADDR")
	}
	if *conformance && (*httpAddr == "" || *stateless) {
		return errors.New("-conformance-tools needs resumable streams: add -http ADDR, without -stateless")
	}

	// Logs go to stderr: in stdio mode stdout is the protocol channel.
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(traceHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})})

	// -metrics with the address of -http serves the metrics on the MCP
	// listener, behind the same access checks.
	sharedMetrics := *metricsAddr != "" && *metricsAddr == *httpAddr
	var listeners []string
	if *httpAddr != "" {
		listeners = append(listeners, *httpAddr)
	}
	if *metricsAddr != "" && !sharedMetrics {
		listeners = append(listeners, *metricsAddr)
	}
	resolveCtx, cancelResolve := context.WithTimeout(context.Background(), 10*time.Second)
	httpAccess, err := access.httpAccess(resolveCtx, listeners, logger)
	cancelResolve()
	if err != nil {
		return err
	}

	tel, err := startTelemetry(*metricsAddr, *otlpURL, sharedMetrics, logger)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		// Flush the last spans and stop the metrics endpoint once the
		// runs are reaped and recorded.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := tel.close(ctx); err != nil {
			logger.Warn("telemetry shutdown", "err", err)
		}
	}()
	if err := observeTokens(tel.mp, httpAccess.Tokens); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}

	explicit := len(roots) > 0
	if !explicit {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		roots = []string{wd}
	}
	for i, r := range roots {
		roots[i] = expandHome(r)
	}
	home, _ := os.UserHomeDir()
	warnings, err := checkRoots(roots, explicit, home)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}

	if err := checkPermissions(*perm, *maxPerm); err != nil {
		return err
	}
	if err := checkApprovals(*approvals, *fallback); err != nil {
		return err
	}
	if err := limits.check(); err != nil {
		return err
	}
	limitOpts := limits.options()
	switch *sandboxMode {
	case "available", "required", "off":
	default:
		return fmt.Errorf("-sandbox %q: use available, required or off", *sandboxMode)
	}
	netRules := networkRules(*network)
	if netRules != nil && *sandboxMode == "off" {
		return fmt.Errorf("-network %q with -sandbox off: the network rules hold only in the sandbox; add -sandbox available or required", *network)
	}
	var names []string
	switch {
	case *fake && *clis == "":
		names = order
	case *fake:
		if names, err = selectCLIs(*clis, nil, logger); err != nil {
			return err
		}
	case len(acpAgents) == 0 || *clis != "":
		if names, err = selectCLIs(*clis, binaries, logger); err != nil {
			return err
		}
	}
	var invokers []invoker.Invoker
	options := func(name string) invoker.Options {
		return invoker.Options{
			Limits:         limitOpts.Limits,
			Sandbox:        invoker.Sandbox{Mode: *sandboxMode, Network: netRules},
			Budget:         limitOpts.Budget, // one Budget for every CLI: the host's
			DelegateCgroup: limitOpts.DelegateCgroup,
			Logger:         logger.With("cli", name),
			TracerProvider: tel.tp,
			MeterProvider:  tel.mp,
			IdleTimeout:    *idle,
			InterruptGrace: grace(*interruptGrace),
			TerminateGrace: grace(*terminateGrace),
			// The runs a shutdown stops walk a short ladder, so that they
			// are reaped before the host kills the server; a client's
			// cancel keeps the time a CLI needs to record its turn.
			StopGraces: func(cause error) (time.Duration, time.Duration, bool) {
				return grace(*shutdownGrace), 100 * time.Millisecond, errors.Is(cause, mcpadapter.ErrShuttingDown)
			},
		}
	}
	for _, name := range names {
		opts := options(name)
		opts.Binary = *binaries[name]
		if *fake {
			if opts, err = fakeAgent(name, opts); err != nil {
				return err
			}
		}
		invokers = append(invokers, flagWorded{Invoker: backends[name](opts), bin: *binaries[name]})
	}
	for _, a := range acpAgents {
		invokers = append(invokers, acp.New(a, options(a.Name)))
		names = append(names, a.Name)
	}
	if len(invokers) > 0 {
		if err := limits.checkHost(invokers[0]); err != nil {
			return err
		}
	}

	sd := newShutdown(logger)
	// SIGHUP too: a terminal's hang-up reaches the host's whole process
	// group, which holds this server under Claude Code and Gemini CLI.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	go func() {
		for sig := range signals {
			sd.signal(sig)
		}
	}()
	// A host that goes away closes our stdout and stderr: without a
	// handler, the next write to them (an answer, a log line) would kill
	// the server with SIGPIPE before its runs are recorded. Handled, the
	// write fails with EPIPE instead. (signal.Ignore would be inherited by
	// the CLIs the server starts; a handled signal is reset for them.)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	serverOpts := &mcp.ServerOptions{
		Instructions: "Tools that delegate coding tasks to agent CLIs (" + strings.Join(names, ", ") + ") working in directories of this machine. " +
			"Each call is one agent turn; pass session_id back to continue a conversation.",
		InitializedHandler: logClient(logger),
	}
	if *verbose {
		serverOpts.Logger = logger.With("component", "mcp")
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke", Title: "clinvoke agent CLIs", Version: "v0.1.0"}, serverOpts)
	taskOpts, err := tasks.options()
	if err != nil {
		return err
	}
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		MaxConcurrent:     *maxRuns,
		MaxTasks:          *maxTasks,
		Roots:             roots,
		DefaultPermission: invoker.Permission(*perm),
		MaxPermission:     invoker.Permission(*maxPerm),
		ProgressInterval:  *progress,
		HeartbeatInterval: *heartbeat,
		TranscriptPath:    expandHome(*transcript),
		WarmSessions:      mcpadapter.WarmSessions{MaxSessions: *warm, IdleTimeout: *warmIdle},
		Logger:            logger,
		TracerProvider:    tel.tp,
		MeterProvider:     tel.mp,
		Approvals:         mcpadapter.ApprovalPolicy(*approvals),
		ApprovalFallback:  mcpadapter.ApprovalPolicy(*fallback),

		// Who may call over HTTP, and how many runs each may have.
		HTTPAccess:               httpAccess,
		MaxConcurrentPerIdentity: access.maxPerIdentity,

		// Tool calls a client augments with a task: their lifetime.
		Tasks: taskOpts,
	}, invokers...)
	if err != nil {
		return err
	}
	tel.serveMetrics(tools.Handler)
	var ct *conformanceTools
	if *conformance {
		ct = newConformanceTools()
		ct.register(server)
	}

	if *httpAddr != "" {
		hc := httpConfig{
			addr:           *httpAddr,
			stateless:      *stateless,
			maxBody:        *maxRequest,
			sessionTimeout: *sessionTimeout,
			auth:           authSummary(httpAccess),
			conformance:    ct,
		}
		if sharedMetrics {
			hc.metrics = tel.metrics
		}
		return serveHTTP(sd, server, tools, hc, names, roots, logger)
	}
	logger.Info("serving", "clis", names, "roots", roots, "transport", "stdio")
	return serveStdio(sd, server, tools, int(*maxRequest))
}

// A shutdown is the one orderly stop of the server (see the package
// documentation): the first signal, the end of standard input or a
// listener's error starts it, later signals hurry its last step.
type shutdown struct {
	ctx   context.Context // done once the shutdown started
	begin context.CancelCauseFunc
	log   *slog.Logger

	mu        sync.Mutex
	hurried   chan struct{} // closed by a signal after the first
	hurryOnce sync.Once
}

func newShutdown(log *slog.Logger) *shutdown {
	ctx, begin := context.WithCancelCause(context.Background())
	return &shutdown{ctx: ctx, begin: begin, log: log, hurried: make(chan struct{})}
}

// start starts the shutdown, if it has not started yet.
func (s *shutdown) start(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.log.Info("stopping: cancelling the runs in flight, then recording and answering their calls", "reason", reason)
	s.begin(errors.New(reason))
}

// signal starts the shutdown, or hurries it when it has started.
func (s *shutdown) signal(sig os.Signal) {
	s.mu.Lock()
	started := s.ctx.Err() != nil
	s.mu.Unlock()
	if !started {
		s.start("signal " + sig.String())
		return
	}
	s.hurryOnce.Do(func() {
		s.log.Info("signal during the shutdown: not waiting for answers once the runs are recorded", "signal", sig)
		close(s.hurried)
	})
}

// drain is step 2: it shuts the tools down, which cancels the runs in
// flight, and waits until every call has been recorded, its run reaped.
// Signals do not shorten it.
func (s *shutdown) drain(tools *mcpadapter.Tools) {
	ctx, cancel := context.WithTimeout(context.Background(), recordBound)
	defer cancel()
	if err := tools.Shutdown(ctx); err != nil {
		s.log.Error("runs still not ended; exiting without their records", "calls", tools.Active(), "after", recordBound)
		return
	}
	s.log.Info("every run reaped and recorded")
}

// answerContext returns the context of step 3: done after answerGrace, or
// hurriedGrace after a signal after the first (or from now, if one came
// already). The answers are ready by then, their handlers have returned:
// writing them takes microseconds, which even a hurried host can wait.
func (s *shutdown) answerContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), answerGrace)
	go func() {
		select {
		case <-s.hurried:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(hurriedGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// serveStdio serves the protocol on standard input and output until the
// shutdown.
func serveStdio(sd *shutdown, server *mcp.Server, tools *mcpadapter.Tools, maxLine int) error {
	// Not sd.ctx: the session must outlive the start of the shutdown, so
	// that the calls it cancels are answered (Server.Run with a cancelled
	// context would close the session before they are).
	var answers pending
	ss, err := server.Connect(context.Background(), answers.transport(tools.Transport(&mcp.StdioTransport{MaxLineLength: maxLine})), nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		// The client closed standard input. The SDK has cancelled the
		// calls of the session; nobody is left to answer.
		sd.start("standard input closed")
		sd.drain(tools)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return err
	case <-sd.ctx.Done():
	}
	// Nothing to stop accepting: the one client's calls are refused.
	sd.drain(tools)
	ctx, cancel := sd.answerContext()
	defer cancel()
	if err := answers.wait(ctx); err != nil {
		sd.log.Warn("exiting before every call was answered")
		return nil
	}
	closed := make(chan error, 1)
	go func() { closed <- ss.Close() }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// httpConfig holds the flags of HTTP mode.
type httpConfig struct {
	addr           string
	stateless      bool
	maxBody        int64
	sessionTimeout time.Duration
	auth           string            // how clients authenticate, for the log
	metrics        http.Handler      // /metrics and /healthz on this listener, or nil
	conformance    *conformanceTools // -conformance-tools, or nil
}

func serveHTTP(sd *shutdown, server *mcp.Server, tools *mcpadapter.Tools, hc httpConfig, names, roots []string, logger *slog.Logger) error {
	opts := &mcp.StreamableHTTPOptions{
		Stateless:           hc.stateless,
		MaxRequestBodyBytes: hc.maxBody,
	}
	if !hc.stateless {
		opts.SessionTimeout = hc.sessionTimeout
		// Resumable streams: a client whose SSE stream drops resumes it
		// with Last-Event-ID and gets the progress and the result it
		// missed. (Stateless replicas have no session to resume.)
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	var handler http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	if hc.conformance != nil {
		handler = hc.conformance.handler(handler)
	}
	mux := http.NewServeMux()
	mux.Handle("/", limitBody(handler, hc.maxBody))
	if hc.metrics != nil {
		mux.Handle("GET /metrics", hc.metrics)
		mux.Handle("GET /healthz", hc.metrics)
	}
	var posts pending
	srv := &http.Server{
		// The tools' handler lets in only the clients the access flags
		// allow, on every path, and cancels a call whose request ended
		// before its answer, which the SDK does not do.
		Handler:           posts.handler(tools.Handler(mux)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", hc.addr)
	if err != nil {
		return err
	}
	logger.Info("serving", "clis", names, "roots", roots, "transport", "http://"+ln.Addr().String(), "stateless", hc.stateless, "auth", hc.auth)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
		sd.start("the listener failed: " + serveErr.Error())
	case <-sd.ctx.Done():
	}
	// Stop accepting connections: new clients, and a load balancer's
	// requests, go elsewhere. The connections open stay open, to be
	// answered; srv.Shutdown closes them below.
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		logger.Warn("closing the listener", "error", err)
	}
	// Calls still arriving are refused from now on, and the runs in
	// flight stopped. Record them all before anything else.
	logCalls(logger, tools.Calls())
	sd.drain(tools)
	ctx, cancel := sd.answerContext()
	defer cancel()
	if err := posts.wait(ctx); err != nil {
		logger.Warn("exiting before every call was answered")
	}
	// Closing the sessions ends their open GET streams, which would
	// otherwise hold Shutdown until the grace ends.
	for ss := range server.Sessions() {
		go ss.Close()
	}
	// The listener is closed already: its second close is no failure.
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
		logger.Warn("closing the connections left", "error", err)
		srv.Close()
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// limitBody answers a request whose declared body is over max with HTTP
// 413 and a message that says what to do, before the SDK reads it. (The
// SDK enforces the same limit while it reads a body of unknown length, and
// then answers "request body exceeds N bytes".)
func limitBody(h http.Handler, max int64) http.Handler {
	if max < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			http.Error(w, fmt.Sprintf("request body of %d bytes is over this server's limit of %d bytes (mcpserver -max-request): "+
				"send a shorter prompt, or write long input to a file under the workdir and name it in the prompt", r.ContentLength, max),
				http.StatusRequestEntityTooLarge)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkRoots returns warnings for roots that allow a great deal (/ or the
// home directory), and an error when / is the root only because it is the
// current directory: MCP clients start stdio servers there, and a server
// that silently accepts every workdir is not what -root's default means.
func checkRoots(roots []string, explicit bool, home string) (warnings []string, err error) {
	canon := func(p string) string {
		p = filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	if home != "" {
		home = canon(home)
	}
	for _, r := range roots {
		switch c := canon(r); {
		case c == "/" && !explicit:
			return nil, errors.New("the current directory is /, the default root, which would allow a workdir anywhere: " +
				"restrict workdirs with -root DIR (repeatable), or pass -root / to allow every directory")
		case c == "/":
			warnings = append(warnings, "root / allows a workdir anywhere on this machine; restrict workdirs with -root DIR")
		case c == home:
			how := "restrict workdirs with -root DIR"
			if !explicit {
				how = "it is the current directory, the default root; " + how
			}
			warnings = append(warnings, fmt.Sprintf("root %s is the home directory: it allows a workdir anywhere in it, "+
				"dotfiles and credentials included; %s", r, how))
		}
	}
	return warnings, nil
}

// selectCLIs returns the CLIs to serve: those named by list, or else those
// whose binary is found, or else all of them. A nil binaries (stand-in
// agents) checks only the names of list.
func selectCLIs(list string, binaries map[string]*string, logger *slog.Logger) ([]string, error) {
	if list != "" {
		var names []string
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			if _, ok := backends[n]; !ok {
				return nil, fmt.Errorf("-cli: unknown CLI %q (want codex, gemini or claude)", n)
			}
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
			if binaries == nil {
				continue // stand-ins: nothing to look for
			}
			bin := n
			if *binaries[n] != "" {
				bin = *binaries[n]
			}
			if _, err := exec.LookPath(bin); err != nil {
				logger.Warn("CLI named with -cli is not installed; its calls will fail and say how to install it", "cli", n, "binary", bin)
			}
		}
		return names, nil
	}
	var found []string
	for _, n := range order {
		bin := n
		if *binaries[n] != "" {
			bin = *binaries[n]
		}
		if _, err := exec.LookPath(bin); err == nil {
			found = append(found, n)
		} else {
			logger.Info("CLI not found; not served", "cli", n, "binary", bin)
		}
	}
	if len(found) == 0 {
		logger.Warn("no agent CLI found on PATH; serving all, their calls will say how to install them")
		return order, nil
	}
	return found, nil
}

// expandHome replaces a leading "~/" by the home directory, for paths
// given in client configuration files where no shell expands them.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return home + "/" + rest
		}
	}
	return p
}

// grace turns a grace flag into an invoker.Options grace: 0 on the command
// line skips the step, where 0 in Options means the default.
func grace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// networkRules reads the -network flag: nil when empty, else its
// comma-separated rules (checked by the Invoker at each run).
func networkRules(flag string) []string {
	var rules []string
	for _, r := range strings.Split(flag, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rules = append(rules, r)
		}
	}
	return rules
}
