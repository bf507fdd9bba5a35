//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/procstat"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// A twoWayCLI holds what the scenarios of two-way control need to know of
// one CLI: the program approving or denying what the agent asks to do
// (Request.Approve), tools written in Go that the agent calls
// (MCPServer.Server), and external MCP servers (Request.MCPServers). The
// scenarios every CLI shares are written once, in this file, and read the
// CLI's facts; the subtests only one CLI has are its own, in its file
// (twoway_<cli>_test.go), which registers its twoWayCLI in twoWay.
type twoWayCLI struct {
	// mcpTool is the name the CLI gives the tool tool of the MCP server
	// named server, in an Approval and, unless mcpCall says otherwise, in
	// the model's call.
	mcpTool func(server, tool string) string
	// mcpCall, when not nil, is the model's call of tool on the MCP server
	// named server, for a CLI that does not declare the tool to the model
	// under the name mcpTool gives it.
	mcpCall func(server, tool string, input map[string]any) fakemodel.Turn
	// ask is the permission level under which the CLI asks the Approve
	// callback before it runs a command (a touch).
	ask invoker.Permission
	// shellTool is the tool a command's Approval names.
	shellTool string
	// commandLine, when not nil, returns the command line a command's
	// Approval shows for the command the model ran, where it is not that
	// command as it is.
	commandLine func(command string) string
	// denial returns the text the model reads in its next request for a
	// call the callback denied with message.
	denial func(message string) string
	// echoesExactly tells that the model reads a tool's text (and a
	// denial) as it is, so that an answer echoing it is exactly its
	// prefix and the text; elsewhere the answer only contains the text.
	echoesExactly bool
	// unreapedServer tells that a stdio MCP server the CLI started may be
	// left a zombie, not yet reaped, when Invoke returns; elsewhere it is
	// gone from the process table.
	unreapedServer bool
	// write is the model's call of the CLI's own tool that writes content
	// into the file path (absolute, or relative to the workdir): Claude
	// Code's Write, Gemini CLI's write_file, Codex's apply_patch.
	write func(path, content string) fakemodel.Turn
	// approval, goTools and mcpServers are the CLI's own subtests of
	// TestApproval, TestGoTools and TestMCPServers, run after the shared
	// ones; nil where it has none.
	approval, goTools, mcpServers func(t *testing.T, r *rig)
}

// twoWay maps a CLI's name to its facts and its own subtests.
var twoWay = map[string]*twoWayCLI{}

// twoWayOf returns the twoWayCLI of the CLI named name, failing tb when its
// file registered none.
func twoWayOf(tb testing.TB, name string) *twoWayCLI {
	w := twoWay[name]
	if w == nil {
		tb.Fatalf("no two-way facts for %s: register them in twoway_%s_test.go", name, name)
	}
	return w
}

// forEachTwoWay runs, for every CLI, the shared scenarios with the CLI's
// facts and then the CLI's own subtests that own picks.
func forEachTwoWay(t *testing.T, shared func(*testing.T, *rig, *twoWayCLI), own func(*twoWayCLI) func(*testing.T, *rig)) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		w := twoWayOf(t, r.cli.name)
		shared(t, r, w)
		if f := own(w); f != nil {
			f(t, r)
		}
	})
}

// TestApproval runs, for every CLI, the shared scenarios of the Approve
// callback and then the CLI's own.
func TestApproval(t *testing.T) {
	forEachTwoWay(t, approvalScenarios, func(w *twoWayCLI) func(*testing.T, *rig) { return w.approval })
}

// TestGoTools runs, for every CLI, the shared scenarios of Go tools and
// then the CLI's own.
func TestGoTools(t *testing.T) {
	forEachTwoWay(t, goToolScenarios, func(w *twoWayCLI) func(*testing.T, *rig) { return w.goTools })
}

// TestMCPServers runs, for every CLI, the shared scenarios of external MCP
// servers and then the CLI's own.
func TestMCPServers(t *testing.T) {
	forEachTwoWay(t, mcpServerScenarios, func(w *twoWayCLI) func(*testing.T, *rig) { return w.mcpServers })
}

// call returns the model's call of tool on the MCP server named server, as
// the CLI declares the tool.
func (w *twoWayCLI) call(server, tool string, input map[string]any) fakemodel.Turn {
	if w.mcpCall != nil {
		return w.mcpCall(server, tool, input)
	}
	return fakemodel.CallTool(w.mcpTool(server, tool), input)
}

