//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/inspector"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestSandboxInspectorGemini: a command of Gemini CLI's model sends
// SIGUSR1 to Gemini CLI's node and looks for its inspector. Under the
// sandbox (network rules; the command nested in the CLI's domain) the
// signal is refused (the run's NODE_OPTIONS, which makes node listen for
// it, is the second layer: internal/sandbox's TestSandboxNodeInspector).
// Without the sandbox (the control) the command evaluates code in the CLI
// through it.
func TestSandboxInspectorGemini(t *testing.T) {
	inspectorRuns(t, "gemini")
}

// TestSandboxInspectorCodex: TestSandboxInspectorGemini for Codex, whose
// nearest node ancestor of a command is its npm launcher, the parent of
// the native codex.
func TestSandboxInspectorCodex(t *testing.T) {
	inspectorRuns(t, "codex")
}

// inspectorRuns runs inspector.Attack as a command of the model of name,
// under the sandbox (network rules) and without, and checks that the
// inspector is refused under the sandbox and reached without it.
func inspectorRuns(t *testing.T, name string) {
	forEachRig(t, []cli{*cliNamed(name)}, func(t *testing.T, r *rig) {
		attack := filepath.Join(r.workdir, "inspector-attack.js")
		if err := os.WriteFile(attack, []byte(inspector.Attack), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			sb   invoker.Sandbox
			want string
		}{
			// The nested command's signal to the CLI is refused
			// (Landlock's signal scope, ABI 6 and later, as here).
			{"network", invoker.Sandbox{Mode: "required", Network: []string{"none"}}, "attack: signal refused EPERM"},
			{"nosandbox", invoker.Sandbox{}, "attack: evaluated in pid "},
		} {
			t.Run(c.name, func(t *testing.T) {
				r.srv.Enqueue(fakemodel.Shell("node "+attack), fakemodel.EchoToolResult("after: "))
				req := r.request("look around")
				req.Permission, req.Sandbox = invoker.Unlimited, c.sb
				res, ev := probe(t, r, req)
				// Gemini CLI's tool results carry no output: the model
				// echoes the command's into the answer.
				out := res.Text
				for _, x := range ev.results {
					out += "\n" + x.Output
				}
				if !strings.Contains(out, "attack: node ancestor ") || !strings.Contains(out, c.want) {
					t.Errorf("the command's output: %q, want %q", out, c.want)
				}
			})
		}
	})
}

// TestSandboxInspectorMCPServer: a stdio MCP server that a sandboxed run
// of Codex, Claude Code, claude-code-acp or codex-acp starts gets the
// run's NODE_OPTIONS, with the option that keeps node's inspector closed,
// also where only Options.Sandbox asks for the sandbox (Codex passes a
// server only a fixed list of variables, those its env_vars names and its
// env table, where the codex backend sets NODE_OPTIONS; Claude Code passes
// its environment; claude-code-acp its environment but NODE_OPTIONS, and
// codex-acp nothing of it, beside the env of session/new, where the ACP
// client sets NODE_OPTIONS); without the sandbox (the control) the server
// gets no NODE_OPTIONS. A caller's env_vars override in Codex's ExtraArgs (one
// a trailing comment ends) reaches the server beside the option.
func TestSandboxInspectorMCPServer(t *testing.T) {
	agents := []cli{*cliNamed("codex"), *cliNamed("claude")}
	for _, a := range acpAgents {
		if a.name == "claude-code-acp" || a.name == "codex-acp" {
			agents = append(agents, a)
		}
	}
	// passes: the CLIs that pass their own environment on to a stdio
	// server (CLINVOKE_E2E_PASSED, set in the request's Env).
	passes := map[string]bool{"claude": true, "claude-code-acp": true}
	forEachRig(t, agents, func(t *testing.T, r *rig) {
		tools := r.cli.name
		if n, ok := acpToolCLI[tools]; ok {
			tools = n
		}
		w := twoWayOf(t, tools)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		type tcase struct {
			name    string
			opts    invoker.Sandbox // Options.Sandbox
			sb      invoker.Sandbox
			inside  bool
			envVars bool // the caller's env_vars names CLINVOKE_E2E_PASSED
		}
		on := invoker.Sandbox{Mode: "required", Network: []string{"none"}}
		cases := []tcase{
			{"network", invoker.Sandbox{}, on, true, false},
			{"options", on, invoker.Sandbox{}, true, false},
			{"nosandbox", invoker.Sandbox{}, invoker.Sandbox{}, false, false},
		}
		if r.cli.name == "codex" {
			cases = append(cases, tcase{"network_env_vars", invoker.Sandbox{}, on, true, true})
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := r
				if c.opts.Mode != "" {
					rr := *r
					rr.opts.Sandbox = c.opts
					rr.inv = r.cli.new(rr.opts)
					r = &rr
				}
				r.srv.Enqueue(w.call("ext", "nodeoptions", map[string]any{}), fakemodel.EchoToolResult("after: "))
				req := r.request("what does the server see?")
				req.Permission, req.Sandbox = invoker.Unlimited, c.sb
				req.MCPServers = []invoker.MCPServer{{Name: "ext", Command: self, Env: []string{stdioMCPEnv + "=m"}}}
				// The test binary lies beneath /tmp, which the sandbox
				// covers with the run's own: a path the CLI's environment
				// names is kept there.
				req.Env = append(req.Env, "CLINVOKE_E2E_MCP_SERVER="+self, "CLINVOKE_E2E_PASSED=yes")
				if c.envVars {
					// Codex refuses an override of a server its
					// config.toml lacks unless it names a command; the
					// request's entry replaces it (/bin/false would
					// answer nothing).
					req.ExtraArgs = append(req.ExtraArgs, "-c", `mcp_servers.ext.command="/bin/false"`,
						"-c", `mcp_servers.ext.env_vars=["CLINVOKE_E2E_PASSED"] # the caller's`)
				}
				res, err := r.invoke(context.Background(), req)
				if err != nil {
					t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
				}
				if !strings.Contains(res.Text, "node_options=") {
					t.Fatalf("answer %q, want the server's NODE_OPTIONS; stderr:\n%s", res.Text, res.Stderr)
				}
				if got := strings.Contains(res.Text, sandbox.NodeInspectorOff); got != c.inside {
					t.Errorf("answer %q: the server's NODE_OPTIONS holds %s: %v, want %v", res.Text, sandbox.NodeInspectorOff, got, c.inside)
				}
				// Claude Code and claude-code-acp pass their environment
				// on; Codex only what env_vars names (the controls: its
				// other cases); codex-acp what session/new's env holds.
				if got := strings.Contains(res.Text, `passed="yes"`); got != (c.envVars || passes[r.cli.name]) {
					t.Errorf("answer %q: the server got CLINVOKE_E2E_PASSED: %v", res.Text, got)
				}
			})
		}
	})
}
