package invokertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

// askFile is the file the command of the approval cases creates in the
// workdir.
const askFile = "conformance-approved"

// editFile is the file the CLI asks to write in ApproveFileChange, in a
// directory of the workdir that does not exist yet.
var editFile = filepath.Join("conformance-edits", "edited.txt")

// askLevel is the permission level of the approval cases: the one at
// which every CLI leaves a shell command to Approve (below it, Claude
// Code's ceiling refuses shell commands without asking).
const askLevel = invoker.Unlimited

// twoWayCases check Request.Approve where Capabilities.Approve is
// declared, and Go MCP servers (Request.MCPServers with a Server) where
// Capabilities.GoTools is; for other Invokers they check nothing (the
// Capabilities case checks that Approve is refused).
var twoWayCases = []testCase{
	{
		name: "ApproveDeny",
		rule: "with Request.Approve (where declared), each action the CLI asks permission for goes to Approve with its kind and command; a denial keeps the command from running, and the CLI reads it",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			var asked []invoker.Approval
			var mu sync.Mutex
			wd := k.workdir()
			res, err := k.invoke(r, context.Background(), Fake{Ask: "touch " + askFile}, invoker.Request{Workdir: wd,
				Permission: askLevel,
				Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
					mu.Lock()
					asked = append(asked, a)
					mu.Unlock()
					return invoker.Decision{Message: "not in a conformance test"}
				}})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if exists(filepath.Join(wd, askFile)) {
				r.errorf("the denied command ran: %s exists", askFile)
			}
			if !strings.HasPrefix(res.Text, "denied") {
				r.errorf("Result.Text = %q, want the CLI's answer to start with denied", res.Text)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 {
				r.errorf("Approve was called %d times, want once", len(asked))
			} else if a := asked[0]; a.Kind != "command" || !strings.Contains(a.Command, "touch "+askFile) || a.Tool.Name == "" {
				r.errorf("Approval = {Kind %q, Command %q, Tool.Name %q}, want a command holding %q and the tool's name", a.Kind, a.Command, a.Tool.Name, "touch "+askFile)
			}
		},
	},
	{
		name: "ApproveAllow",
		rule: "with Request.Approve (where declared), an action Approve allows runs, within the permission level",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			wd := k.workdir()
			res, err := k.invoke(r, context.Background(), Fake{Ask: "touch " + askFile}, invoker.Request{Workdir: wd,
				Permission: askLevel,
				Approve: func(context.Context, invoker.Approval) invoker.Decision {
					return invoker.Decision{Allow: true}
				}})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if !exists(filepath.Join(wd, askFile)) {
				r.errorf("the allowed command did not run: %s is absent", askFile)
			}
			if !strings.HasPrefix(res.Text, "approved") {
				r.errorf("Result.Text = %q, want the CLI's answer to start with approved", res.Text)
			}
		},
	},
	{
		name: "ApproveFileChange",
		rule: "with Request.Approve (where declared), a file change the CLI asks permission for goes to Approve as a file_change naming the file in its Paths; a denial keeps the file unwritten, an allow lets the CLI write it",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			for _, allow := range []bool{false, true} {
				var asked []invoker.Approval
				var mu sync.Mutex
				wd := k.workdir()
				res, err := k.invoke(r, context.Background(), Fake{Edit: editFile}, invoker.Request{Workdir: wd,
					Permission: askLevel,
					Approve: func(_ context.Context, a invoker.Approval) invoker.Decision {
						mu.Lock()
						asked = append(asked, a)
						mu.Unlock()
						return invoker.Decision{Allow: allow, Message: "not in a conformance test"}
					}})
				mu.Lock()
				changes := slices.ContainsFunc(asked, func(a invoker.Approval) bool { return a.Kind == "file_change" })
				mu.Unlock()
				written := exists(filepath.Join(wd, editFile))
				if !changes && !written && err == nil && !hasOutcome(res.Text, "denied", "edited") {
					r.errorf("the CLI neither asked about Fake.Edit's file nor answered about it (answer %q): the factory's fake must do Fake.Edit (invokertest.Agent.Edit)", res.Text)
					return
				}
				verb, want := "denied", "denied"
				if allow {
					verb, want = "allowed", "edited"
				}
				if err != nil {
					r.errorf("%s: Invoke() error = %v, want nil", verb, err)
				}
				if written != allow {
					r.errorf("%s: %s written = %v, want %v", verb, editFile, written, allow)
				}
				if !strings.HasPrefix(res.Text, want) {
					r.errorf("%s: Result.Text = %q, want the CLI's answer to start with %s", verb, res.Text, want)
				}
				mu.Lock()
				if len(asked) != 1 {
					r.errorf("%s: Approve was called %d times, want once", verb, len(asked))
				} else if a := asked[0]; a.Kind != "file_change" || !namesFile(a.Paths, wd, editFile) || a.Tool.Name == "" {
					r.errorf("%s: Approval = {Kind %q, Paths %q, Tool.Name %q}, want a file_change whose Paths name %s and the tool's name", verb, a.Kind, a.Paths, a.Tool.Name, filepath.Join(wd, editFile))
				}
				mu.Unlock()
			}
		},
	},
	{
		name: "ApproveReadOnlyEdit",
		rule: "with Request.Approve (where declared), under ReadOnly a file change the CLI asks permission for is refused without asking Approve, and the file is not written",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			wd := k.workdir()
			var a approvals
			_, err := k.invoke(r, context.Background(), Fake{Edit: editFile}, invoker.Request{Workdir: wd,
				Permission: invoker.ReadOnly, Approve: a.allow})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if got := a.fileChanges(); len(got) > 0 {
				r.errorf("Approve was asked about a file change under ReadOnly: %v", got)
			}
			if exists(filepath.Join(wd, editFile)) {
				r.errorf("%s was written under ReadOnly", editFile)
			}
		},
	},
	{
		name: "ApproveWorkspace",
		rule: "with Request.Approve (where declared), under WorkspaceWrite a file change outside the working directory (through a symbolic link that leaves it, by a path elsewhere, or in an agent CLI's configuration directory) is refused without asking Approve, and the file is not written",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			outside, err := os.MkdirTemp("", "invokertest-outside-")
			if err != nil {
				r.errorf("cannot make a directory outside the workdir: %v", err)
				return
			}
			defer os.RemoveAll(outside)
			for _, tc := range []struct {
				what, edit, file string // file is where the edit would land
			}{
				{"through a link that leaves the working directory", filepath.Join("escape", "pwned.txt"), filepath.Join(outside, "pwned.txt")},
				{"outside the working directory", filepath.Join(outside, "elsewhere.txt"), filepath.Join(outside, "elsewhere.txt")},
				{"in the working directory's .claude", filepath.Join(".claude", "settings.json"), ""},
			} {
				wd := k.workdir()
				link := filepath.Join(wd, "escape")
				os.Remove(link) // a fixed workdir (Test) keeps it from the case before
				if err := os.Symlink(outside, link); err != nil {
					r.errorf("cannot make the link %s: %v", link, err)
					return
				}
				file := tc.file
				if file == "" {
					file = filepath.Join(wd, tc.edit)
				}
				var a approvals
				res, err := k.invoke(r, context.Background(), Fake{Edit: tc.edit}, invoker.Request{Workdir: wd,
					Permission: invoker.WorkspaceWrite, Approve: a.allow})
				if err != nil {
					r.errorf("%s: Invoke() error = %v, want nil", tc.what, err)
				}
				if got := a.fileChanges(); len(got) > 0 {
					r.errorf("%s: Approve was asked about the file change: %v (%q)", tc.what, got, res.Text)
				}
				if exists(file) {
					r.errorf("%s: %s was written under WorkspaceWrite", tc.what, file)
				}
				os.Remove(link)
				os.RemoveAll(filepath.Join(wd, ".claude"))
			}
		},
	},
	{
		name: "ApproveForm",
		rule: "with Request.Approve (where declared), every Approval carries the run's Workdir, and its Workdir, Cwd (a command's directory) and Paths are absolute, clean and resolved through symbolic links, a workdir given through a link being reported as its target; a file change names the file there; a call of a tool of a server of the request (where GoTools is declared) is an mcp_tool whose MCP names the server (MCPServer.Name) and the tool by their own names",
		run: func(r *report, k *kase) {
			caps := k.capabilities()
			if !caps.Approve {
				return
			}
			wd := k.workdir()
			real, err := filepath.EvalSymlinks(wd)
			if err != nil {
				r.errorf("cannot resolve the workdir: %v", err)
				return
			}
			links, err := os.MkdirTemp("", "invokertest-links-")
			if err != nil {
				r.errorf("cannot make a directory for a link: %v", err)
				return
			}
			defer os.RemoveAll(links)
			linked := filepath.Join(links, "workdir")
			if err := os.Symlink(wd, linked); err != nil {
				r.errorf("cannot link to the workdir: %v", err)
				return
			}
			os.RemoveAll(filepath.Join(wd, filepath.Dir(editFile))) // a fixed workdir (Test) keeps it from the case before
			f := Fake{Ask: "touch " + askFile, Edit: editFile}
			req := invoker.Request{Workdir: linked, Permission: askLevel}
			if caps.GoTools {
				srv := mcp.NewServer(&mcp.Implementation{Name: "conformance", Version: "1.0.0"}, nil)
				mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes its text."},
					func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
					})
				f.CallTool, f.ToolArgs = "conformance/echo", map[string]any{"text": "ping"}
				req.MCPServers = []invoker.MCPServer{{Name: "conformance", Server: srv}}
			}
			var a approvals
			req.Approve = a.allow
			if _, err := k.invoke(r, context.Background(), f, req); err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			form := func(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }
			asked := map[string]bool{}
			for _, ap := range a.got {
				asked[ap.Kind] = true
				if ap.Workdir != real {
					r.errorf("%s: Approval.Workdir = %q, want the workdir %q as its links resolve (%q)", ap.Kind, ap.Workdir, linked, real)
				}
				for _, p := range ap.Paths {
					if !form(p) {
						r.errorf("%s: Approval.Paths holds %q, which is not absolute and clean", ap.Kind, p)
					}
				}
				switch ap.Kind {
				case invoker.ApprovalCommand:
					if !form(ap.Cwd) || !strings.HasPrefix(ap.Cwd+string(filepath.Separator), real+string(filepath.Separator)) {
						r.errorf("command: Approval.Cwd = %q, want the workdir %q or a directory below it, absolute and clean", ap.Cwd, real)
					}
				case invoker.ApprovalFileChange:
					if want := filepath.Join(real, editFile); !slices.Contains(ap.Paths, want) {
						r.errorf("file_change: Approval.Paths = %q, want %q, under the workdir's target", ap.Paths, want)
					}
				case invoker.ApprovalMCPTool:
					if ap.MCP.Server != "conformance" || ap.MCP.Tool != "echo" {
						r.errorf("mcp_tool: Approval.MCP = %+v, want server %q and tool %q", ap.MCP, "conformance", "echo")
					}
				}
			}
			want := []string{invoker.ApprovalCommand, invoker.ApprovalFileChange}
			if caps.GoTools {
				want = append(want, invoker.ApprovalMCPTool)
			}
			for _, kind := range want {
				if !asked[kind] {
					r.errorf("Approve was not asked about a %s (asked %d times): the factory's fake must do Fake.Ask, Fake.Edit and Fake.CallTool", kind, len(a.got))
				}
			}
		},
	},
	{
		name: "ApproveCap",
		rule: "at most 64 questions of a turn wait for Approve at once: of more asked at once, Approve gets 64, and each of the others is denied at once, without asking, and reported to the program with a KindWarning event whose Tool is the call it was about",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			const max, extra = 64, 6 // the cap of Request.Approve's documentation
			var mu sync.Mutex
			asked, refused := 0, 0
			release := make(chan struct{})
			wd := k.workdir()
			// Approve holds each question until the refusals are in, so
			// that 64 wait when the others come; a fake that asks fewer
			// ends at the deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := k.invoke(r, ctx, Fake{Ask: "touch " + askFile, AskCount: max + extra}, invoker.Request{Workdir: wd,
				Permission: askLevel,
				Approve: func(ctx context.Context, _ invoker.Approval) invoker.Decision {
					mu.Lock()
					asked++
					mu.Unlock()
					select {
					case <-release:
					case <-ctx.Done():
					}
					return invoker.Decision{Message: "not in a conformance test"}
				},
				OnEvent: func(ev invoker.Event) {
					if ev.Kind != invoker.KindWarning || ev.Tool == nil {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if refused++; refused == extra {
						close(release)
					}
				}})
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, context.DeadlineExceeded) && asked+refused < max+extra {
				r.errorf("the CLI asked %d questions, not Fake.AskCount's %d: the factory's fake must do Fake.AskCount (invokertest.Agent.AskCount)", asked+refused, max+extra)
				return
			}
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if asked != max || refused != extra {
				r.errorf("of %d questions asked at once, Approve got %d and %d were refused with a warning, want %d and %d", max+extra, asked, refused, max, extra)
			}
			lines := strings.Split(res.Text, "\n")
			if len(lines) < max+extra || slices.ContainsFunc(lines[:max+extra], func(l string) bool { return !strings.HasPrefix(l, "denied") }) {
				r.errorf("Result.Text = %q, want the CLI's answer to start with %d lines starting with denied", res.Text, max+extra)
			}
			if exists(filepath.Join(wd, askFile)) {
				r.errorf("a denied or refused command ran: %s exists", askFile)
			}
		},
	},
	{
		name: "ApprovePanic",
		rule: "a panic in Approve is raised again on the goroutine that called Invoke, once the run's process tree is gone",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			type boom struct{ msg string }
			tag := newTag()
			wd := k.workdir()
			func() {
				defer func() {
					v := recover()
					if b, ok := v.(boom); !ok || b.msg != "conformance" {
						r.errorf("Invoke() with a panicking Approve: recovered %v, want the callback's panic", v)
					}
					if alive := survivors(tag); len(alive) > 0 {
						r.errorf("processes of the run alive when Approve's panic reached the caller: pids %v", alive)
					}
				}()
				k.newInvoker(Fake{Ask: "touch " + askFile}).Invoke(context.Background(), invoker.Request{
					Prompt: "conformance", Workdir: wd, Permission: askLevel,
					Env: []string{TagVar + "=" + tag},
					Approve: func(context.Context, invoker.Approval) invoker.Decision {
						panic(boom{"conformance"})
					}})
			}()
			if exists(filepath.Join(wd, askFile)) {
				r.errorf("the command ran although Approve panicked")
			}
		},
	},
	{
		name: "ApproveDeadline",
		rule: "an Approve that blocks past the deadline of ctx ends the turn with context.DeadlineExceeded; Approve's context has the values and the deadline of ctx, is done with context.DeadlineExceeded, its answer is dropped, and nothing of the run is left",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			untilCalled(r, "Approve", func(ctx context.Context, t *deadlineTry) error {
				wd := k.workdir()
				_, err := k.invoke(r, ctx, Fake{Ask: "touch " + askFile}, invoker.Request{Workdir: wd,
					Permission: askLevel,
					Approve: func(ctx context.Context, _ invoker.Approval) invoker.Decision {
						t.see(ctx)
						return invoker.Decision{Allow: true} // too late
					}})
				if exists(filepath.Join(wd, askFile)) {
					r.errorf("the command ran on Approve's late answer (Approve called: %v)", t.called.Load())
				}
				return err
			})
		},
	},
	{
		name: "ApproveCancel",
		rule: "cancelling a run while Approve waits ends it with context.Canceled, after Approve returned, with nothing of the run left",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			wd := k.workdir()
			var returned atomic.Bool
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := k.invoke(r, ctx, Fake{Ask: "touch " + askFile}, invoker.Request{Workdir: wd,
				Permission: askLevel,
				Approve: func(actx context.Context, _ invoker.Approval) invoker.Decision {
					cancel()
					<-actx.Done()
					returned.Store(true)
					return invoker.Decision{Allow: true}
				}})
			if !errors.Is(err, context.Canceled) {
				r.errorf("Invoke() error = %v, want context.Canceled", err)
			}
			if !returned.Load() {
				r.errorf("Invoke() returned before Approve did")
			}
			if exists(filepath.Join(wd, askFile)) {
				r.errorf("the command ran on Approve's late answer")
			}
		},
	},
	{
		name: "ApproveCallerCancel",
		rule: "a decision Approve makes because a context of the caller's was cancelled (one it holds itself, such as an MCP call's) is not carried out: the run is cancelled, and the command it allowed never runs",
		run: func(r *report, k *kase) {
			if !k.capabilities().Approve {
				return
			}
			// The decision and the engine's interrupt race: several runs
			// give the wrong order its chance.
			for i := 0; i < 5; i++ {
				wd := k.workdir()
				ctx, cancel := context.WithCancel(context.Background())
				_, err := k.invoke(r, ctx, Fake{Ask: "touch " + askFile}, invoker.Request{Workdir: wd,
					Permission: askLevel,
					Approve: func(context.Context, invoker.Approval) invoker.Decision {
						cancel()
						<-ctx.Done() // the caller's, not the turn's
						return invoker.Decision{Allow: true}
					}})
				cancel()
				if !errors.Is(err, context.Canceled) {
					r.errorf("run %d: Invoke() error = %v, want context.Canceled", i+1, err)
				}
				if exists(filepath.Join(wd, askFile)) {
					r.errorf("run %d: the command ran on an Allow made as the caller's context was cancelled", i+1)
					os.Remove(filepath.Join(wd, askFile))
				}
			}
		},
	},
	{
		name: "GoTool",
		rule: "with a Go MCP server in Request.MCPServers (where GoTools is declared), the agent calls its tool: the handler sees the call's arguments, and its result reaches the agent",
		run: func(r *report, k *kase) {
			if !k.capabilities().GoTools {
				return
			}
			var seen atomic.Value
			srv := mcp.NewServer(&mcp.Implementation{Name: "conformance", Version: "1.0.0"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes its text."},
				func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
					seen.Store(in.Text)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
				})
			f := Fake{CallTool: "conformance/echo", ToolArgs: map[string]any{"text": "ping"}}
			res, err := k.invoke(r, context.Background(), f, invoker.Request{
				MCPServers: []invoker.MCPServer{{Name: "conformance", Server: srv}}})
			if err != nil {
				r.errorf("Invoke() error = %v, want nil", err)
			}
			if got, _ := seen.Load().(string); got != "ping" {
				r.errorf("the handler saw text %q, want %q", got, "ping")
			}
			if !strings.Contains(res.Text, "echo: ping") {
				r.errorf("Result.Text = %q, want the tool's result %q in the agent's answer", res.Text, "echo: ping")
			}
		},
	},
	{
		name: "GoToolCancel",
		rule: "cancelling a run while a Go tool's handler blocks cancels the handler's context; Invoke returns context.Canceled after the handler returned, with nothing of the run left",
		run: func(r *report, k *kase) {
			if !k.capabilities().GoTools {
				return
			}
			var returned atomic.Bool
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := mcp.NewServer(&mcp.Implementation{Name: "conformance", Version: "1.0.0"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
				func(hctx context.Context, _ *mcp.CallToolRequest, _ echoIn) (*mcp.CallToolResult, any, error) {
					cancel()
					select {
					case <-hctx.Done():
					case <-time.After(time.Minute):
						r.errorf("the handler's context was not cancelled a minute after the run was")
					}
					returned.Store(true)
					return nil, nil, hctx.Err()
				})
			f := Fake{CallTool: "conformance/block", ToolArgs: map[string]any{"text": "wait"}}
			_, err := k.invoke(r, ctx, f, invoker.Request{
				MCPServers: []invoker.MCPServer{{Name: "conformance", Server: srv}}})
			if !errors.Is(err, context.Canceled) {
				r.errorf("Invoke() error = %v, want context.Canceled", err)
			}
			if !returned.Load() {
				r.errorf("Invoke() returned while the handler still ran")
			}
		},
	},
	{
		name: "GoToolDeadline",
		rule: "a Go tool's handler has a context with the values and the deadline of the run's; when it blocks past the deadline, its context is done with context.DeadlineExceeded, and Invoke returns context.DeadlineExceeded after the handler returned, with nothing of the run left",
		run: func(r *report, k *kase) {
			if !k.capabilities().GoTools {
				return
			}
			untilCalled(r, "the handler", func(ctx context.Context, t *deadlineTry) error {
				srv := mcp.NewServer(&mcp.Implementation{Name: "conformance", Version: "1.0.0"}, nil)
				mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "Blocks until cancelled."},
					func(hctx context.Context, _ *mcp.CallToolRequest, _ echoIn) (*mcp.CallToolResult, any, error) {
						return nil, nil, t.see(hctx).err
					})
				f := Fake{CallTool: "conformance/block", ToolArgs: map[string]any{"text": "wait"}}
				_, err := k.invoke(r, ctx, f, invoker.Request{
					MCPServers: []invoker.MCPServer{{Name: "conformance", Server: srv}}})
				return err
			})
		},
	},
}

