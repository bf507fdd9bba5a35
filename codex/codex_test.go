package codex

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

func TestBackendNames(t *testing.T) {
	b := backend{}
	if b.Name() != "codex" || b.Binary() != "codex" || b.InstallHint() != "npm install -g @openai/codex" {
		t.Errorf("Name, Binary, InstallHint = %q, %q, %q", b.Name(), b.Binary(), b.InstallHint())
	}
	if New().Name() != "codex" {
		t.Errorf("New().Name() = %q", New().Name())
	}
}

func TestCommand(t *testing.T) {
	base := invoker.Request{Prompt: "say hi", Workdir: "/work/p"}
	with := func(f func(r *invoker.Request)) invoker.Request {
		r := base
		f(&r)
		return r
	}
	tests := []struct {
		name string
		req  invoker.Request
		want []string
	}{
		{
			name: "defaults are read-only",
			req:  base,
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--sandbox=read-only", "--", "-"},
		},
		{
			name: "read-only explicit",
			req:  with(func(r *invoker.Request) { r.Permission = invoker.ReadOnly }),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--sandbox=read-only", "--", "-"},
		},
		{
			name: "workspace-write",
			req:  with(func(r *invoker.Request) { r.Permission = invoker.WorkspaceWrite }),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--sandbox=workspace-write", "--", "-"},
		},
		{
			name: "unlimited",
			req:  with(func(r *invoker.Request) { r.Permission = invoker.Unlimited }),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--sandbox=danger-full-access", "--", "-"},
		},
		{
			name: "model, images, system prompt, extra args",
			req: with(func(r *invoker.Request) {
				r.Model = "gpt-5.5"
				r.Images = []string{"/img/a.png", "/img/-b.png"}
				r.SystemPrompt = "Be \"terse\".\nNo C:\\paths."
				r.ExtraArgs = []string{"--ephemeral"}
			}),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--sandbox=read-only",
				"--model=gpt-5.5", "--image=/img/a.png", "--image=/img/-b.png",
				`--config=developer_instructions="Be \"terse\".\nNo C:\\paths."`,
				"--ephemeral", "--", "-"},
		},
		{
			name: "resume restates read-only as a config override",
			req:  with(func(r *invoker.Request) { r.SessionID = "01a1fc5c-838c-7a43-9661-c8ed22a94191" }),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", `--config=sandbox_mode="read-only"`,
				"resume", "--", "01a1fc5c-838c-7a43-9661-c8ed22a94191", "-"},
		},
		{
			name: "resume restates workspace-write",
			req: with(func(r *invoker.Request) {
				r.SessionID = "T"
				r.Permission = invoker.WorkspaceWrite
			}),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", `--config=sandbox_mode="workspace-write"`,
				"resume", "--", "T", "-"},
		},
		{
			name: "resume restates unlimited, with model, image and system prompt",
			req: with(func(r *invoker.Request) {
				r.SessionID = "-T"
				r.Permission = invoker.Unlimited
				r.Model = "o3"
				r.Images = []string{"/i.png"}
				r.SystemPrompt = "x"
				r.ExtraArgs = []string{"--ephemeral"}
			}),
			want: []string{"exec", "--json", "--skip-git-repo-check", "--cd=/work/p", "--model=o3",
				`--config=developer_instructions="x"`, `--config=sandbox_mode="danger-full-access"`, "--ephemeral",
				"resume", "--image=/i.png", "--", "-T", "-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := backend{}.Command(&tt.req)
			if err != nil {
				t.Fatalf("Command() error = %v", err)
			}
			if !slices.Equal(cmd.Args, tt.want) {
				t.Errorf("Args =\n  %q\nwant\n  %q", cmd.Args, tt.want)
			}
			if cmd.Stdin != tt.req.Prompt {
				t.Errorf("Stdin = %q, want the prompt", cmd.Stdin)
			}
			if slices.Contains(cmd.Args, "--sandbox=read-only") && tt.req.SessionID != "" {
				t.Errorf("resume must not pass --sandbox")
			}
		})
	}
}

