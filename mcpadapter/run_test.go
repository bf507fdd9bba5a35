package mcpadapter

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// counter is an Invoker that counts its calls and answers at once.
type counter struct {
	invokeOnly
	calls int
}

func (c *counter) Name() string { return "codex" }

func (c *counter) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	c.calls++
	return &invoker.Result{Text: "done"}, nil
}

// newTool returns the tool of inv as Register would make it, without a
// server: its handlers are called directly, bypassing the SDK's schema
// validation.
func newTool(t *testing.T, opts *Options, inv invoker.Invoker) *tool {
	t.Helper()
	cfg, err := newConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &tool{shared: newShared(cfg), inv: inv, name: inv.Name(), f: featuresOf(inv)}
}

// TestParallelTaskCountRefused checks the handler's own bound on the tasks
// of a call: an empty result list, nothing started, one transcript line.
func TestParallelTaskCountRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	inv := &counter{}
	tl := newTool(t, &Options{MaxTasks: 2, TranscriptPath: path}, inv)
	dir := t.TempDir()
	for _, n := range []int{0, 3} {
		in := ParallelInput{Workdir: dir, Tasks: make([]Input, n)}
		for i := range in.Tasks {
			in.Tasks[i].Prompt = "p"
		}
		res, out, err := tl.handleParallel(context.Background(), nil, in)
		if err != nil || res == nil || !res.IsError {
			t.Fatalf("%d tasks: handleParallel() = %v, %v; want an isError result", n, res, err)
		}
		if out.Results == nil || len(out.Results) != 0 || out.Completed+out.Failed+out.Cancelled != 0 {
			t.Errorf("%d tasks: output %+v, want an empty results list", n, out)
		}
		if msg := res.GetError().Error(); !strings.Contains(msg, "refused, nothing was started: give 1 to 2 tasks") {
			t.Errorf("%d tasks: error %q", n, msg)
		}
	}
	if inv.calls != 0 {
		t.Errorf("the invoker ran %d times, want 0", inv.calls)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no transcript: %v", err)
	}
	defer f.Close()
	var entries []TranscriptEntry
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e TranscriptEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	if len(entries) != 2 {
		t.Fatalf("transcript has %d entries, want 2", len(entries))
	}
	for _, e := range entries {
		if e.Tool != "codex_parallel" || e.Status != StatusRefused || e.Workdir != dir || !strings.Contains(e.Error, "give 1 to 2 tasks") {
			t.Errorf("transcript entry %+v, want the refusal", e)
		}
	}
}

// capCounter is a counter that declares capabilities.
type capCounter struct {
	counter
	caps invoker.Capabilities
}

func (c *capCounter) Capabilities() invoker.Capabilities { return c.caps }

// TestLimitsRefusedByHandler checks the handler's own checks of the
// structured-answer and limit inputs, for calls that bypass the schema:
// nothing starts.
func TestLimitsRefusedByHandler(t *testing.T) {
	dir := t.TempDir()
	none := &capCounter{}
	all := &capCounter{caps: invoker.Capabilities{OutputSchema: true, MaxTurns: true, MaxBudget: true}}
	for _, tt := range []struct {
		inv  *capCounter
		opts *Options
		in   Input
		want string
	}{
		{none, nil, Input{OutputSchema: json.RawMessage(`{"type":"object"}`)}, "takes no output_schema"},
		{none, nil, Input{MaxTurns: 2}, "takes no max_turns"},
		{none, nil, Input{MaxBudgetUSD: 1}, "takes no max_budget_usd"},
		{all, nil, Input{MaxTurns: -1}, "max_turns -1"},
		{all, nil, Input{MaxBudgetUSD: -1}, "max_budget_usd -1"},
		{all, &Options{MaxTurns: 3}, Input{MaxTurns: 4}, "above this server's limit 3"},
		{all, &Options{MaxBudgetUSD: 0.25}, Input{MaxBudgetUSD: 0.5}, "above this server's limit $0.25"},
		// The invoker checks the schema: its ErrInvalidRequest is a refusal.
	} {
		tt.in.Prompt, tt.in.Workdir = "hi", dir
		tl := newTool(t, tt.opts, tt.inv)
		_, out, err := tl.handle(context.Background(), nil, tt.in)
		if err != nil || out.Status != StatusRefused || !strings.Contains(out.Error, tt.want) {
			t.Errorf("handle(%+v) = %+v, %v; want refused with %q", tt.in, out, err, tt.want)
		}
	}
	if none.calls+all.calls != 0 {
		t.Errorf("the invoker ran %d times, want 0", none.calls+all.calls)
	}
}

// invokeOnly gives a test's Invoker the methods its tests do not use:
// every optional Request field declared, and no session mode.
type invokeOnly struct{}

func (invokeOnly) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Images: true, SystemPrompt: true,
		OutputSchema: true, MaxTurns: true, MaxBudget: true}
}

func (invokeOnly) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}
