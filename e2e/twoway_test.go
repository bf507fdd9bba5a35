//go:build e2e

package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

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

// A toolSpan times a turn from its start (set by the caller before the
// turn), and, from its events, the time from its first tool call to that
// call's result: a tool's round trip as the program sees it, the approval
// (or the Go handler) included, the model's time excluded. (When a CLI
// reports a call only once its tool has run, as Codex's app-server does
// for a command that needs no approval, the round trip misses the tool's
// run: the turn's time is the figure to compare across CLIs.)
type toolSpan struct {
	start        time.Time
	mu           sync.Mutex
	call, result time.Time
	id           string
}

// on is the turn's OnEvent.
func (s *toolSpan) on(ev invoker.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ev.Kind == invoker.KindToolCall && s.call.IsZero():
		s.call = time.Now()
		if ev.Tool != nil {
			s.id = ev.Tool.ID
		}
	case ev.Kind == invoker.KindToolResult && !s.call.IsZero() && s.result.IsZero() &&
		(s.id == "" || ev.Tool == nil || ev.Tool.ID == s.id):
		s.result = time.Now()
	}
}

// A timing is one measured turn: its time from start to return, and its
// tool's round trip.
type timing struct{ turn, tool time.Duration }

// get returns the timing of the turn, which has just returned, failing b
// when it had no tool call and result.
func (s *toolSpan) get(b testing.TB) timing {
	turn := time.Since(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.call.IsZero() || s.result.IsZero() {
		b.Fatal("the turn reported no tool call with its result")
	}
	return timing{turn: turn, tool: s.result.Sub(s.call)}
}

// medians returns the median turn and tool times of ts, in milliseconds.
func medians(ts []timing) (turn, tool float64) {
	var a, b []time.Duration
	for _, t := range ts {
		a, b = append(a, t.turn), append(b, t.tool)
	}
	return medMs(a), medMs(b)
}

// reportApproval reports the medians of the turns (and tool round trips)
// whose command the Approve callback allowed and of the same turns with
// the command allowed by the permission level, and the ratio of the turns
// (scripts/benchreport reads these names).
func reportApproval(b *testing.B, approved, own []timing) {
	at, ar := medians(approved)
	ot, or := medians(own)
	b.ReportMetric(at, "approved-turn-ms")
	b.ReportMetric(ot, "own-turn-ms")
	b.ReportMetric(at/ot, "approval/own")
	b.ReportMetric(ar, "approved-tool-ms")
	b.ReportMetric(or, "own-tool-ms")
}

// reportGoTool reports the same for turns calling a Go tool and turns
// where the CLI's own shell tool does the same work.
func reportGoTool(b *testing.B, gotool, own []timing) {
	gt, gr := medians(gotool)
	ot, or := medians(own)
	b.ReportMetric(gt, "gotool-turn-ms")
	b.ReportMetric(ot, "own-turn-ms")
	b.ReportMetric(gt/ot, "gotool/own")
	b.ReportMetric(gr, "gotool-ms")
	b.ReportMetric(or, "own-tool-ms")
}
