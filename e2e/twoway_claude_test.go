//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Claude Code's two-way control, measured with 2.1.197: approvals are
// can_use_tool control requests (--permission-prompt-tool=stdio), Go tools
// are SDK MCP servers reached with mcp_message control requests, and
// external servers go into --mcp-config (see the claude package).
func init() {
	// The test binary doubles as the stdio MCP server of claudeMCPServers,
	// started by Claude Code itself.
	if os.Getenv(claudeStdioMCPEnv) != "" {
		os.Exit(claudeStdioMCP())
	}
	twoWay["claude"] = &twoWayCLI{
		approval:      claudeApproval,
		goTools:       claudeGoTools,
		mcpServers:    claudeMCPServers,
		benchApproval: claudeBenchApproval,
		benchGoTool:   claudeBenchGoTool,
	}
}

// claudeStdioMCPEnv, set in a process's environment, makes the test binary
// a stdio MCP server with one tool, whoami, which answers its pid and the
// value of the variable.
const claudeStdioMCPEnv = "CLINVOKE_E2E_CLAUDE_STDIO_MCP"

func claudeStdioMCP() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "whoami", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says which process serves the call."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			text := fmt.Sprintf("pid=%d marker=%s", os.Getpid(), os.Getenv(claudeStdioMCPEnv))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "stdio MCP server:", err)
		return 1
	}
	return 0
}

// claudeLastRequest returns the body of the last model request of r's
// fake, as a string.
func claudeLastRequest(r *rig) string {
	reqs := r.srv.Scripted()
	if len(reqs) == 0 {
		return ""
	}
	return string(reqs[len(reqs)-1].Body)
}

// claudeApprovals records the approvals a callback was given.
type claudeApprovals struct {
	mu  sync.Mutex
	got []invoker.Approval
}

func (a *claudeApprovals) add(x invoker.Approval) {
	a.mu.Lock()
	a.got = append(a.got, x)
	a.mu.Unlock()
}

func (a *claudeApprovals) all() []invoker.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]invoker.Approval(nil), a.got...)
}

