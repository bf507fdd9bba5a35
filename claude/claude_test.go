package claude

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent/agenttest"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestBackendNames(t *testing.T) {
	b := backend{}
	if b.Name() != "claude" || b.Binary() != "claude" || b.InstallHint() != "npm install -g @anthropic-ai/claude-code" {
		t.Errorf("Name, Binary, InstallHint = %q, %q, %q", b.Name(), b.Binary(), b.InstallHint())
	}
	if New().Name() != "claude" {
		t.Errorf("New().Name() = %q", New().Name())
	}
}

// configRules are the rules of a turn at WorkspaceWrite: every agent
// CLI's configuration, as a file or a directory, at any depth.
const configRules = "--disallowedTools=Edit(**/.git),Edit(**/.git/**),Edit(**/.claude),Edit(**/.claude/**),Edit(**/.gemini),Edit(**/.gemini/**)," +
	"Edit(**/.codex),Edit(**/.codex/**),Edit(**/.agents),Edit(**/.agents/**),Edit(**/.mcp.json),Edit(**/.mcp.json/**),Edit(**/.claude.json),Edit(**/.claude.json/**)," +
	"Edit(**/.env),Edit(**/.env/**)"

func TestCommand(t *testing.T) {
	base := invoker.Request{Prompt: "say hi", Workdir: "/work/p"}
	with := func(f func(r *invoker.Request)) invoker.Request {
		r := base
		f(&r)
		return r
	}
	head := []string{"--print", "--output-format=stream-json", "--verbose"}
	ro := []string{"--permission-mode=default", "--disallowedTools=Edit,Write,NotebookEdit", "--setting-sources="}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	tests := []struct {
		name    string
		req     invoker.Request
		want    []string
		wantEnv []string
	}{
		{"defaults are read-only", base, cat(head, ro), nil},
		{"read-only", with(func(r *invoker.Request) { r.Permission = invoker.ReadOnly }), cat(head, ro), nil},
		{"workspace-write", with(func(r *invoker.Request) { r.Permission = invoker.WorkspaceWrite }),
			cat(head, []string{"--permission-mode=acceptEdits", configRules}), nil},
		{"unlimited", with(func(r *invoker.Request) { r.Permission = invoker.Unlimited }),
			cat(head, []string{"--permission-mode=bypassPermissions"}), []string{"IS_SANDBOX=1"}},
		{"model, system prompt, extra args", with(func(r *invoker.Request) {
			r.Model = "opus"
			r.SystemPrompt = "--be terse"
			r.ExtraArgs = []string{"--max-turns", "3"}
		}), cat(head, ro, []string{"--model=opus", "--append-system-prompt=--be terse", "--max-turns", "3"}), nil},
		{"resume keeps read-only", with(func(r *invoker.Request) { r.SessionID = "e1874291-bd81-4c92-84cf-6317b67dbd1e" }),
			cat(head, ro, []string{"--resume=e1874291-bd81-4c92-84cf-6317b67dbd1e"}), nil},
		{"resume restates acceptEdits", with(func(r *invoker.Request) {
			r.SessionID = "S"
			r.Permission = invoker.WorkspaceWrite
		}), cat(head, []string{"--permission-mode=acceptEdits", configRules, "--resume=S"}), nil},
		{"resume restates bypassPermissions", with(func(r *invoker.Request) {
			r.SessionID = "-S"
			r.Permission = invoker.Unlimited
		}), cat(head, []string{"--permission-mode=bypassPermissions", "--resume=-S"}), []string{"IS_SANDBOX=1"}},
		{"schema compacted, turn and budget limits", with(func(r *invoker.Request) {
			r.OutputSchema = json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"name\": {\"type\": \"string\"}}\n}")
			r.MaxTurns = 3
			r.MaxBudgetUSD = 0.000001
			r.ExtraArgs = []string{"--verbose"}
		}), cat(head, ro, []string{`--json-schema={"type":"object","properties":{"name":{"type":"string"}}}`,
			"--max-turns=3", "--max-budget-usd=0.000001", "--verbose"}), nil},
		{"deltas stream partial messages", with(func(r *invoker.Request) { r.Deltas = true }),
			cat(head, ro, []string{"--include-partial-messages"}), nil},
		{"fork resumes into a new session", with(func(r *invoker.Request) {
			r.SessionID = "S"
			r.Fork = true
			r.ExtraArgs = []string{"--debug"}
		}), cat(head, ro, []string{"--resume=S", "--fork-session", "--debug"}), nil},
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
			if !slices.Equal(cmd.Env, tt.wantEnv) {
				t.Errorf("Env = %q, want %q", cmd.Env, tt.wantEnv)
			}
			for _, v := range []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"} {
				if !slices.Contains(cmd.Unset, v) {
					t.Errorf("Unset = %q, want it to hold %s", cmd.Unset, v)
				}
			}
			if cmd.Stdin != tt.req.Prompt {
				t.Errorf("Stdin = %q, want the prompt", cmd.Stdin)
			}
		})
	}
}

