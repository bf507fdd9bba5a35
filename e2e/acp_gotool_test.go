//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// acpToolCLI names, for the ACP agents whose model-side tool names are
// those of a CLI of twoWay, that CLI. (Qwen Code 0.x registers the tool
// under neither Gemini CLI's name nor Claude Code's; opencode's is not
// known.)
var acpToolCLI = map[string]string{"gemini": "gemini", "claude-code-acp": "claude", "codex-acp": "codex"}

// TestACPGoTool: an ACP agent's MCP client reaches the run's Go tools
// over loopback HTTP, whose endpoint admits the agent's own session
// only: the model's call of the Go tool reaches the handler, once, and
// no connection to the endpoint is refused (no warning).
func TestACPGoTool(t *testing.T) {
	var agents []cli
	for _, a := range acpAgents {
		if _, ok := acpToolCLI[a.name]; ok {
			agents = append(agents, a)
		}
	}
	forEachRig(t, agents, func(t *testing.T, r *rig) {
		w := twoWayOf(t, acpToolCLI[r.cli.name])
		var rec recorder
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "from the agent"}), fakemodel.EchoToolResult("after: "))
		req := r.request("record it")
		req.Permission = invoker.Unlimited
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
		var a approvals
		req.Approve = a.decide(invoker.Decision{Allow: true})
		var warns []string
		req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindWarning && strings.Contains(ev.Text, "Go tools' endpoint") {
				warns = append(warns, ev.Text)
			}
		}
		res, err := r.invoke(context.Background(), req)
		for _, w := range warns {
			t.Errorf("the agent's connection was refused: %s", w)
		}
		if err != nil {
			t.Fatalf("Invoke() error = %v; stderr:\n%s", err, res.Stderr)
		}
		if seen := rec.texts(); len(seen) != 1 || seen[0] != "from the agent" {
			t.Errorf("the handler saw %q, want the model's arguments once; answer %q", seen, res.Text)
		}
	})
}
