//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Codex's two-way control runs on its app-server (codex/approval.go,
// codex/mcp.go): approvals are its requestApproval and MCP-tool
// elicitation requests, the Go tools are served over loopback HTTP and
// configured as an mcp_servers entry, and the model calls an MCP tool as
// the function TOOL of the namespace tool mcp__SERVER.
func init() {
	twoWay["codex"] = &twoWayCLI{
		approval:      codexApproval,
		goTools:       codexGoTools,
		mcpServers:    codexMCPServers,
		benchApproval: codexBenchApproval,
		benchGoTool:   codexBenchGoTool,
	}
}

// codexMCPCall is the model's call of tool on the MCP server named server.
func codexMCPCall(server, tool string, input map[string]any) fakemodel.Turn {
	return fakemodel.Turn{Call: &fakemodel.Call{Namespace: "mcp__" + server, Name: tool, Input: input}}
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

func (a *approvals) decide(d invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision {
	return func(_ context.Context, ap invoker.Approval) invoker.Decision {
		a.mu.Lock()
		a.got = append(a.got, ap)
		a.mu.Unlock()
		return d
	}
}

func (a *approvals) list() []invoker.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]invoker.Approval(nil), a.got...)
}

func codexApproval(t *testing.T, r *rig) {
	// ask runs one turn whose model runs command and then echoes the
	// tool's result, with decision d for every question.
	ask := func(t *testing.T, perm invoker.Permission, command string, d invoker.Decision) (*approvals, *invoker.Result) {
		var a approvals
		r.srv.Enqueue(fakemodel.Shell(command), fakemodel.EchoToolResult("after: "))
		req := r.request("run it")
		req.Permission, req.Approve = perm, a.decide(d)
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		got := a.list()
		if len(got) != 1 || got[0].Kind != "command" || !strings.Contains(got[0].Command, command) ||
			got[0].Tool.ID == "" || got[0].SessionID == "" || got[0].Cwd == "" {
			t.Fatalf("Approve was asked %+v, want one command approval of %q with its id, cwd and session", got, command)
		}
		return &a, res
	}
	t.Run("deny", func(t *testing.T) {
		_, res := ask(t, invoker.WorkspaceWrite, "touch denied.txt", invoker.Decision{Message: "not this one"})
		if _, err := os.Stat(filepath.Join(r.workdir, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("denied.txt: %v, want it absent", err)
		}
		// Codex has no message field: the model reads Codex's own words.
		if body := lastScripted(t, r.srv); !strings.Contains(body, "rejected by user") {
			t.Errorf("the model's next request does not carry the denial:\n%s", body)
		}
		t.Logf("answer after the denial: %q", res.Text)
	})
	t.Run("allow", func(t *testing.T) {
		ask(t, invoker.WorkspaceWrite, "touch allowed.txt", invoker.Decision{Allow: true})
		if _, err := os.Stat(filepath.Join(r.workdir, "allowed.txt")); err != nil {
			t.Errorf("allowed.txt: %v, want the command to have run", err)
		}
	})
	t.Run("ceiling", func(t *testing.T) {
		// An allowed command still runs in the sandbox of the level:
		// read-only, so the file is not created, and Codex does not rerun
		// it outside the sandbox.
		_, res := ask(t, invoker.ReadOnly, "touch ceiling.txt", invoker.Decision{Allow: true})
		if _, err := os.Stat(filepath.Join(r.workdir, "ceiling.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ceiling.txt: %v, want it absent under ReadOnly", err)
		}
		if !strings.Contains(res.Text, "Read-only file system") {
			t.Errorf("answer %q, want the sandbox's refusal", res.Text)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		r.srv.Enqueue(fakemodel.Shell("touch cancelled.txt"), fakemodel.Answer("never"))
		asked, returned := make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := r.request("run it")
		req.Permission = invoker.WorkspaceWrite
		req.Approve = func(ctx context.Context, _ invoker.Approval) invoker.Decision {
			defer close(returned)
			close(asked)
			<-ctx.Done()
			return invoker.Decision{Allow: true}
		}
		go func() {
			<-asked
			cancel()
		}()
		_, err := r.invoke(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Invoke() error = %v, want context.Canceled", err)
		}
		select {
		case <-returned:
		default:
			t.Error("Invoke returned before the callback did")
		}
		if _, err := os.Stat(filepath.Join(r.workdir, "cancelled.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cancelled.txt: %v, want it absent", err)
		}
	})
}

type recordArgs struct {
	Text string `json:"text" jsonschema:"what to record"`
}

// recordServer returns a go-sdk server with the tool "record", which calls
// handle with its arguments and answers "recorded: " and the text.
func recordServer(handle func(ctx context.Context, a recordArgs) error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gotools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "record", Description: "Record a text."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a recordArgs) (*mcp.CallToolResult, any, error) {
			if err := handle(ctx, a); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "recorded: " + a.Text}}}, nil, nil
		})
	return s
}

