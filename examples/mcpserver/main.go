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
// In stdio mode standard output carries only the protocol; logs go to
// standard error. The first Ctrl-C (or SIGTERM) cancels the runs in flight,
// answers their calls and exits once they are reaped; a second one exits
// at once.
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
	"slices"
	"strings"
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
	flag.Func("root", "directory under which workdirs must lie (repeatable; default: the current directory)", func(s string) error {
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

	if len(roots) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		roots = []string{wd}
	}
	for i, r := range roots {
		roots[i] = expandHome(r)
	}

	names, err := selectCLIs(*clis, binaries, logger)
	if err != nil {
		return err
	}
	var invokers []invoker.Invoker
	for _, name := range names {
		opts := []invoker.Option{invoker.WithLogger(logger.With("cli", name))}
		if *binaries[name] != "" {
			opts = append(opts, invoker.WithBinary(*binaries[name]))
		}
		if *idle > 0 {
			opts = append(opts, invoker.WithIdleTimeout(*idle))
		}
		invokers = append(invokers, backends[name](opts...))
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
		logger.Info("stopping: cancelling runs in flight; signal again to exit at once", "signal", sig)
		stop()
		sig = <-signals
		logger.Warn("exiting at once", "signal", sig)
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