func TestPromptNeverAFlag(t *testing.T) {
	for _, p := range []string{"--help", "-p", "--dangerously-skip-permissions", "-", "/login"} {
		req := invoker.Request{Prompt: p, Workdir: "/w"}
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Stdin != p {
			t.Errorf("Stdin = %q, want %q", cmd.Stdin, p)
		}
		neutral := req
		neutral.Prompt = "hello"
		ncmd, _ := backend{}.Command(&neutral)
		if !slices.Equal(cmd.Args, ncmd.Args) {
			t.Errorf("prompt %q changed argv to %q", p, cmd.Args)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		req  invoker.Request
		want error
	}{
		{"unknown permission", invoker.Request{Prompt: "x", Permission: "all"}, invoker.ErrInvalidRequest},
		{"fork without a session", invoker.Request{Prompt: "x", Fork: true}, invoker.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := (backend{}).Command(&tt.req); !errors.Is(err, tt.want) {
				t.Errorf("Command() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFlagsExist(t *testing.T) {
	help, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, p := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited} {
		req := invoker.Request{Prompt: "x", Workdir: "/w", Model: "m", SessionID: "S", SystemPrompt: "s", Permission: p,
			OutputSchema: json.RawMessage(`{"type":"object"}`), MaxBudgetUSD: 0.5, Fork: true, Deltas: true}
		cmd, err := backend{}.Command(&req)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, cmd.Args...)
		sreq := req.Session()
		scmd, err := backend{}.SessionCommand(&sreq)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, scmd.Args...)
		// Two-way control: --permission-prompt-tool is hidden from
		// --help (the Agent SDKs pass it; the e2e tests run it).
		sreq.Approve = func(context.Context, invoker.Approval) invoker.Decision { return invoker.Decision{} }
		sreq.MCPServers = []invoker.MCPServer{{Name: "t", Server: mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)}}
		if scmd, err = (backend{}).SessionCommand(&sreq); err != nil {
			t.Fatal(err)
		}
		args = append(args, slices.DeleteFunc(scmd.Args, func(a string) bool { return a == "--permission-prompt-tool=stdio" })...)
		sreq.Approve = nil
		if scmd, err = (backend{}).SessionCommand(&sreq); err != nil {
			t.Fatal(err)
		}
		args = append(args, scmd.Args...)
	}
	flagRE := regexp.MustCompile(`^(--[A-Za-z-]+)(=(.*))?$`)
	for _, a := range args {
		m := flagRE.FindStringSubmatch(a)
		if m == nil {
			continue
		}
		if !regexp.MustCompile(`[\s,]` + regexp.QuoteMeta(m[1]) + `[\s,]`).Match(help) {
			t.Errorf("flag %s is not in claude --help", m[1])
		}
		if m[1] == "--permission-mode" && !regexp.MustCompile(`"`+m[3]+`"`).Match(help) {
			t.Errorf("permission mode %q is not in claude --help", m[3])
		}
	}
}

// TestUnsupportedFields checks that the fields the CLI lacks are refused by
// Invoke before anything starts, naming the field and what to do instead.
func TestUnsupportedFields(t *testing.T) {
	agenttest.CheckUnsupported(t, New, map[string]string{"Images": "Read tool"})
}