func codexGoTools(t *testing.T, r *rig) {
	t.Run("call", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		srv := recordServer(func(_ context.Context, a recordArgs) error {
			mu.Lock()
			seen = append(seen, a.Text)
			mu.Unlock()
			return nil
		})
		r.srv.Enqueue(codexMCPCall("gotools", "record", map[string]any{"text": "hello from the model"}), fakemodel.EchoToolResult("tool said: "))
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: srv}}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || seen[0] != "hello from the model" {
			t.Errorf("the handler saw %q, want the model's arguments", seen)
		}
		if body := lastScripted(t, r.srv); !strings.Contains(body, "recorded: hello from the model") {
			t.Errorf("the model's next request lacks the tool's result:\n%s", body)
		}
		if !strings.Contains(res.Text, "recorded: hello from the model") {
			t.Errorf("answer %q, want the tool's result echoed", res.Text)
		}
	})
	t.Run("approved", func(t *testing.T) {
		// With a callback, Codex asks about the Go tool too.
		var a approvals
		srv := recordServer(func(context.Context, recordArgs) error { return nil })
		r.srv.Enqueue(codexMCPCall("gotools", "record", map[string]any{"text": "ask first"}), fakemodel.EchoToolResult("tool said: "))
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: srv}}
		req.Approve = a.decide(invoker.Decision{Allow: true})
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		got := a.list()
		if len(got) != 1 || got[0].Kind != "mcp_tool" || got[0].Tool.Name != "mcp__gotools__record" ||
			got[0].Tool.ID == "" || !strings.Contains(string(got[0].Tool.Input), "ask first") {
			t.Errorf("Approve was asked %+v, want one mcp_tool approval of mcp__gotools__record with its id and input", got)
		}
		if !strings.Contains(res.Text, "recorded: ask first") {
			t.Errorf("answer %q, want the tool's result", res.Text)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		started, done := make(chan struct{}), make(chan error, 1)
		srv := recordServer(func(ctx context.Context, _ recordArgs) error {
			close(started)
			<-ctx.Done()
			done <- ctx.Err()
			return ctx.Err()
		})
		r.srv.Enqueue(codexMCPCall("gotools", "record", map[string]any{"text": "block"}), fakemodel.Answer("never"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: srv}}
		_, err := r.invoke(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Invoke() error = %v, want context.Canceled", err)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Error("the handler returned with its context not cancelled")
			}
		default:
			t.Error("Invoke returned while the handler still ran")
		}
	})
}

// buildMCPEcho builds codex/testdata/mcpecho, a stdio MCP server with the
// tool "echo".
func buildMCPEcho(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpecho")
	cmd := exec.Command("go", "build", "-o", bin, "./codex/testdata/mcpecho")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mcpecho: %v\n%s", err, out)
	}
	return bin
}

