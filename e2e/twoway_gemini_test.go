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
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Gemini CLI's two-way control runs on its ACP mode (internal/acp,
// gemini/session.go): approvals are its session/request_permission
// requests, asked in its "default" mode, the Go tools are served over
// loopback HTTP and given with session/new as an http server whose bearer
// token is a header, and the model calls an MCP tool TOOL of server
// SERVER as the function mcp_SERVER_TOOL.
func init() {
	twoWay["gemini"] = &twoWayCLI{
		approval:      geminiApproval,
		goTools:       geminiGoTools,
		mcpServers:    geminiMCPServers,
		benchApproval: geminiBenchApproval,
		benchGoTool:   geminiBenchGoTool,
	}
}

// geminiMCPCall is the model's call of tool on the MCP server named
// server, as Gemini declares it.
func geminiMCPCall(server, tool string, input map[string]any) fakemodel.Turn {
	return fakemodel.CallTool("mcp_"+server+"_"+tool, input)
}

// geminiDenial is what Gemini tells the model of a rejected call: ACP's
// reject option carries no message.
const geminiDenial = `Tool \"run_shell_command\" was canceled by the user.`

func geminiApproval(t *testing.T, r *rig) {
	// ask runs one turn whose model runs command and then echoes the
	// tool's result, with decision d for every question.
	ask := func(t *testing.T, perm invoker.Permission, command string, d invoker.Decision) ([]invoker.Approval, *invoker.Result) {
		var a approvals
		r.srv.Enqueue(fakemodel.Shell(command), fakemodel.EchoToolResult("after: "))
		req := r.request("run it")
		req.Permission, req.Approve = perm, a.decide(d)
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		return a.list(), res
	}
	// asked checks that Approve was asked once about command.
	asked := func(t *testing.T, got []invoker.Approval, command string) {
		t.Helper()
		if len(got) != 1 || got[0].Kind != "command" || got[0].Command != command ||
			got[0].Tool.Name != "run_shell_command" || got[0].Tool.ID == "" || got[0].SessionID == "" || len(got[0].Raw) == 0 {
			t.Fatalf("Approve was asked %+v, want one command approval of %q with the tool, its id and the session", got, command)
		}
	}
	t.Run("deny", func(t *testing.T) {
		got, res := ask(t, invoker.Unlimited, "touch denied.txt", invoker.Decision{Message: "not this one"})
		asked(t, got, "touch denied.txt")
		if _, err := os.Stat(filepath.Join(r.workdir, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("denied.txt: %v, want it absent", err)
		}
		// ACP has no message field: the model reads Gemini's own words.
		if body := lastScripted(t, r.srv); !strings.Contains(body, geminiDenial) {
			t.Errorf("the model's next request does not carry the denial:\n%s", body)
		}
		t.Logf("answer after the denial: %q", res.Text)
	})
	t.Run("allow", func(t *testing.T) {
		got, _ := ask(t, invoker.Unlimited, "touch allowed.txt", invoker.Decision{Allow: true})
		asked(t, got, "touch allowed.txt")
		if _, err := os.Stat(filepath.Join(r.workdir, "allowed.txt")); err != nil {
			t.Errorf("allowed.txt: %v, want the command to have run", err)
		}
	})
	t.Run("ceiling", func(t *testing.T) {
		// A command is above WorkspaceWrite: rejected without asking,
		// although the callback would allow it.
		got, _ := ask(t, invoker.WorkspaceWrite, "touch ceiling.txt", invoker.Decision{Allow: true})
		if len(got) != 0 {
			t.Errorf("Approve was asked %+v, want nothing above the ceiling", got)
		}
		if _, err := os.Stat(filepath.Join(r.workdir, "ceiling.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ceiling.txt: %v, want it absent under WorkspaceWrite", err)
		}
		if body := lastScripted(t, r.srv); !strings.Contains(body, geminiDenial) {
			t.Errorf("the model's next request does not carry the rejection:\n%s", body)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		r.srv.Enqueue(fakemodel.Shell("touch cancelled.txt"), fakemodel.Answer("never"))
		asked, returned := make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := r.request("run it")
		req.Permission = invoker.Unlimited
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

func geminiGoTools(t *testing.T, r *rig) {
	t.Run("call", func(t *testing.T) {
		// At ReadOnly, without a callback: the request's server is
		// trusted, and Gemini's question about it is answered at once.
		var mu sync.Mutex
		var seen []string
		srv := recordServer(func(_ context.Context, a recordArgs) error {
			mu.Lock()
			seen = append(seen, a.Text)
			mu.Unlock()
			return nil
		})
		r.srv.Enqueue(geminiMCPCall("gotools", "record", map[string]any{"text": "hello from the model"}), fakemodel.EchoToolResult("tool said: "))
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
		// With a callback, the question about the Go tool goes to it.
		var a approvals
		srv := recordServer(func(context.Context, recordArgs) error { return nil })
		r.srv.Enqueue(geminiMCPCall("gotools", "record", map[string]any{"text": "ask first"}), fakemodel.EchoToolResult("tool said: "))
		req := r.request("record it")
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: srv}}
		req.Approve = a.decide(invoker.Decision{Allow: true})
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v", err)
		}
		got := a.list()
		if len(got) != 1 || got[0].Kind != "mcp_tool" || got[0].Tool.Name != "mcp_gotools_record" ||
			got[0].Tool.ID == "" || !strings.Contains(string(got[0].Tool.Input), "ask first") {
			t.Errorf("Approve was asked %+v, want one mcp_tool approval of mcp_gotools_record with its id and input", got)
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
		r.srv.Enqueue(geminiMCPCall("gotools", "record", map[string]any{"text": "block"}), fakemodel.Answer("never"))
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

func geminiMCPServers(t *testing.T, r *rig) {
	bin := buildMCPEcho(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	r.srv.Enqueue(geminiMCPCall("echo", "echo", map[string]any{"text": "ping"}), fakemodel.EchoToolResult("server said: "))
	req := r.request("call it")
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
	// Gemini starts the server with its own environment and Env, as its
	// child: it must be gone, whatever variables it kept.
	if pid <= 0 || alive(pid) {
		t.Errorf("the MCP server (pid %d) is alive after Invoke returned", pid)
	}
}

// geminiBench runs f with open Gemini sessions of reqs (the Approve or
// MCPServers in them) against one fresh fake model, and reports the
// processes left after they closed.
func geminiBench(b *testing.B, reqs []invoker.SessionRequest, f func(b *testing.B, srv *fakemodel.Server, ss []invoker.Session)) {
	var c *cli
	for i := range clis {
		if clis[i].name == "gemini" {
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

// geminiBenchApproval: a turn whose command (touch) Gemini asks about, in
// a session with a callback that allows it, against the same turn in a
// session without a callback at Unlimited (Gemini's yolo mode, which asks
// nothing), back to back.
func geminiBenchApproval(b *testing.B) {
	var asked []string
	var mu sync.Mutex
	req := invoker.SessionRequest{Permission: invoker.Unlimited,
		Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
			mu.Lock()
			asked = append(asked, a.Command)
			mu.Unlock()
			return invoker.Decision{Allow: true}
		}}
	plain := invoker.SessionRequest{Permission: invoker.Unlimited}
	geminiBench(b, []invoker.SessionRequest{req, plain}, func(b *testing.B, srv *fakemodel.Server, ss []invoker.Session) {
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

// geminiBenchGoTool: in one session at Unlimited (so that Gemini's shell
// runs without asking) with a Go server, a turn calling its tool against
// a turn doing the same with Gemini's shell (echo), back to back.
func geminiBenchGoTool(b *testing.B) {
	srv := recordServer(func(context.Context, recordArgs) error { return nil })
	req := invoker.SessionRequest{Permission: invoker.Unlimited, MCPServers: []invoker.MCPServer{{Name: "gotools", Server: srv}}}
	geminiBench(b, []invoker.SessionRequest{req}, func(b *testing.B, fm *fakemodel.Server, ss []invoker.Session) {
		var gotool, own []timing
		for i := 0; i < b.N; i++ {
			gotool = append(gotool, timedTurn(b, fm, ss[0], geminiMCPCall("gotools", "record", map[string]any{"text": "x"})))
			own = append(own, timedTurn(b, fm, ss[0], fakemodel.Shell("echo recorded: x")))
		}
		reportGoTool(b, gotool, own)
	})
}