// echoed checks that answer, the model's answer echoing a tool's result
// after prefix, carries text: exactly where the CLI hands the model the
// text as it is.
func (w *twoWayCLI) echoed(t *testing.T, answer, prefix, text string) {
	t.Helper()
	if w.echoesExactly && answer != prefix+text || !strings.Contains(answer, text) {
		t.Errorf("answer %q, want the echo of %q", answer, text)
	}
}

// shown returns the command line a command's Approval shows for command.
func (w *twoWayCLI) shown(command string) string {
	if w.commandLine != nil {
		return w.commandLine(command)
	}
	return command
}

// askedOnce checks that the Approve callback was asked once, about command,
// and with what the CLI tells of it.
func (w *twoWayCLI) askedOnce(t *testing.T, r *rig, got []invoker.Approval, command string) {
	t.Helper()
	if len(got) != 1 || got[0].Kind != invoker.ApprovalCommand || got[0].Command != w.shown(command) ||
		got[0].Tool.Name != w.shellTool || got[0].Tool.ID == "" || got[0].SessionID == "" ||
		len(got[0].Raw) == 0 {
		t.Fatalf("Approve was asked %s, want one command approval of %q by %s with its id, the session and the raw request",
			jsonString(got), w.shown(command), w.shellTool)
	}
	// Where the command runs: the CLI's word, else the workdir; both
	// absolute, clean and resolved, as Workdir.
	wd := realDir(t, r.workdir)
	if got[0].Workdir != wd || got[0].Cwd != wd {
		t.Errorf("Approval = {Workdir %q, Cwd %q}, want both the workdir %q", got[0].Workdir, got[0].Cwd, wd)
	}
}

// realDir returns dir with its symbolic links resolved, as an Approval
// reports directories.
func realDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// lastScripted returns the body of the latest model request.
func lastScripted(t testing.TB, srv *fakemodel.Server) string {
	t.Helper()
	reqs := srv.Scripted()
	if len(reqs) == 0 {
		t.Fatal("the model was never called")
	}
	return string(reqs[len(reqs)-1].Body)
}

// approvals records what the Approve callback was asked.
type approvals struct {
	mu  sync.Mutex
	got []invoker.Approval
}

// decide returns an Approve callback that records what it is asked and
// answers d.
func (a *approvals) decide(d invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision {
	return func(_ context.Context, ap invoker.Approval) invoker.Decision {
		a.mu.Lock()
		a.got = append(a.got, ap)
		a.mu.Unlock()
		return d
	}
}

// list returns what the callback was asked so far.
func (a *approvals) list() []invoker.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]invoker.Approval(nil), a.got...)
}

// approvalTurn runs one turn of r at permission perm whose model makes the
// calls of calls and then echoes the last result after "after: ", with an
// Approve callback that answers d to every question, and returns what the
// callback was asked and the result. It fails t when Invoke fails.
func approvalTurn(t *testing.T, r *rig, perm invoker.Permission, d invoker.Decision, calls ...fakemodel.Turn) ([]invoker.Approval, *invoker.Result) {
	t.Helper()
	var a approvals
	r.srv.Enqueue(append(calls, fakemodel.EchoToolResult("after: "))...)
	req := r.request("do it")
	req.Permission, req.Approve = perm, a.decide(d)
	res, err := r.invoke(context.Background(), req)
	if err != nil {
		t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
	}
	return a.list(), res
}

// absent checks that the file path does not exist; what says what its
// presence means.
func absent(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: stat %s = %v", what, path, err)
	}
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := procstat.Read(pid)
	if err != nil && !errors.Is(err, procstat.ErrMalformed) {
		return false
	}
	return err != nil || st.State != 'Z'
}