func claudeApproval(t *testing.T, r *rig) {
	t.Run("deny", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "denied")
		r.srv.Enqueue(fakemodel.Shell("touch "+file), fakemodel.EchoToolResult("after: "))
		var seen claudeApprovals
		req := r.request("make the file")
		req.Permission = invoker.Unlimited
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			seen.add(a)
			return invoker.Decision{Message: "no files today (clinvoke e2e)"}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		got := seen.all()
		if len(got) != 1 || got[0].Kind != "command" || got[0].Command != "touch "+file || got[0].Tool.Name != "Bash" ||
			got[0].Tool.ID == "" || got[0].SessionID == "" || len(got[0].Raw) == 0 {
			t.Errorf("approvals = %s, want one command approval of the touch with its ids", jsonString(got))
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the denied command ran: stat %s = %v", file, err)
		}
		if !strings.Contains(claudeLastRequest(r), "no files today (clinvoke e2e)") {
			t.Errorf("the model's next request does not carry the denial:\n%s", claudeLastRequest(r))
		}
		if res.Text != "after: no files today (clinvoke e2e)" {
			t.Errorf("Text = %q", res.Text)
		}
	})
	t.Run("allow", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "allowed")
		r.srv.Enqueue(fakemodel.Shell("touch "+file), fakemodel.EchoToolResult("after: "))
		var seen claudeApprovals
		req := r.request("make the file")
		req.Permission = invoker.Unlimited
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			seen.add(a)
			return invoker.Decision{Allow: true}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if len(seen.all()) != 1 {
			t.Errorf("approvals = %s, want one", jsonString(seen.all()))
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("the allowed command did not run: %v", err)
		}
	})
	t.Run("changed input", func(t *testing.T) {
		r := newRig(t, r.cli)
		asked, ran := filepath.Join(r.workdir, "asked"), filepath.Join(r.workdir, "ran")
		r.srv.Enqueue(fakemodel.Shell("touch "+asked), fakemodel.Answer("done"))
		req := r.request("make the file")
		req.Permission = invoker.Unlimited
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			return invoker.Decision{Allow: true, Input: []byte(fmt.Sprintf(`{"command":%q}`, "touch "+ran))}
		}
		if res, err := r.invoke(context.Background(), req); err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if _, err := os.Stat(asked); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the original command ran: stat %s = %v", asked, err)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("the changed command did not run: %v", err)
		}
	})
	t.Run("file change", func(t *testing.T) {
		// WorkspaceWrite: an edit inside the workdir is asked about.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "written.txt")
		r.srv.Enqueue(fakemodel.CallTool("Write", map[string]any{"file_path": file, "content": "hi\n"}), fakemodel.Answer("done"))
		var seen claudeApprovals
		req := r.request("write the file")
		req.Permission = invoker.WorkspaceWrite
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			seen.add(a)
			return invoker.Decision{Allow: true}
		}
		if res, err := r.invoke(context.Background(), req); err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		got := seen.all()
		if len(got) != 1 || got[0].Kind != "file_change" || len(got[0].Paths) == 0 || got[0].Paths[0] != file {
			t.Errorf("approvals = %s, want one file_change of %s", jsonString(got), file)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "hi\n" {
			t.Errorf("the approved write: %q, %v", b, err)
		}
	})
	t.Run("for the session", func(t *testing.T) {
		// An allow for the session answers the next Bash call without
		// asking again.
		r := newRig(t, r.cli)
		a, b := filepath.Join(r.workdir, "a"), filepath.Join(r.workdir, "b")
		r.srv.Enqueue(fakemodel.Shell("touch "+a), fakemodel.Shell("touch "+b), fakemodel.Answer("done"))
		var seen claudeApprovals
		req := r.request("make the files")
		req.Permission = invoker.Unlimited
		req.Approve = func(ctx context.Context, x invoker.Approval) invoker.Decision {
			seen.add(x)
			return invoker.Decision{Allow: true, ForSession: true}
		}
		if res, err := r.invoke(context.Background(), req); err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if n := len(seen.all()); n != 1 {
			t.Errorf("the callback was asked %d times, want once", n)
		}
		for _, f := range []string{a, b} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	})
	t.Run("above the ceiling", func(t *testing.T) {
		// Read-only: the touch is denied without asking, naming the level.
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "denied")
		r.srv.Enqueue(fakemodel.Shell("touch "+file), fakemodel.EchoToolResult("after: "))
		var seen claudeApprovals
		req := r.request("make the file")
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			seen.add(a)
			return invoker.Decision{Allow: true}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if len(seen.all()) != 0 {
			t.Errorf("approvals = %s, want none above the ceiling", jsonString(seen.all()))
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the command ran above the ceiling: stat %s = %v", file, err)
		}
		if !strings.Contains(res.Text, "read-only") {
			t.Errorf("Text = %q, want the denial naming the level", res.Text)
		}
	})
	t.Run("cancel while the callback waits", func(t *testing.T) {
		r := newRig(t, r.cli)
		file := filepath.Join(r.workdir, "never")
		r.srv.Enqueue(fakemodel.Shell("touch "+file), fakemodel.Answer("not reached"))
		asked := make(chan struct{})
		var cbErr atomic.Value
		req := r.request("make the file")
		req.Permission = invoker.Unlimited
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			close(asked)
			<-ctx.Done()
			cbErr.Store(ctx.Err())
			return invoker.Decision{Allow: true}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-asked:
				cancel()
			case <-ctx.Done():
			}
		}()
		res, err := r.invoke(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke() error = %v, want one matching context.Canceled; stderr:\n%s", err, res.Stderr)
		}
		if e, _ := cbErr.Load().(error); e == nil {
			t.Error("Invoke returned before the callback did")
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the command ran: stat %s = %v", file, err)
		}
	})
}

