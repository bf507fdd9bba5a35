//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/hostconfig"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The host tests run each real host (codex, gemini, claude) with the
// configuration of docs/hosts.md and headless command (package hostconfig),
// starting the built examples/mcpserver, the host's model scripted to call
// the server's tool. Run them with `e2e/run -run TestHost`.

// TestHostAnswer: the host's model calls the server's tool, the fake agent
// under the server answers, and the answer comes back through the host.
func TestHostAnswer(t *testing.T) {
	for _, h := range hostconfig.Hosts {
		t.Run(h.Name, func(t *testing.T) {
			const answer = "main.go looks fine to the fake agent"
			rec := t.TempDir()
			r := newHostRig(t, h, fakeagent.Script{Answer: answer, RecordDir: rec}, false)
			r.model.Enqueue(r.callTurn("review main.go", nil), fakemodel.EchoToolResult("the tool said: "))
			run := r.start()
			if err := run.wait(t, "after answering"); err != nil {
				t.Fatalf("%s exited with %v, want success; output:\n%s", h.Name, err, run.out)
			}
			if out := run.out.String(); !strings.Contains(out, "the tool said: ") || !strings.Contains(out, answer) {
				t.Errorf("%s printed:\n%s\nwant the model's answer holding the agent's %q", h.Name, out, answer)
			}
			reqs := r.model.Scripted()
			if len(reqs) != 2 || !reqs[1].Contains(answer) {
				t.Errorf("the host asked its model %d times, want 2, the second carrying the tool's result %q", len(reqs), answer)
			}
			// The model is offered the server's tools under the names
			// docs/hosts.md gives: declared, or (Claude Code 2.1.331) listed
			// by name for its ToolSearch tool to load.
			var first []byte
			if len(reqs) > 0 {
				first = bytes.ReplaceAll(reqs[0].Body, []byte(`\n`), []byte(" ")) // JSON's escaped line ends
			}
			for _, cli := range h.CLIs {
				for _, tool := range []string{cli, cli + "_parallel"} {
					name, ns := h.ToolName(tool)
					for _, n := range []string{name, ns} {
						word := regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(n) + `([^A-Za-z0-9_]|$)`)
						if n != "" && !word.Match(first) {
							t.Errorf("the host's first model request names no tool %q", n)
						}
					}
				}
			}
			r.waitNoSurvivors("after the host exited")

			// One run: its final line, and the line written when its
			// session id became known (status running, same run id).
			entries := r.transcriptEntries()
			var finals []mcpadapter.TranscriptEntry
			for _, e := range entries {
				if e.Status != mcpadapter.StatusRunning {
					finals = append(finals, e)
				}
			}
			if len(finals) != 1 {
				t.Fatalf("transcript holds %d final records, want 1: %s", len(finals), jsonString(entries))
			}
			e := finals[0]
			for _, x := range entries {
				if x.Run != e.Run || x.SessionID != e.SessionID {
					t.Errorf("transcript line %s is not of the one run %s (session %s)", jsonString(x), e.Run, e.SessionID)
				}
			}
			if e.Tool != h.Tool || e.Status != mcpadapter.StatusCompleted || e.Text != answer || e.Prompt != "review main.go" {
				t.Errorf("transcript entry = %s, want tool %s completed with text %q for prompt %q", jsonString(e), h.Tool, answer, "review main.go")
			}
			ar, err := fakeagent.ReadRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := filepath.EvalSymlinks(r.project); ar.Dir != want {
				t.Errorf("the agent ran in %s, want the workdir the model asked for, %s", ar.Dir, want)
			}
		})
	}
}