// cancelOn returns a context that is cancelled once ready is closed (or
// the test ends).
func cancelOn(t *testing.T, ready <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		select {
		case <-ready:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// denyMessage is the message of the scenarios' denials.
const denyMessage = "no files today (clinvoke e2e)"

// approvalScenarios are the scenarios of the Approve callback every CLI
// shares: the model asks to run a command that creates a file; a deny
// means the file is absent and the model's next request carries the
// denial; an allow runs it; a turn cancelled while the callback waits
// ends with the context's error once the callback returned, with nothing
// left.
func approvalScenarios(t *testing.T, r *rig, w *twoWayCLI) {
	t.Run("deny", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "denied")
		got, res := approvalTurn(t, r, w.ask, invoker.Decision{Message: denyMessage}, fakemodel.Shell("touch "+file))
		w.askedOnce(t, r, got, "touch "+file)
		absent(t, file, "the denied command ran")
		if body := lastScripted(t, r.srv); !strings.Contains(body, w.denial(denyMessage)) {
			t.Errorf("the model's next request does not carry the denial %q:\n%s", w.denial(denyMessage), body)
		}
		if w.echoesExactly {
			w.echoed(t, res.Text, "after: ", w.denial(denyMessage))
		} else {
			t.Logf("answer after the denial: %q", res.Text)
		}
	})
	t.Run("allow", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "allowed")
		got, _ := approvalTurn(t, r, w.ask, invoker.Decision{Allow: true}, fakemodel.Shell("touch "+file))
		w.askedOnce(t, r, got, "touch "+file)
		if _, err := os.Stat(file); err != nil {
			t.Errorf("the allowed command did not run: %v", err)
		}
	})
	t.Run("cancel while the callback waits", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "never")
		r.srv.Enqueue(fakemodel.Shell("touch "+file), fakemodel.Answer("not reached"))
		asked, returned := make(chan struct{}), make(chan error, 1)
		req := r.request("do it")
		req.Permission = w.ask
		req.Approve = func(ctx context.Context, _ invoker.Approval) invoker.Decision {
			close(asked)
			<-ctx.Done()
			returned <- ctx.Err()
			return invoker.Decision{Allow: true}
		}
		res, err := r.invoke(cancelOn(t, asked), req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke() error = %v, want one matching context.Canceled; stderr:\n%s", err, res.Stderr)
		}
		select {
		case err := <-returned:
			if err == nil {
				t.Error("the callback's context ended without an error")
			}
		default:
			t.Error("Invoke returned before the callback did")
		}
		absent(t, file, "the command ran")
	})
}

// recordArgs are the arguments of the Go tool record.
type recordArgs struct {
	Text string `json:"text" jsonschema:"what to record"`
}

// recordServer returns a go-sdk server with the tool "record", which calls
// each observe with the call, then handle with its arguments, and answers
// "recorded: " and the text.
func recordServer(handle func(ctx context.Context, a recordArgs) error, observe ...func(*mcp.CallToolRequest)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "record", Description: "Record a text."},
		func(ctx context.Context, req *mcp.CallToolRequest, a recordArgs) (*mcp.CallToolResult, any, error) {
			for _, o := range observe {
				o(req)
			}
			if err := handle(ctx, a); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "recorded: " + a.Text}}}, nil, nil
		})
	return s
}

// A recorder is a record handler that keeps the texts it was called with.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

// handle records the call's text.
func (rec *recorder) handle(_ context.Context, a recordArgs) error {
	rec.mu.Lock()
	rec.seen = append(rec.seen, a.Text)
	rec.mu.Unlock()
	return nil
}

// texts returns the texts of the calls so far.
func (rec *recorder) texts() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.seen...)
}

// A blocker is a record handler for one call that closes started, waits
// for the call's context to end, and then sends the context's error on
// done.
type blocker struct {
	started chan struct{}
	done    chan error
}

// newBlocker returns a blocker whose call has not started.
func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}), done: make(chan error, 1)}
}

// handle is the blocked call.
func (h *blocker) handle(ctx context.Context, _ recordArgs) error {
	close(h.started)
	<-ctx.Done()
	h.done <- ctx.Err()
	return ctx.Err()
}

// returned checks that the handler returned, with its context's error,
// before what (Invoke, Turn) did.
func (h *blocker) returned(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-h.done:
		if err == nil {
			t.Error("the handler's context ended without an error")
		}
	default:
		t.Errorf("%s returned while the handler still ran", what)
	}
}