// claudeGreetServer returns a go-sdk server with the tool greet, which answers
// "hello WHO from go" and reports each call's arguments on calls; block,
// when not nil, makes it wait for its context and report the context's
// error there.
func claudeGreetServer(calls chan<- string, block chan<- error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
	type args struct {
		Who string `json:"who" jsonschema:"whom to greet"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			calls <- a.Who
			if block != nil {
				<-ctx.Done()
				block <- ctx.Err()
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Who + " from go"}}}, nil, nil
		})
	return s
}

func claudeGoTools(t *testing.T, r *rig) {
	t.Run("call", func(t *testing.T) {
		r := newRig(t, r.cli)
		calls := make(chan string, 4)
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": "bob"}), fakemodel.EchoToolResult("after: "))
		req := r.request("greet bob")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: claudeGreetServer(calls, nil)}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if len(calls) != 1 || <-calls != "bob" {
			t.Errorf("the handler did not see who=bob once")
		}
		if res.Text != "after: hello bob from go" || !strings.Contains(claudeLastRequest(r), "hello bob from go") {
			t.Errorf("Text = %q, want the tool's result; last request:\n%s", res.Text, claudeLastRequest(r))
		}
	})
	t.Run("approved", func(t *testing.T) {
		r := newRig(t, r.cli)
		calls := make(chan string, 4)
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": "ann"}), fakemodel.EchoToolResult("after: "))
		var seen claudeApprovals
		req := r.request("greet ann")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: claudeGreetServer(calls, nil)}}
		req.Approve = func(ctx context.Context, a invoker.Approval) invoker.Decision {
			seen.add(a)
			return invoker.Decision{Allow: true}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		got := seen.all()
		if len(got) != 1 || got[0].Kind != "mcp_tool" || got[0].Tool.Name != "mcp__gotools__greet" {
			t.Errorf("approvals = %s, want one mcp_tool approval of the Go tool", jsonString(got))
		}
		if res.Text != "after: hello ann from go" {
			t.Errorf("Text = %q", res.Text)
		}
	})
	t.Run("session of two turns", func(t *testing.T) {
		// The SDK server's connection, made in the first turn, serves the
		// second.
		r := newRig(t, r.cli)
		calls := make(chan string, 4)
		s, closeSession := claudeSession(t, r, invoker.SessionRequest{
			MCPServers: []invoker.MCPServer{{Name: "gotools", Server: claudeGreetServer(calls, nil)}}})
		for _, who := range []string{"bob", "ann"} {
			r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": who}), fakemodel.EchoToolResult("after: "))
			claudeTurn(t, s, invoker.TurnRequest{Prompt: "greet " + who}, "after: hello "+who+" from go")
			if got := <-calls; got != who {
				t.Errorf("the handler saw %q, want %q", got, who)
			}
		}
		closeSession()
	})
	t.Run("session after a cancelled call", func(t *testing.T) {
		// A turn cancelled while the handler blocks leaves the session and
		// its server usable: the next turn's call is served.
		r := newRig(t, r.cli)
		calls := make(chan string, 4)
		block := make(chan error, 1)
		var blocking atomic.Bool
		blocking.Store(true)
		srv := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."},
			func(ctx context.Context, _ *mcp.CallToolRequest, a struct {
				Who string `json:"who"`
			}) (*mcp.CallToolResult, any, error) {
				calls <- a.Who
				if blocking.Load() {
					<-ctx.Done()
					block <- ctx.Err()
					return nil, nil, ctx.Err()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + a.Who}}}, nil, nil
			})
		s, closeSession := claudeSession(t, r, invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "gotools", Server: srv}}})
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": "eve"}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-calls:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := s.Turn(ctx, invoker.TurnRequest{Prompt: "greet eve"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Turn() error = %v, want one matching context.Canceled", err)
		}
		select {
		case <-block:
		default:
			t.Error("Turn returned while the handler still ran")
		}
		blocking.Store(false)
		if n := r.srv.Pending(); n != 0 {
			t.Fatalf("%d scripted turns left after the interrupt", n)
		}
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": "bob"}), fakemodel.EchoToolResult("after: "))
		claudeTurn(t, s, invoker.TurnRequest{Prompt: "greet bob"}, "after: hello bob")
		closeSession()
	})
	t.Run("cancel while the handler blocks", func(t *testing.T) {
		r := newRig(t, r.cli)
		calls := make(chan string, 4)
		block := make(chan error, 1)
		r.srv.Enqueue(fakemodel.CallTool("mcp__gotools__greet", map[string]any{"who": "eve"}), fakemodel.Answer("not reached"))
		req := r.request("greet eve")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: claudeGreetServer(calls, block)}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-calls:
				cancel()
			case <-ctx.Done():
			}
		}()
		res, err := r.invoke(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Invoke() error = %v, want one matching context.Canceled; stderr:\n%s", err, res.Stderr)
		}
		select {
		case herr := <-block:
			if herr == nil {
				t.Error("the handler's context ended without an error")
			}
		default:
			t.Error("Invoke returned while the handler still ran")
		}
	})
}

func claudeMCPServers(t *testing.T, r *rig) {
	t.Run("stdio", func(t *testing.T) {
		r := newRig(t, r.cli)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		marker := "m-" + strconv.Itoa(os.Getpid())
		r.srv.Enqueue(fakemodel.CallTool("mcp__ext__whoami", nil), fakemodel.EchoToolResult("after: "))
		req := r.request("who serves?")
		req.MCPServers = []invoker.MCPServer{{Name: "ext", Command: self, Env: []string{claudeStdioMCPEnv + "=" + marker}}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(res.Text, "after: "), "pid=%d marker="+marker, &pid); err != nil || pid <= 0 {
			t.Fatalf("Text = %q, want the stdio server's pid and marker", res.Text)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the stdio server (pid %d) is alive after the run: kill 0 = %v", pid, err)
		}
	})
	t.Run("http with headers", func(t *testing.T) {
		r := newRig(t, r.cli)
		const secret = "Bearer s3cret-clinvoke-e2e"
		var unauthorized atomic.Int32
		var leaked atomic.Value
		s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "ping", Description: "Answers pong."},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				// While the CLI runs: the secret is on no command line.
				if ps := findProcs(func(_, cmdline []byte) bool { return bytes.Contains(cmdline, []byte("s3cret")) }); len(ps) > 0 {
					leaked.Store(strings.Join(ps, "\n"))
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
			})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != secret {
				unauthorized.Add(1)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		}))
		defer func() {
			srv.Close()
			for ss := range s.Sessions() {
				ss.Close()
			}
		}()
		r.srv.Enqueue(fakemodel.CallTool("mcp__web__ping", nil), fakemodel.EchoToolResult("after: "))
		req := r.request("ping")
		req.MCPServers = []invoker.MCPServer{{Name: "web", URL: srv.URL, Headers: map[string]string{"Authorization": secret}}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if res.Text != "after: pong" {
			t.Errorf("Text = %q, want the URL server's answer", res.Text)
		}
		if n := unauthorized.Load(); n > 0 {
			t.Errorf("%d requests came without the header", n)
		}
		if ps, _ := leaked.Load().(string); ps != "" {
			t.Errorf("the header's secret is on a command line:\n%s", ps)
		}
	})
}

// claudeBench is a benchmark's isolated setup for Claude Code: a fake
// model, a home and an Invoker whose runs carry the benchmark's tag.
type claudeBench struct {
	srv     *fakemodel.Server
	inv     invoker.Invoker
	workdir string
	tag     string
}

func newClaudeBench(b *testing.B) *claudeBench {
	var c *cli
	for i := range clis {
		if clis[i].name == "claude" {
			c = &clis[i]
		}
	}
	if c == nil {
		b.Fatal("no claude in clis")
	}
	bin, err := exec.LookPath(c.name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("%s not on PATH: run e2e/run", c.name)
		}
		b.Skipf("%s not on PATH: run e2e/run", c.name)
	}
	cb := &claudeBench{srv: fakemodel.New(b), workdir: b.TempDir(), tag: benchTag(b)}
	home := b.TempDir()
	env := append(c.setup(b, cb.srv, home), "HOME="+home, tagVar+"="+cb.tag)
	cb.inv = c.new(invoker.Options{Binary: bin, Env: env})
	b.Cleanup(func() {
		if ps := (&rig{tag: cb.tag}).survivors(); len(ps) > 0 {
			b.Errorf("processes survived the benchmark: %v", ps)
		}
	})
	return cb
}

// open opens a session of req in the benchmark's workdir, closed when the
// benchmark ends.
func (cb *claudeBench) open(b *testing.B, req invoker.SessionRequest) invoker.Session {
	req.Workdir = cb.workdir
	s, err := cb.inv.OpenSession(context.Background(), req)
	if err != nil {
		b.Fatalf("OpenSession() error = %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// claudeToolTurn runs one turn of s in which the model makes the call of first
// and then answers, and returns the tool's round trip as the program sees
// it (see toolSpan).
func claudeToolTurn(b *testing.B, cb *claudeBench, s invoker.Session, first fakemodel.Turn) timing {
	cb.srv.Enqueue(first, fakemodel.Answer("done"))
	span := toolSpan{start: time.Now()}
	if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "do it", OnEvent: span.on}); err != nil {
		b.Fatal(err)
	}
	return span.get(b)
}

// claudeBenchApproval measures the round trip of a touch that the Approve
// callback allows (can_use_tool, answered by the program) against the same
// touch pre-allowed (Unlimited without a callback), each in a warm session
// of its own, alternating: the medians of the tool call's round trip.
func claudeBenchApproval(b *testing.B) {
	cb := newClaudeBench(b)
	asked := cb.open(b, invoker.SessionRequest{Permission: invoker.Unlimited,
		Approve: func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{Allow: true} }})
	own := cb.open(b, invoker.SessionRequest{Permission: invoker.Unlimited})
	file := filepath.Join(cb.workdir, "f")
	var withApproval, without []timing
	for _, s := range []invoker.Session{asked, own} {
		claudeToolTurn(b, cb, s, fakemodel.Shell("touch "+file)) // warm
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		withApproval = append(withApproval, claudeToolTurn(b, cb, asked, fakemodel.Shell("touch "+file)))
		without = append(without, claudeToolTurn(b, cb, own, fakemodel.Shell("touch "+file)))
	}
	b.StopTimer()
	reportApproval(b, withApproval, without)
}

// claudeBenchGoTool measures the round trip of a Go tool that creates a
// file (an SDK MCP server, over the control protocol) against Claude
// Code's Bash doing the same touch, in the same session, alternating.
func claudeBenchGoTool(b *testing.B) {
	cb := newClaudeBench(b)
	s := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
	type args struct {
		Path string `json:"path"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Creates an empty file."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			f, err := os.OpenFile(a.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, nil, err
			}
			f.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, nil
		})
	sess := cb.open(b, invoker.SessionRequest{Permission: invoker.Unlimited,
		MCPServers: []invoker.MCPServer{{Name: "gotools", Server: s}}})
	file := filepath.Join(cb.workdir, "f")
	goCall := fakemodel.CallTool("mcp__gotools__touch", map[string]any{"path": file})
	claudeToolTurn(b, cb, sess, goCall)
	claudeToolTurn(b, cb, sess, fakemodel.Shell("touch "+file))
	var goTool, bash []timing
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		goTool = append(goTool, claudeToolTurn(b, cb, sess, goCall))
		bash = append(bash, claudeToolTurn(b, cb, sess, fakemodel.Shell("touch "+file)))
	}
	b.StopTimer()
	reportGoTool(b, goTool, bash)
}
