// Command mcpserver is an MCP server that lets an AI client delegate work to
// the Codex, Gemini and Claude Code CLIs installed on this machine, with the
// cancellation guarantees of clinvoke: cancelling a tool call kills the
// agent and every process it started, and the server keeps serving.
//
// It shows how little a Go MCP server needs: one mcpadapter.Register call
// with the backends, and a server-lifetime context so that stopping the
// server cancels the runs in flight.
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
// standard error. The first Ctrl-C (or SIGTERM) cancels the runs in flight,
// answers their calls and exits once they are reaped. A second one stops
// waiting for the calls to be answered: the server exits (status 130) as
// soon as the runs' process trees are killed, or after exitBound if that
// takes longer. A third one exits at once. Exiting while a run is being
// stopped is a last resort: on Linux the CLIs die with the server (parent
// death signal), but processes their tools moved to a session of their own
// survive, which only the run's own sweep kills.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// backends maps a CLI's name to its constructor.
var backends = map[string]func(...invoker.Option) invoker.Invoker{
	"codex":  codex.New,
	"gemini": gemini.New,
	"claude": claude.New,
}

var order = []string{"codex", "gemini", "claude"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		clis       = flag.String("cli", "", "comma-separated CLIs to serve: codex,gemini,claude (default: those on PATH)")
		httpAddr   = flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
		maxRuns    = flag.Int("max", 0, fmt.Sprintf("runs executing at once across all calls; 0 means %d, -1 no limit", mcpadapter.DefaultMaxConcurrent))
		maxTasks   = flag.Int("max-tasks", 0, fmt.Sprintf("tasks per parallel call; 0 means %d", mcpadapter.DefaultMaxTasks))
		perm       = flag.String("permission", "read-only", "default permission: read-only, workspace-write or unlimited")
		maxPerm    = flag.String("max-permission", "workspace-write", "highest permission a call may ask for")
		transcript = flag.String("transcript", "", "append one JSON line per finished run to this file")
		idle       = flag.Duration("idle-timeout", 0, "stop a run whose CLI prints nothing for this long (0: no limit)")
		progress   = flag.Duration("progress", 0, "shortest time between progress notifications (0: default)")
		heartbeat  = flag.Duration("heartbeat", 0, "heartbeat after this much silence (0: default)")
		verbose    = flag.Bool("v", false, "log debug details, including the SDK's")
		roots      []string
		binaries   = map[string]*string{}
	)
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

	// Logs go to stderr: in stdio mode stdout is the protocol channel.
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

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

	names, err := selectCLIs(*clis, binaries, logger)
	if err != nil {
		return err
	}
	var (
		invokers []invoker.Invoker
		runs     = new(inflight)
	)
	for _, name := range names {
		opts := []invoker.Option{invoker.WithLogger(logger.With("cli", name))}
		if *binaries[name] != "" {
			opts = append(opts, invoker.WithBinary(*binaries[name]))
		}
		if *idle > 0 {
			opts = append(opts, invoker.WithIdleTimeout(*idle))
		}
		invokers = append(invokers, runs.track(backends[name](opts...)))
	}

	// The server's lifetime: the first signal cancels it, which cancels
	// every run in flight (the SDK alone would wait for them to finish).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		sig := <-signals
		logger.Info("stopping: cancelling runs in flight; signal again to exit without answering their calls", "signal", sig)
		stop()
		sig = <-signals
		// The runs are already being stopped; exiting now would leave
		// their trees half killed. Wait for them, not for their calls.
		logger.Warn("exiting once the runs' process trees are killed; signal again to exit at once",
			"signal", sig, "at_most", exitBound)
		select {
		case <-runs.idle():
		case <-time.After(exitBound):
			logger.Warn("runs still stopping; exiting")
		case sig = <-signals:
			logger.Warn("exiting at once", "signal", sig)
		}
		os.Exit(130)
	}()

	serverOpts := &mcp.ServerOptions{
		Instructions: "Tools that delegate coding tasks to agent CLIs (" + strings.Join(names, ", ") + ") working in directories of this machine. " +
			"Each call is one agent turn; pass session_id back to continue a conversation.",
	}
	if *verbose {
		serverOpts.Logger = logger.With("component", "mcp")
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke", Title: "clinvoke agent CLIs", Version: "v0.1.0"}, serverOpts)
	err = mcpadapter.Register(server, &mcpadapter.Options{
		Context:           ctx,
		MaxConcurrent:     *maxRuns,
		MaxTasks:          *maxTasks,
		Roots:             roots,
		DefaultPermission: invoker.Permission(*perm),
		MaxPermission:     invoker.Permission(*maxPerm),
		ProgressInterval:  *progress,
		HeartbeatInterval: *heartbeat,
		TranscriptPath:    expandHome(*transcript),
		Logger:            logger,
	}, invokers...)
	if err != nil {
		return err
	}
	logger.Info("serving", "clis", names, "roots", roots, "transport", transportName(*httpAddr))

	if *httpAddr != "" {
		return serveHTTP(ctx, server, *httpAddr, logger)
	}
	err = server.Run(ctx, &mcp.StdioTransport{})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // stopped by a signal, runs drained
	}
	return err
}

// exitBound is how long a second signal waits for the runs in flight to
// end: their stop ladder (invoker.DefaultInterruptGrace, then
// DefaultTerminateGrace, then DefaultWaitDelay) and the sweep of their
// trees, with a margin.
const exitBound = 5 * time.Second

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

// inflight counts the runs in progress, so that a second signal can wait
// for their process trees to be killed.
type inflight struct {
	mu      sync.Mutex
	n       int
	waiters []chan struct{}
}

// track returns inv with its runs counted.
func (f *inflight) track(inv invoker.Invoker) invoker.Invoker { return &tracked{inv, f} }

// idle returns a channel closed once no run is in progress.
func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan struct{})
	if f.n == 0 {
		close(c)
	} else {
		f.waiters = append(f.waiters, c)
	}
	return c
}

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n += d
	if f.n == 0 {
		for _, c := range f.waiters {
			close(c)
		}
		f.waiters = nil
	}
}

// tracked is an Invoker whose runs an inflight counts. A run returns only
// after its whole process tree is reaped.
type tracked struct {
	invoker.Invoker
	runs *inflight
}

func (t *tracked) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	t.runs.add(1)
	defer t.runs.add(-1)
	return t.Invoker.Invoke(ctx, req)
}

// selectCLIs returns the CLIs to serve: those named by list, or else those
// whose binary is found, or else all of them.
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

func serveHTTP(ctx context.Context, server *mcp.Server, addr string, logger *slog.Logger) error {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The runs in flight are already cancelled (Options.Context); give
	// their calls a moment to be answered, then close what is left, such
	// as clients' open event streams.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Info("closing remaining connections", "error", err)
		return srv.Close()
	}
	return nil
}

func transportName(httpAddr string) string {
	if httpAddr != "" {
		return "http://" + httpAddr
	}
	return "stdio"
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