// TestPromptNeverAFlag checks that prompts that look like flags reach codex
// on stdin only.
func TestPromptNeverAFlag(t *testing.T) {
	for _, p := range []string{"--help", "-p", "-", "--", "resume", "--sandbox=danger-full-access"} {
		for _, sid := range []string{"", "T"} {
			req := invoker.Request{Prompt: p, Workdir: "/w", SessionID: sid}
			cmd, err := backend{}.Command(&req)
			if err != nil {
				t.Fatal(err)
			}
			if cmd.Stdin != p {
				t.Errorf("Stdin = %q, want %q", cmd.Stdin, p)
			}
			i := slices.Index(cmd.Args, "--")
			if i < 0 || cmd.Args[len(cmd.Args)-1] != "-" {
				t.Fatalf("Args = %q: want -- and - (read stdin) last", cmd.Args)
			}
			neutral := req
			neutral.Prompt = "hello"
			ncmd, _ := backend{}.Command(&neutral)
			if !slices.Equal(cmd.Args, ncmd.Args) {
				t.Errorf("prompt %q changed argv to %q", p, cmd.Args)
			}
		}
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		req  invoker.Request
		want error
	}{
		{"unknown permission", invoker.Request{Prompt: "x", Permission: "root"}, invoker.ErrInvalidRequest},
		{"image path with a comma", invoker.Request{Prompt: "x", Images: []string{"/a,b.png"}}, invoker.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := backend{}.Command(&tt.req)
			if !errors.Is(err, tt.want) {
				t.Errorf("Command() error = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestFlagsExist checks every flag the backend emits against the captured
// --help of the verified codex version.
func TestFlagsExist(t *testing.T) {
	help, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	req := invoker.Request{Prompt: "x", Workdir: "/w", Model: "m", Images: []string{"/i"}, SystemPrompt: "s", SessionID: "T",
		OutputSchema: json.RawMessage(`{"type":"object"}`)}
	var args []string
	for _, sid := range []string{"", "T"} {
		req.SessionID = sid
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Cleanup()
		args = append(args, cmd.Args...)
	}
	flagRE := regexp.MustCompile(`^--[a-z-]+`)
	for _, a := range args {
		f := flagRE.FindString(a)
		if f == "" || f == "--" {
			continue
		}
		if !strings.Contains(string(help), f+" ") && !strings.Contains(string(help), f+"\n") {
			t.Errorf("flag %s is not in codex --help", f)
		}
	}
}

func TestTOMLString(t *testing.T) {
	tests := map[string]string{
		"":             `""`,
		"plain":        `"plain"`,
		"a\"b\\c":      `"a\"b\\c"`,
		"l1\nl2\tx\r":  `"l1\nl2\tx\r"`,
		"\x00\x1f\x7f": `"\u0000\u001f\u007f"`,
		"ünïcödé ✓":    `"ünïcödé ✓"`,
		"bad\xffutf8":  "\"bad\uFFFDutf8\"",
	}
	for in, want := range tests {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestOwnSandboxOffUnderOurs: where the engine says the kernel holds the
// run's filesystem and network (Mode "required" with network rules),
// Codex's own sandbox is off at every level, in exec, exec resume, the
// app-server's opening and a turn's switch, with and without Approve;
// elsewhere each level keeps its own.
func TestOwnSandboxOffUnderOurs(t *testing.T) {
	held := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
	fsOnly := invoker.Sandbox{Mode: "required"}
	for _, tc := range []struct {
		perm invoker.Permission
		sb   invoker.Sandbox
		want string
	}{
		{invoker.ReadOnly, held, "danger-full-access"},
		{"", held, "danger-full-access"},
		{invoker.WorkspaceWrite, held, "danger-full-access"},
		{invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required", Network: []string{"example.com"}}, "danger-full-access"},
		{invoker.Unlimited, held, "danger-full-access"},
		{invoker.ReadOnly, fsOnly, "read-only"},
		{invoker.WorkspaceWrite, fsOnly, "workspace-write"},
		{invoker.WorkspaceWrite, invoker.Sandbox{Mode: "off"}, "workspace-write"},
		{invoker.Unlimited, fsOnly, "danger-full-access"},
	} {
		req := invoker.Request{Prompt: "p", Workdir: "/w", Permission: tc.perm, Sandbox: tc.sb}
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(cmd.Args, "--sandbox="+tc.want) {
			t.Errorf("%q under %+v: exec Args %q lack --sandbox=%s", tc.perm, tc.sb, cmd.Args, tc.want)
		}
		req.SessionID = "T0"
		if cmd, err = (backend{}).Command(&req); err != nil || !slices.Contains(cmd.Args, `--config=sandbox_mode="`+tc.want+`"`) {
			t.Errorf("%q under %+v: resume Args %q (%v) lack sandbox_mode %s", tc.perm, tc.sb, cmd.Args, err, tc.want)
		}
		sreq := invoker.SessionRequest{Workdir: "/w", Permission: tc.perm, Sandbox: tc.sb}
		if _, open := openTurn(t, &sreq); !strings.Contains(string(open), `"sandbox":"`+tc.want+`"`) {
			t.Errorf("%q under %+v: thread/start %s lacks the sandbox %s", tc.perm, tc.sb, open, tc.want)
		}
		sreq.Approve = allowAll
		if cmd, err = (backend{}).SessionCommand(&sreq); err != nil || !slices.Contains(cmd.Args, `--config=default_permissions="`+profileOf(tc.want)+`"`) {
			t.Errorf("%q under %+v, Approve: app-server Args %q (%v) lack the profile of %s", tc.perm, tc.sb, cmd.Args, err, tc.want)
		}
		if _, open := openTurn(t, &sreq); !strings.Contains(string(open), `"permissions":"`+profileOf(tc.want)+`"`) || !strings.Contains(string(open), `"approvalPolicy":"untrusted"`) {
			t.Errorf("%q under %+v, Approve: thread/start %s lacks the profile of %s, or untrusted", tc.perm, tc.sb, open, tc.want)
		}
	}
	// A turn's switch keeps Codex's own sandbox off; without Approve,
	// the policy stays "never".
	p, _ := openTurn(t, &invoker.SessionRequest{Workdir: "/w", Sandbox: held})
	appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`)
	lines, err := p.StartTurn(&invoker.TurnRequest{Prompt: "more", Permission: invoker.WorkspaceWrite})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"type":"dangerFullAccess"`, `"approvalPolicy":"never"`} {
		if !strings.Contains(string(lines[0]), w) {
			t.Errorf("turn/start %s lacks %s", lines[0], w)
		}
	}
	// A turn below the opening's level, whose kernel ceiling cannot be
	// lowered, gets Codex's own sandbox for its level back: its commands
	// fail inside the kernel's rather than run at the opening's level.
	p, _ = openTurn(t, &invoker.SessionRequest{Workdir: "/w", Permission: invoker.WorkspaceWrite, Sandbox: held})
	appDecode(t, p, `{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`)
	if lines, err = p.StartTurn(&invoker.TurnRequest{Prompt: "less", Permission: invoker.ReadOnly}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lines[0]), `"type":"readOnly"`) || strings.Contains(string(lines[0]), "dangerFullAccess") {
		t.Errorf("a lower turn's turn/start %s, want Codex's own read-only sandbox", lines[0])
	}
}

// TestSandboxNote: Capabilities.SandboxNote says how Codex runs under the
// kernel's sandbox on this host, and why.
func TestSandboxNote(t *testing.T) {
	c := New().Capabilities()
	var want []string
	switch c.Sandbox {
	case "filesystem,network":
		want = []string{"runs inside it with its own sandbox off", `gets \"none\"`, "bubblewrap"}
	case "filesystem":
		want = []string{`Mode \"available\" runs this CLI without it and \"required\" fails`, "needs the network part", "bubblewrap"}
	}
	for _, w := range want {
		if !strings.Contains(strconv.Quote(c.SandboxNote), w) {
			t.Errorf("Sandbox %q, SandboxNote %q: want %s", c.Sandbox, c.SandboxNote, w)
		}
	}
	t.Logf("Sandbox %q: %s", c.Sandbox, c.SandboxNote)
}