// TestHostUnapproved checks what docs/hosts.md says of the approval settings:
// without default_tools_approval_mode = "approve", codex exec fails every
// call of the server's tools; without "trust": true, gemini -p does not
// offer them. Either way no agent runs.
func TestHostUnapproved(t *testing.T) {
	for _, tc := range []struct {
		host     string
		old, new string
		want     string // in the tool result the host sends its model
	}{
		{"codex", `default_tools_approval_mode = "approve"`, "", "MCP tool call requires approval, but approval policy is never"},
		{"gemini", `"trust": true`, `"trust": false`, "not found"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			var h hostconfig.Host
			for _, h = range hostconfig.Hosts {
				if h.Name == tc.host {
					break
				}
			}
			r := newHostRig(t, h, fakeagent.Script{}, false)
			r.editConfig(tc.old, tc.new)
			r.model.Enqueue(r.callTurn("review main.go", nil), fakemodel.EchoToolResult("the tool said: "))
			run := r.start()
			_ = run.wait(t, "after the refused call") // codex exec exits 0, having answered
			reqs := r.model.Scripted()
			name, _ := h.ToolName(h.Tool)
			if len(reqs) != 2 || !reqs[1].Contains(tc.want) || !reqs[1].Contains(name) {
				t.Errorf("the host asked its model %d times, want 2, the second carrying a tool result for %s saying %q; output:\n%s",
					len(reqs), name, tc.want, run.out)
			}
			r.waitNoSurvivors("after the host exited")
			if e := r.transcriptEntries(); len(e) != 0 {
				t.Errorf("the server ran %s", jsonString(e))
			}
		})
	}
}

// hostSession is the session id the fake agent reports in the interrupt
// tests: the transcript must carry it, so the run can be resumed.
const hostSession = "019a0c16-0000-7000-8000-000000000016"

// TestHostInterrupt interrupts each host while the server's tool runs a
// fake agent that streams until stopped and has started a grandchild and a
// setsid escapee, in each of the ways docs/hosts.md's table lists: SIGINT,
// SIGTERM and SIGKILL to the real host process; SIGINT to the host's
// process group, as a terminal in its usual (cooked) mode sends on Ctrl-C
// and as job control does; and Ctrl-C typed on the terminal where the host
// runs as a shell's foreground job, whatever mode the host put the
// terminal in (gemini -p reads it raw, so there Ctrl-C is a key press).
// Afterwards nothing of the run may be alive, and the transcript must hold
// the cancelled run with its session id.
func TestHostInterrupt(t *testing.T) {
	for _, h := range hostconfig.Hosts {
		for _, how := range []string{"SIGINT", "SIGTERM", "SIGKILL", "group-SIGINT", "Ctrl-C"} {
			t.Run(h.Name+"/"+how, func(t *testing.T) {
				rec := t.TempDir()
				r := newHostRig(t, h, fakeagent.Script{
					SessionID:  hostSession,
					StreamFor:  time.Hour,
					Grandchild: true,
					Escapee:    true,
					RecordDir:  rec,
				}, false)
				r.model.Enqueue(r.callTurn("review main.go", nil), fakemodel.Answer("the host went on after the interrupt"))

				var run *hostRun
				if how == "Ctrl-C" {
					run = r.startOnTerminal()
				} else {
					run = r.start()
				}
				ar := r.waitAgentStreaming(rec)
				t.Cleanup(ar.Kill)
				var err error
				switch how {
				case "SIGINT":
					err = syscall.Kill(r.realPid(run), syscall.SIGINT)
				case "SIGTERM":
					err = syscall.Kill(r.realPid(run), syscall.SIGTERM)
				case "SIGKILL":
					err = syscall.Kill(r.realPid(run), syscall.SIGKILL)
				case "group-SIGINT":
					err = syscall.Kill(-run.pid, syscall.SIGINT)
				case "Ctrl-C":
					_, err = run.ptmx.Write([]byte{3}) // ^C
				}
				if err != nil {
					t.Fatal(err)
				}
				// Each host has its own exit status after an interrupt
				// (docs/cli-facts.md); what matters is that it exits.
				_ = run.wait(t, "after "+how)
				r.waitNoSurvivors("after " + h.Name + " was interrupted by " + how)
				if alive := ar.Alive(); len(alive) > 0 {
					t.Errorf("recorded processes of the fake agent alive: %v", alive)
				}
				r.checkCancelled(h.Tool, "review main.go", hostSession)
			})
		}
	}
}