// goToolScenarios are the scenarios of a Go tool (MCPServer.Server) every
// CLI shares: the model calls it with arguments; the handler sees them;
// its result is in the model's next request; with an Approve callback,
// the call is asked about once as an mcp_tool; a turn cancelled while the
// handler blocks cancels the handler's context, and Invoke returns after
// the handler did.
func goToolScenarios(t *testing.T, r *rig, w *twoWayCLI) {
	t.Run("call", func(t *testing.T) {
		// Without a callback (at ReadOnly): the request's server is
		// trusted; where the CLI asks about it, it is answered at once.
		r := newRig(t, r.cli)
		var rec recorder
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "hello from the model"}), fakemodel.EchoToolResult("after: "))
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if seen := rec.texts(); len(seen) != 1 || seen[0] != "hello from the model" {
			t.Errorf("the handler saw %q, want the model's arguments once", seen)
		}
		if body := lastScripted(t, r.srv); !strings.Contains(body, "recorded: hello from the model") {
			t.Errorf("the model's next request lacks the tool's result:\n%s", body)
		}
		w.echoed(t, res.Text, "after: ", "recorded: hello from the model")
	})
	t.Run("approved", func(t *testing.T) {
		// With a callback, the question about the Go tool goes to it.
		r := newRig(t, r.cli)
		var rec recorder
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "ask first"}), fakemodel.EchoToolResult("after: "))
		var a approvals
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
		req.Approve = a.decide(invoker.Decision{Allow: true})
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		name := w.mcpTool("gotools", "record")
		if got := a.list(); len(got) != 1 || got[0].Kind != invoker.ApprovalMCPTool || got[0].Tool.Name != name ||
			got[0].Tool.ID == "" || !strings.Contains(string(got[0].Tool.Input), "ask first") ||
			got[0].MCP.Server != "gotools" || got[0].MCP.Tool != "record" || got[0].Workdir != realDir(t, r.workdir) {
			t.Errorf("Approve was asked %s, want one mcp_tool approval of %s with its id and input, naming the server gotools and the tool record, in the workdir", jsonString(got), name)
		}
		w.echoed(t, res.Text, "after: ", "recorded: ask first")
	})
	t.Run("cancel while the handler blocks", func(t *testing.T) {
		r := newRig(t, r.cli)
		h := newBlocker()
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "block"}), fakemodel.Answer("not reached"))
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(h.handle)}}
		res, err := r.invoke(cancelOn(t, h.started), req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke() error = %v, want one matching context.Canceled; stderr:\n%s", err, res.Stderr)
		}
		h.returned(t, "Invoke")
	})
}

// stdioMCPEnv, set in a process's environment, makes the test binary a
// stdio MCP server with two tools: echo, which answers "echo: ", its text,
// its pid and the value of the variable (a marker), and nodeoptions, which
// answers "node_options=" and the server's NODE_OPTIONS, then "passed=" and
// its CLINVOKE_E2E_PASSED.
const stdioMCPEnv = "CLINVOKE_E2E_STDIO_MCP"

// The test binary doubles as the stdio MCP server of mcpServerScenarios,
// started by the CLI itself.
func init() {
	if os.Getenv(stdioMCPEnv) != "" {
		os.Exit(stdioMCP())
	}
}

// stdioMCP serves the stdio MCP server on the standard input and output
// until they close, and returns the exit code.
func stdioMCP() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the text, saying which process serves the call."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a recordArgs) (*mcp.CallToolResult, any, error) {
			text := fmt.Sprintf("echo: %s pid=%d marker=%s", a.Text, os.Getpid(), os.Getenv(stdioMCPEnv))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "nodeoptions", Description: "Says the server's NODE_OPTIONS."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			text := fmt.Sprintf("node_options=%q passed=%q", os.Getenv("NODE_OPTIONS"), os.Getenv("CLINVOKE_E2E_PASSED"))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "stdio MCP server:", err)
		return 1
	}
	return 0
}

// stdioEcho matches the stdio server's answer, capturing its pid and
// marker.
var stdioEcho = regexp.MustCompile(`echo: ping pid=(\d+) marker=(m-\d+)`)