// callDeadlines are the deadlines a case whose callback must be called
// before its run's deadline passes tries, one after another: on a loaded
// machine the CLI may not reach its question or tool call within the first,
// which says nothing of the rule the case checks.
var callDeadlines = []time.Duration{2 * time.Second, 8 * time.Second, 30 * time.Second}

// A deadlineTry is one attempt of a deadline case: whether its callback
// was called, and what it saw of its context once that was done.
type deadlineTry struct {
	called atomic.Bool
	seen   atomic.Pointer[ctxSeen]
}

// see is the callback's part: it notes the call, waits for the end of
// ctx and keeps what it saw.
func (t *deadlineTry) see(ctx context.Context) *ctxSeen {
	t.called.Store(true)
	got := seeContext(ctx)
	t.seen.Store(got)
	return got
}

// untilCalled runs attempt, which returns Invoke's error, with a context
// that holds the value of ctxKey and each of callDeadlines in turn, until
// the callback (whose, "Approve" or "the handler") was called before the
// deadline passed, or the last deadline was tried; that attempt is
// reported: Invoke returned context.DeadlineExceeded after the callback
// returned, and the callback saw the run's context.
func untilCalled(r *report, whose string, attempt func(ctx context.Context, t *deadlineTry) error) {
	for i, d := range callDeadlines {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "conformance"), d)
		var t deadlineTry
		err := attempt(ctx, &t)
		cancel()
		if !t.called.Load() && i < len(callDeadlines)-1 && errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			r.errorf("Invoke() error = %v, want context.DeadlineExceeded", err)
		}
		if got := t.seen.Load(); got == nil {
			r.errorf("Invoke() returned before %s did (called: %v)", whose, t.called.Load())
		} else {
			got.check(r, whose+"'s", ctx)
		}
		return
	}
}