// TestHostRealCodexInterrupted is docs/hosts.md's Claude Code configuration
// calling the server's codex tool with the real Codex underneath (its own
// model a second fake), interrupted by a SIGINT to Claude Code while
// Codex's shell tool runs: Claude Code's shutdown burst (SIGINT; SIGINT
// and notifications/cancelled at +22 ms; SIGTERM at +100 ms; SIGKILL at
// +500 ms) must leave nothing alive, and the run must be recorded.
func TestHostRealCodexInterrupted(t *testing.T) {
	h := hostconfig.Hosts[0]
	if h.Name != "claude" || h.Tool != "codex" {
		t.Fatalf("the first host of docs/hosts.md is %s calling %s, want claude calling codex", h.Name, h.Tool)
	}
	codex := cliNamed("codex")
	lookPathCI(t, codex)
	r := newHostRig(t, h, fakeagent.Script{}, true)
	codexModel := fakemodel.New(t)
	// Claude Code passes its environment to the server, and the server
	// to Codex: Codex finds its fake provider through CODEX_HOME.
	r.env = append(r.env, codex.setup(t, codexModel, r.home)...)
	if err := os.WriteFile(filepath.Join(r.project, "follow.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	codexModel.Enqueue(fakemodel.Shell(longTool), fakemodel.Answer("unused"))
	r.model.Enqueue(r.callTurn("follow the log", map[string]any{"model": codex.model}), fakemodel.Answer("unused"))

	run := r.start()
	tool := &rig{tag: r.tag}
	r.waitUntil("codex running its tool "+longTool, func() bool { return tool.toolRunning(longTool) })
	if err := syscall.Kill(run.pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = run.wait(t, "after SIGINT")
	r.waitNoSurvivors("after claude was interrupted by SIGINT")

	var thread string
	if reqs := codexModel.Scripted(); len(reqs) > 0 {
		thread = reqs[0].Header.Get("Thread-Id")
	}
	r.checkCancelled("codex", "follow the log", thread)
}

// checkCancelled checks that the transcript holds the interrupted run: every
// line is of tool for prompt (one run), the last one cancelled, and each
// carries the session id sid (any non-empty id when sid is empty), which
// resumes the run.
func (r *hostRig) checkCancelled(tool, prompt, sid string) {
	r.t.Helper()
	entries := r.transcriptEntries()
	if len(entries) == 0 {
		r.t.Fatalf("the transcript holds no run, want the interrupted one (%s, prompt %q)", tool, prompt)
	}
	for _, e := range entries {
		if e.Tool != tool || e.Prompt != prompt || e.SessionID == "" || sid != "" && e.SessionID != sid {
			r.t.Errorf("transcript entry = %s, want one of tool %s, prompt %q and session id %q", jsonString(e), tool, prompt, sid)
		}
	}
	if last := entries[len(entries)-1]; last.Status != mcpadapter.StatusCancelled {
		r.t.Errorf("the run's last transcript entry has status %q, want %q: %s", last.Status, mcpadapter.StatusCancelled, jsonString(last))
	}
}

// waitAgentStreaming waits for the fake agent of a run and its helpers
// (grandchild, escapee's orphan) to have recorded themselves, then for the
// agent to have written four more times on its standard output, which is
// all it writes to after that: its session event comes first, so the
// server has read it by then.
func (r *hostRig) waitAgentStreaming(dir string) *fakeagent.Record {
	r.t.Helper()
	var rec *fakeagent.Record
	r.waitUntil("the fake agent and its helpers", func() bool {
		var err error
		rec, err = fakeagent.ReadRecord(dir)
		return err == nil && rec.Pid("agent") > 0 && rec.Pid("sleeper") > 0 && rec.Pid("escaped") > 0
	})
	pid := rec.Pid("agent")
	last, writes := wchar(pid), 0
	r.waitUntil("the fake agent's events", func() bool {
		if w := wchar(pid); w > last {
			last, writes = w, writes+1
		}
		return writes >= 4
	})
	return rec
}

// wchar returns the bytes process pid has written so far (/proc/PID/io).
func wchar(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// The elicitation probe: the test binary, started by a host as its MCP
// server (through a wrapper that sets envElicitProbe), serves mcpadapter's
// tools with Approvals "elicit" over stdio, for invokers that stand in for
// the -cli CLIs: each run asks its approval callback once, as a CLI asking
// to run a command does, and answers with the decision. The probe records
// the client's initialize request and what became of the elicitation, as
// JSON lines in the file envElicitProbe names.
const envElicitProbe = "CLINVOKE_E2E_ELICIT_PROBE"

// probeAsk bounds how long the probe waits for the host to answer its
// elicitation: a host that shows it to nobody is measured, not waited for.
const probeAsk = 20 * time.Second

func init() {
	if f := os.Getenv(envElicitProbe); f != "" {
		os.Exit(elicitProbe(f))
	}
}

// A probeRecord is one line of the probe's record.
type probeRecord struct {
	// Client, Protocol and Capabilities are the host's initialize request.
	Client       *mcp.Implementation     `json:"client,omitempty"`
	Protocol     string                  `json:"protocol,omitempty"`
	Capabilities *mcp.ClientCapabilities `json:"capabilities,omitempty"`
	// Elicited is set on the line of an elicitation/create the probe
	// sent: the host's result (Action, Content) or its error.
	Elicited bool              `json:"elicited,omitempty"`
	Result   *mcp.ElicitResult `json:"result,omitempty"`
	Error    string            `json:"error,omitempty"`
	// ElapsedMS is how long the host took to answer the elicitation.
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
	// Decision is set on the line of a run: what its callback answered,
	// and whether the run had one.
	Callback bool              `json:"callback,omitempty"`
	Decision *invoker.Decision `json:"decision,omitempty"`
}

func elicitProbe(file string) int {
	var mu sync.Mutex
	write := func(r probeRecord) {
		b, _ := json.Marshal(r)
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		f.Write(append(b, '\n'))
	}
	var clis, transcript string
	for i, a := range os.Args {
		if i+1 < len(os.Args) && a == "-cli" {
			clis = os.Args[i+1]
		}
		if i+1 < len(os.Args) && a == "-transcript" {
			transcript = os.Args[i+1]
		}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke", Version: "v0.1.0"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			if p := req.Session.InitializeParams(); p != nil {
				write(probeRecord{Client: p.ClientInfo, Protocol: p.ProtocolVersion, Capabilities: p.Capabilities})
			}
		},
	})
	server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			start := time.Now()
			res, err := next(ctx, method, req)
			if method == "elicitation/create" {
				r := probeRecord{Elicited: true, ElapsedMS: time.Since(start).Milliseconds()}
				if er, ok := res.(*mcp.ElicitResult); ok {
					r.Result = er
				}
				if err != nil {
					r.Error = err.Error()
				}
				write(r)
			}
			return res, err
		}
	})
	var invokers []invoker.Invoker
	for _, name := range strings.Split(clis, ",") {
		invokers = append(invokers, &probeInvoker{name: name, write: write})
	}
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		Approvals:      mcpadapter.ApprovalsElicit,
		TranscriptPath: transcript,
	}, invokers...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	err = server.Run(context.Background(), &mcp.StdioTransport{})
	_ = tools.Shutdown(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
	}
	return 0
}

