//go:build e2e

package e2e

import "testing"

// A twoWayCLI holds one CLI's scenarios of two-way control: the program
// approving or denying what the agent asks to do (Request.Approve), and
// tools written in Go that the agent calls (MCPServer.Server). Each CLI's
// file (twoway_<cli>_test.go) registers its own in twoWay.
type twoWayCLI struct {
	// approval: the model asks to run a command that creates a file; a
	// deny means the file is absent and the model's next request carries
	// the denial; an allow runs it; a turn cancelled while the callback
	// waits ends cleanly with nothing left.
	approval func(t *testing.T, r *rig)
	// goTools: the model calls a Go tool with arguments; the handler sees
	// them; its result is in the model's next request; a turn cancelled
	// while the handler blocks cancels the handler's context, and the run
	// returns with nothing left.
	goTools func(t *testing.T, r *rig)
	// mcpServers: an external MCP server (a stdio command) given in
	// Request.MCPServers is reached by the CLI, runs inside the run's
	// containment, and is gone when the run returns.
	mcpServers func(t *testing.T, r *rig)
	// benchApproval and benchGoTool measure one approval round trip and
	// one Go tool call round trip against the CLI's own tool doing the
	// same work in the same run.
	benchApproval, benchGoTool func(b *testing.B)
}

// twoWay maps a CLI's name to its scenarios.
var twoWay = map[string]*twoWayCLI{}

// forEachTwoWay runs the scenario pick chooses for every CLI, on a fresh
// rig.
func forEachTwoWay(t *testing.T, pick func(*twoWayCLI) func(*testing.T, *rig)) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		w := twoWay[r.cli.name]
		if w == nil || pick(w) == nil {
			t.Fatalf("no scenario for %s: register it in twoway_%s_test.go", r.cli.name, r.cli.name)
		}
		pick(w)(t, r)
	})
}

func TestApproval(t *testing.T) {
	forEachTwoWay(t, func(w *twoWayCLI) func(*testing.T, *rig) { return w.approval })
}

func TestGoTools(t *testing.T) {
	forEachTwoWay(t, func(w *twoWayCLI) func(*testing.T, *rig) { return w.goTools })
}

func TestMCPServers(t *testing.T) {
	forEachTwoWay(t, func(w *twoWayCLI) func(*testing.T, *rig) { return w.mcpServers })
}

// forEachTwoWayBench runs the benchmark pick chooses for every CLI.
func forEachTwoWayBench(b *testing.B, pick func(*twoWayCLI) func(*testing.B)) {
	for i := range clis {
		name := clis[i].name
		b.Run(name, func(b *testing.B) {
			w := twoWay[name]
			if w == nil || pick(w) == nil {
				b.Fatalf("no benchmark for %s: register it in twoway_%s_test.go", name, name)
			}
			pick(w)(b)
		})
	}
}

func BenchmarkApproval(b *testing.B) {
	forEachTwoWayBench(b, func(w *twoWayCLI) func(*testing.B) { return w.benchApproval })
}

func BenchmarkGoTool(b *testing.B) {
	forEachTwoWayBench(b, func(w *twoWayCLI) func(*testing.B) { return w.benchGoTool })
}