// ctxKey is the key of a value the two-way cases put in the context of a
// run, which its callbacks must see.
type ctxKey struct{}

// ctxSeen is what a callback saw of its context.
type ctxSeen struct {
	value       any
	deadline    time.Time
	hasDeadline bool
	err         error
}

// seeContext waits until ctx is done and says what it held.
func seeContext(ctx context.Context) *ctxSeen {
	d, ok := ctx.Deadline()
	v := ctx.Value(ctxKey{})
	<-ctx.Done()
	return &ctxSeen{value: v, deadline: d, hasDeadline: ok, err: ctx.Err()}
}

// check reports the ways the context a callback (whose) saw differs from
// the run's context ctx, whose deadline has passed.
func (s *ctxSeen) check(r *report, whose string, ctx context.Context) {
	if want := ctx.Value(ctxKey{}); s.value != want {
		r.errorf("%s context holds the value %v, want the run's %v", whose, s.value, want)
	}
	if want, _ := ctx.Deadline(); !s.hasDeadline || !s.deadline.Equal(want) {
		r.errorf("%s context has the deadline %v (set %v), want the run's %v", whose, s.deadline, s.hasDeadline, want)
	}
	if s.err != context.DeadlineExceeded {
		r.errorf("%s context's Err() = %v once the run's deadline had passed, want context.DeadlineExceeded", whose, s.err)
	}
}