// mcpServerScenarios are the scenarios of an external MCP server every CLI
// shares: a stdio command given in Request.MCPServers, with Env, is
// reached by the CLI, and is gone when the run returns. (A CLI may start
// the server with only the variables Env names, as Codex does, so without
// the rig's tag: it must be gone by its pid.)
func mcpServerScenarios(t *testing.T, r *rig, w *twoWayCLI) {
	// run runs prompt with the test binary as the stdio server "ext",
	// whose Env holds a marker, after the model's turns, and returns the
	// answer and the marker.
	run := func(t *testing.T, r *rig, prompt string, perm invoker.Permission, turns ...fakemodel.Turn) (string, string) {
		t.Helper()
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		marker := "m-" + strconv.Itoa(os.Getpid())
		r.srv.Enqueue(turns...)
		req := r.request(prompt)
		req.Permission = perm
		req.MCPServers = []invoker.MCPServer{{Name: "ext", Command: self, Env: []string{stdioMCPEnv + "=" + marker}}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		return res.Text, marker
	}
	t.Run("stdio", func(t *testing.T) {
		r := newRig(t, r.cli)
		text, marker := run(t, r, "who serves?", "", w.call("ext", "echo", map[string]any{"text": "ping"}), fakemodel.EchoToolResult("after: "))
		m := stdioEcho.FindStringSubmatch(text)
		if m == nil || m[2] != marker {
			t.Fatalf("answer %q, want the stdio server's echo with its pid and the marker %s", text, marker)
		}
		w.echoed(t, text, "after: ", m[0])
		if body := lastScripted(t, r.srv); !strings.Contains(body, m[0]) {
			t.Errorf("the model's request lacks the server's result %q:\n%s", m[0], body)
		}
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); pid <= 0 || !errors.Is(err, syscall.ESRCH) && (!w.unreapedServer || alive(pid)) {
			t.Errorf("the stdio server (pid %d) is alive after the run: kill 0 = %v", pid, err)
		}
	})
	// A server's Env is the server's: the agent's own commands do not see
	// it (Codex takes it in the thread's configuration, never in its own
	// environment, which its shell would inherit). At Unlimited, env runs
	// without a question in every CLI.
	t.Run("stdio env", func(t *testing.T) {
		text, marker := run(t, newRig(t, r.cli), "what does the shell see?", invoker.Unlimited, fakemodel.Shell("env"), fakemodel.EchoToolResult("after: "))
		if !strings.Contains(text, "PATH=") {
			t.Fatalf("answer %q, want the environment the shell command printed", text)
		}
		if strings.Contains(text, marker) {
			t.Errorf("the agent's shell saw the stdio server's Env: %q", text)
		}
	})
}

// openSessions opens one session of inv for each of reqs, in the workdir
// and with the model of base, and returns them with a function that
// closes them, which the benchmark calls before it returns (then
// forEachSessionBench counts what survived).
func openSessions(b *testing.B, inv invoker.Invoker, base invoker.Request, reqs ...invoker.SessionRequest) ([]invoker.Session, func()) {
	var ss []invoker.Session
	closeAll := func() {
		for _, s := range ss {
			s.Close()
		}
		ss = nil
	}
	for _, req := range reqs {
		req.Workdir, req.Model = base.Workdir, base.Model
		s, err := inv.OpenSession(context.Background(), req)
		if err != nil {
			closeAll()
			b.Fatalf("OpenSession() error = %v", err)
		}
		ss = append(ss, s)
	}
	return ss, closeAll
}

// timedTurn runs one turn of s whose model makes the call first and then
// answers, and returns the tool's round trip as the program sees it (see
// toolSpan).
func timedTurn(b *testing.B, srv *fakemodel.Server, s invoker.Session, first fakemodel.Turn) timing {
	srv.Enqueue(first, fakemodel.EchoToolResult("done: "))
	span := toolSpan{start: time.Now()}
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "go", OnEvent: span.on}); err != nil {
		b.Fatal(err)
	}
	return span.get(b)
}

// BenchmarkApproval measures, for every CLI, a turn whose command (a
// touch) the CLI asks about, in a warm session with a callback that allows
// it, against the same turn in a warm session without a callback, at the
// same level (where the CLI then runs the command without asking), back
// to back.
func BenchmarkApproval(b *testing.B) {
	forEachSessionBench(b, func(b *testing.B, srv *fakemodel.Server, inv invoker.Invoker, base invoker.Request, _ invoker.Session) {
		w := twoWayOf(b, inv.Name())
		var asked atomic.Int64
		approve := func(context.Context, invoker.Approval) invoker.Decision {
			asked.Add(1)
			return invoker.Decision{Allow: true}
		}
		ss, closeAll := openSessions(b, inv, base,
			invoker.SessionRequest{Permission: w.ask, Approve: approve},
			invoker.SessionRequest{Permission: w.ask})
		defer closeAll()
		for _, s := range ss {
			timedTurn(b, srv, s, fakemodel.Shell("touch warm.txt"))
		}
		asked.Store(0)
		b.ResetTimer()
		var approved, own []timing
		for i := 0; i < b.N; i++ {
			touch := fakemodel.Shell("touch f" + strconv.Itoa(i) + ".txt")
			approved = append(approved, timedTurn(b, srv, ss[0], touch))
			own = append(own, timedTurn(b, srv, ss[1], touch))
		}
		b.StopTimer()
		if n := asked.Load(); n != int64(b.N) {
			b.Errorf("the callback was asked %d times in %d approved turns", n, b.N)
		}
		reportApproval(b, approved, own)
	})
}