func codexMCPServers(t *testing.T, r *rig) {
	bin := buildMCPEcho(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	r.srv.Enqueue(codexMCPCall("echo", "echo", map[string]any{"text": "ping"}), fakemodel.EchoToolResult("server said: "))
	req := r.request("call it")
	// The pid file's name reaches the server through Env, which Codex
	// copies into its environment (env_vars).
	req.MCPServers = []invoker.MCPServer{{Name: "echo", Command: bin, Env: []string{"MCPECHO_PIDFILE=" + pidFile}}}
	res, err := r.invoke(context.Background(), req)
	if err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	if !strings.Contains(res.Text, "echo: ping") || !strings.Contains(lastScripted(t, r.srv), "echo: ping") {
		t.Errorf("answer %q, want the server's result in it and in the model's request", res.Text)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the server did not start with its Env: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	// The server runs without the rig's tag (Codex gives a stdio server
	// only the variables it names): it must be gone by its pid.
	if pid <= 0 || alive(pid) {
		t.Errorf("the MCP server (pid %d) is alive after Invoke returned", pid)
	}
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// codexBench runs f with open Codex sessions of reqs (the Approve or
// MCPServers in them) against one fresh fake model, and reports the
// processes left after they closed.
func codexBench(b *testing.B, reqs []invoker.SessionRequest, f func(b *testing.B, srv *fakemodel.Server, ss []invoker.Session)) {
	var c *cli
	for i := range clis {
		if clis[i].name == "codex" {
			c = &clis[i]
		}
	}
	bin, err := exec.LookPath(c.name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("%s not on PATH: run e2e/run", c.name)
		}
		b.Skipf("%s not on PATH: run e2e/run", c.name)
	}
	srv := fakemodel.New(b)
	home := b.TempDir()
	tag := benchTag(b)
	env := append(c.setup(b, srv, home), "HOME="+home, tagVar+"="+tag)
	inv := c.new(invoker.Options{Binary: bin, Env: env})
	var ss []invoker.Session
	defer func() {
		for _, s := range ss {
			s.Close()
		}
	}()
	for _, req := range reqs {
		req.Workdir, req.Model = b.TempDir(), c.model
		s, err := inv.OpenSession(context.Background(), req)
		if err != nil {
			b.Fatalf("OpenSession() error = %v", err)
		}
		ss = append(ss, s)
		srv.Enqueue(fakemodel.Answer("warm"))
		if _, err := s.Turn(context.Background(), invoker.TurnRequest{Prompt: "warm up"}); err != nil {
			b.Fatalf("first Turn() error = %v", err)
		}
	}
	b.ResetTimer()
	f(b, srv, ss)
	b.StopTimer()
	for _, s := range ss {
		s.Close()
	}
	ss = nil
	ps := (&rig{tag: tag}).survivors()
	if len(ps) > 0 {
		b.Errorf("processes survived the benchmark: %v", ps)
	}
	b.ReportMetric(float64(len(ps)), "survivors")
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

// codexBenchApproval: a turn whose command (touch) Codex asks about, in a
// session with a callback that allows it, against the same turn in a
// session without a callback, where the permission level allows it, back
// to back.
func codexBenchApproval(b *testing.B) {
	var asked []string
	var mu sync.Mutex
	req := invoker.SessionRequest{Permission: invoker.WorkspaceWrite,
		Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
			mu.Lock()
			asked = append(asked, a.Command)
			mu.Unlock()
			return invoker.Decision{Allow: true}
		}}
	plain := invoker.SessionRequest{Permission: invoker.WorkspaceWrite}
	codexBench(b, []invoker.SessionRequest{req, plain}, func(b *testing.B, srv *fakemodel.Server, ss []invoker.Session) {
		var approved, own []timing
		for i := 0; i < b.N; i++ {
			file := "f" + strconv.Itoa(i) + ".txt"
			approved = append(approved, timedTurn(b, srv, ss[0], fakemodel.Shell("touch "+file)))
			own = append(own, timedTurn(b, srv, ss[1], fakemodel.Shell("touch "+file)))
		}
		mu.Lock()
		if len(asked) != b.N {
			b.Errorf("the callback was asked %q in %d approved turns", asked, b.N)
		}
		mu.Unlock()
		reportApproval(b, approved, own)
	})
}

// codexBenchGoTool: in one session with a Go server, a turn calling its
// tool against a turn doing the same with Codex's shell (echo), back to
// back.
func codexBenchGoTool(b *testing.B) {
	srv := recordServer(func(context.Context, recordArgs) error { return nil })
	req := invoker.SessionRequest{MCPServers: []invoker.MCPServer{{Name: "gotools", Server: srv}}}
	codexBench(b, []invoker.SessionRequest{req}, func(b *testing.B, fm *fakemodel.Server, ss []invoker.Session) {
		var gotool, own []timing
		for i := 0; i < b.N; i++ {
			gotool = append(gotool, timedTurn(b, fm, ss[0], codexMCPCall("gotools", "record", map[string]any{"text": "x"})))
			own = append(own, timedTurn(b, fm, ss[0], fakemodel.Shell("echo recorded: x")))
		}
		reportGoTool(b, gotool, own)
	})
}