// probeInvoker stands in for a CLI that asks before it runs a command.
type probeInvoker struct {
	name  string
	write func(probeRecord)
}

func (p *probeInvoker) Name() string { return p.name }

func (p *probeInvoker) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Approve: true}
}

func (p *probeInvoker) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}

func (p *probeInvoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if req.Approve == nil {
		p.write(probeRecord{})
		return &invoker.Result{Text: "the probe's run had no approval callback"}, nil
	}
	actx, cancel := context.WithTimeout(ctx, probeAsk)
	defer cancel()
	d := req.Approve(actx, invoker.Approval{Kind: "command", Command: "touch probe.txt", Cwd: req.Workdir,
		Tool: invoker.Tool{Name: "shell", ID: "probe-1"}})
	p.write(probeRecord{Callback: true, Decision: &d})
	return &invoker.Result{Text: fmt.Sprintf("approval: allow=%v message=%q", d.Allow, d.Message)}, nil
}

// probeRecords reads the probe's record.
func probeRecords(t *testing.T, file string) []probeRecord {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []probeRecord
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r probeRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("probe record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestHostElicitation measures, for each host run headless with the
// configuration of docs/hosts.md, whether it declares elicitation in its
// initialize request, and what it answers when the server's tool asks it
// a question (elicitation/create) during a call: the measurement
// docs/approvals.md records. A new CLI version that changes either fails
// here (run it against the newest CLIs with e2e/run --latest).
func TestHostElicitation(t *testing.T) {
	for _, tc := range []struct {
		host     string
		protocol string
		// elicitation is the capability declared, as JSON ("" for none).
		elicitation string
		// action is the host's answer to the elicitation ("" when the
		// server does not ask: the fallback, deny, decides).
		action string
		// message is the denial the agent is told.
		message string
	}{
		{"claude", "2025-11-25", `{}`, "cancel", "denied: the user dismissed the question"},
		{"codex", "2025-06-18", `{"form":{},"url":{}}`, "decline", "denied by the user"},
		{"gemini", "2025-06-18", "", "", "denied by the MCP server's approval policy"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			var h hostconfig.Host
			for _, h = range hostconfig.Hosts {
				if h.Name == tc.host {
					break
				}
			}
			record := filepath.Join(t.TempDir(), "probe.jsonl")
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			probe := filepath.Join(t.TempDir(), "mcpserver")
			writeWrapper(t, probe, self, []string{envElicitProbe + "=" + record})
			r := newHostRigServing(t, h, fakeagent.Script{}, false, probe)
			r.model.Enqueue(r.callTurn("make a file", nil), fakemodel.EchoToolResult("the tool said: "))
			run := r.start()
			if err := run.wait(t, "after the call"); err != nil {
				t.Errorf("%s exited with %v, want success; output:\n%s", h.Name, err, run.out)
			}
			r.waitNoSurvivors("after the host exited")

			var init, elicited, decided *probeRecord
			for _, rec := range probeRecords(t, record) {
				t.Logf("probe: %s", jsonString(rec))
				switch {
				case rec.Client != nil:
					init = &rec
				case rec.Elicited:
					elicited = &rec
				case rec.Decision != nil || !rec.Callback:
					decided = &rec
				}
			}
			if init == nil || decided == nil {
				t.Fatalf("the probe recorded no initialize request or no run; output:\n%s", run.out)
			}
			var declared string
			if c := init.Capabilities; c != nil && c.Elicitation != nil {
				b, _ := json.Marshal(c.Elicitation)
				declared = string(b)
			}
			if init.Protocol != tc.protocol || declared != tc.elicitation {
				t.Errorf("%s %s initialized with protocol %s and elicitation %q, want protocol %s and elicitation %q (measured for docs/approvals.md)",
					init.Client.Name, init.Client.Version, init.Protocol, declared, tc.protocol, tc.elicitation)
			}
			switch {
			case tc.action == "" && elicited != nil:
				t.Errorf("the server asked %s, which declares no elicitation: %s", h.Name, jsonString(elicited))
			case tc.action != "" && (elicited == nil || elicited.Result == nil || elicited.Result.Action != tc.action):
				t.Errorf("%s answered the elicitation with %s, want action %q", h.Name, jsonString(elicited), tc.action)
			}
			if d := decided.Decision; !decided.Callback || d == nil || d.Allow || !strings.HasPrefix(d.Message, tc.message) {
				t.Errorf("the run's callback decided %s, want a denial saying %q", jsonString(decided), tc.message)
			}
			// The denial is the tool's answer, which the host gives its model.
			reqs := r.model.Scripted()
			if len(reqs) != 2 || !reqs[1].Contains("approval: allow=false") {
				t.Errorf("the host asked its model %d times, want 2, the second carrying the tool's answer", len(reqs))
			}
		})
	}
}