// BenchmarkGoTool measures, for every CLI, in one warm session with a Go
// server, at the least level that runs the CLI's shell tool, a turn
// calling the Go tool record against a turn doing the same with the CLI's
// shell (echo), back to back.
func BenchmarkGoTool(b *testing.B) {
	forEachSessionBench(b, func(b *testing.B, srv *fakemodel.Server, inv invoker.Invoker, base invoker.Request, _ invoker.Session) {
		w := twoWayOf(b, inv.Name())
		var rec recorder
		ss, closeAll := openSessions(b, inv, base, invoker.SessionRequest{
			Permission: cliNamed(inv.Name()).shell,
			MCPServers: []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}})
		defer closeAll()
		goCall, shell := w.call("gotools", "record", map[string]any{"text": "x"}), fakemodel.Shell("echo recorded: x")
		timedTurn(b, srv, ss[0], goCall)
		timedTurn(b, srv, ss[0], shell)
		b.ResetTimer()
		var gotool, own []timing
		for i := 0; i < b.N; i++ {
			gotool = append(gotool, timedTurn(b, srv, ss[0], goCall))
			own = append(own, timedTurn(b, srv, ss[0], shell))
		}
		b.StopTimer()
		if n := len(rec.texts()); n != b.N+1 {
			b.Errorf("the Go tool was called %d times in %d turns", n, b.N+1)
		}
		reportGoTool(b, gotool, own)
	})
}

// A toolSpan times a turn from its start (set by the caller before the
// turn), and, from its events, the time from its first tool call to that
// call's result: a tool's round trip as the program sees it, the approval
// (or the Go handler) included, the model's time excluded. (When a CLI
// reports a call only once its tool has run, as Codex's app-server and Gemini CLI do
// for a command that needs no approval, the round trip misses the tool's
// run: the turn's time is the figure to compare across CLIs.)
type toolSpan struct {
	start        time.Time
	mu           sync.Mutex
	call, result time.Time
	id           string
}

// on is the turn's OnEvent.
func (s *toolSpan) on(ev invoker.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ev.Kind == invoker.KindToolCall && s.call.IsZero():
		s.call = time.Now()
		if ev.Tool != nil {
			s.id = ev.Tool.ID
		}
	case ev.Kind == invoker.KindToolResult && !s.call.IsZero() && s.result.IsZero() &&
		(s.id == "" || ev.Tool == nil || ev.Tool.ID == s.id):
		s.result = time.Now()
	}
}

// A timing is one measured turn: its time from start to return, and its
// tool's round trip.
type timing struct{ turn, tool time.Duration }

// get returns the timing of the turn, which has just returned, failing b
// when it had no tool call and result.
func (s *toolSpan) get(b testing.TB) timing {
	turn := time.Since(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.call.IsZero() || s.result.IsZero() {
		b.Fatal("the turn reported no tool call with its result")
	}
	return timing{turn: turn, tool: s.result.Sub(s.call)}
}

// medians returns the median turn and tool times of ts, in milliseconds.
func medians(ts []timing) (turn, tool float64) {
	var a, b []time.Duration
	for _, t := range ts {
		a, b = append(a, t.turn), append(b, t.tool)
	}
	return medMs(a), medMs(b)
}

// reportAgainstOwn reports the medians of the turns measured and of the
// same turns with the CLI's own means, under the names given for the
// measured turns' time, the ratio of the turns and the measured tool's
// round trip, and own-turn-ms and own-tool-ms for the others
// (scripts/benchreport reads these names).
func reportAgainstOwn(b *testing.B, measured, own []timing, turnName, ratioName, toolName string) {
	mt, mr := medians(measured)
	ot, or := medians(own)
	b.ReportMetric(mt, turnName)
	b.ReportMetric(ot, "own-turn-ms")
	b.ReportMetric(mt/ot, ratioName)
	b.ReportMetric(mr, toolName)
	b.ReportMetric(or, "own-tool-ms")
}

// reportApproval reports the medians of the turns (and tool round trips)
// whose command the Approve callback allowed and of the same turns with
// the command allowed by the permission level, and the ratio of the turns.
func reportApproval(b *testing.B, approved, own []timing) {
	reportAgainstOwn(b, approved, own, "approved-turn-ms", "approval/own", "approved-tool-ms")
}

// reportGoTool reports the same for turns calling a Go tool and turns
// where the CLI's own shell tool does the same work.
func reportGoTool(b *testing.B, gotool, own []timing) {
	reportAgainstOwn(b, gotool, own, "gotool-turn-ms", "gotool/own", "gotool-ms")
}