// echoIn is the input of the conformance tools.
type echoIn struct {
	Text string `json:"text"`
}

// hasOutcome reports whether text starts with one of the outcome lines.
func hasOutcome(text string, lines ...string) bool {
	for _, l := range lines {
		if strings.HasPrefix(text, l) {
			return true
		}
	}
	return false
}

// namesFile reports whether paths name the file rel of the workdir wd,
// by its absolute path or relative to wd (the workdir compared once
// symbolic links are resolved).
func namesFile(paths []string, wd, rel string) bool {
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(wd, p)
		}
		dir, ok := strings.CutSuffix(filepath.Clean(p), string(filepath.Separator)+rel)
		if ok && realPath(dir) == realPath(wd) {
			return true
		}
	}
	return false
}

// realPath returns path with its symbolic links resolved, or path.
func realPath(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// approvals records what an Approve callback was asked.
type approvals struct {
	mu  sync.Mutex
	got []invoker.Approval
}

// allow is an Approve callback that records its question and allows it.
func (a *approvals) allow(_ context.Context, ap invoker.Approval) invoker.Decision {
	a.mu.Lock()
	a.got = append(a.got, ap)
	a.mu.Unlock()
	return invoker.Decision{Allow: true}
}

// fileChanges returns the paths of the file changes Approve was asked
// about.
func (a *approvals) fileChanges() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var paths [][]string
	for _, ap := range a.got {
		if ap.Kind == "file_change" {
			paths = append(paths, ap.Paths)
		}
	}
	return paths
}
