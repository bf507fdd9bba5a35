package driver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
)

// newACP is an Invoker of the fake ACP agent (the test binary).
func newACP(opts ...invoker.Options) invoker.Invoker {
	return acp.New(acp.Agent{Name: "fakeacp", Command: []string{os.Args[0]}}, opts...)
}

// A run that fails while the kernel refused forks at its process limit
// fails with ErrResourceLimit for "processes", whatever the CLI or its
// decoder made of the failure: a CLI that cannot start a thread exits
// with a status its decoder reads as something else (Codex: 2, "usage
// error"; 101, "codex panicked"), or reports a failed turn. What the
// decoder said stays in the error's chain and message. The same holds
// for a run whose tool the OOM killer killed at the memory limit before
// the CLI failed, for every backend, through Invoke and a session's Turn.
func TestLimitsEvidenceWins(t *testing.T) {
	forks := fakeagent.Load{Forks: 10000, Hold: 50 * time.Millisecond, InCLI: true}
	procs := invoker.Options{Limits: invoker.Limits{Processes: 48}}
	for _, c := range []struct {
		name    string
		flavor  string
		new     func(...invoker.Options) invoker.Invoker
		script  fakeagent.Script
		opts    invoker.Options
		session bool   // a Turn of an open session rather than Invoke
		said    string // what the decoder said, kept in the message
		as      any    // the decoder's error, still found by errors.As
	}{
		{name: "codex exit 2", flavor: fakeagent.Codex, new: codex.New, opts: procs,
			script: fakeagent.Script{Load: forks, NoTerminal: true, ExitCode: 2}, said: "usage error", as: new(*invoker.ExitError)},
		{name: "codex exit 101", flavor: fakeagent.Codex, new: codex.New, opts: procs,
			script: fakeagent.Script{Load: forks, NoTerminal: true, ExitCode: 101}, said: "codex panicked", as: new(*invoker.ExitError)},
		{name: "codex turn.failed", flavor: fakeagent.Codex, new: codex.New, opts: procs,
			script: fakeagent.Script{Load: forks, Fail: "failed to spawn thread"}, said: "failed to spawn thread", as: new(*invoker.StreamError)},
		{name: "gemini exit 42", flavor: fakeagent.Gemini, new: gemini.New, opts: procs,
			script: fakeagent.Script{Load: forks, NoTerminal: true, ExitCode: 42}, said: "input error", as: new(*invoker.ExitError)},
		{name: "gemini error result", flavor: fakeagent.Gemini, new: gemini.New, opts: procs,
			script: fakeagent.Script{Load: forks, Fail: "spawn EAGAIN", ExitCode: 1}, said: "spawn EAGAIN", as: new(*invoker.StreamError)},
		{name: "claude is_error", flavor: fakeagent.Claude, new: claude.New, opts: procs,
			script: fakeagent.Script{Load: forks, Fail: "spawn EAGAIN"}, said: "spawn EAGAIN", as: new(*invoker.StreamError)},
		{name: "claude session turn", flavor: fakeagent.Claude, new: claude.New, opts: procs, session: true,
			script: fakeagent.Script{Load: forks, Fail: "spawn EAGAIN"}, said: "spawn EAGAIN", as: new(*invoker.StreamError)},
		{name: "acp failed prompt", flavor: fakeagent.ACP, new: newACP, opts: procs,
			script: fakeagent.Script{Load: forks, Fail: "spawn EAGAIN"}, said: "spawn EAGAIN"},
		{name: "claude tool OOM-killed", flavor: fakeagent.Claude, new: claude.New,
			opts:   invoker.Options{Limits: invoker.Limits{Memory: 128 * mib}},
			script: fakeagent.Script{Tool: true, Load: fakeagent.Load{Alloc: 256 * mib}, Fail: "the tool failed"}, said: "the tool failed", as: new(*invoker.StreamError)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newLimitRunOf(t, c.flavor, c.new, c.script, c.opts)
			resource, max := "processes", int64(48)
			requireLimits(t, r.inv, "Processes")
			if c.opts.Limits.Memory != 0 {
				resource, max = "memory", c.opts.Limits.Memory
				requireLimits(t, r.inv, "Memory")
			}
			var res *invoker.Result
			var err error
			if c.session {
				s, oerr := r.inv.OpenSession(context.Background(), r.req.Session())
				if oerr != nil {
					t.Fatalf("OpenSession() error = %v", oerr)
				}
				res, err = s.Turn(context.Background(), r.req.Turn())
				s.Close()
			} else {
				res, err = r.inv.Invoke(context.Background(), r.req)
			}
			t.Logf("error: %v; resources %+v", err, res.Resources)
			if res.Resources.ForksRefused == 0 && res.Resources.OOMKills == 0 {
				t.Fatalf("Resources = %+v: the limit did not act", res.Resources)
			}
			var le *invoker.LimitError
			if !errors.Is(err, invoker.ErrResourceLimit) || !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LimitError matching ErrResourceLimit", err)
			}
			if le.Resource != resource || le.Max != max {
				t.Errorf("LimitError = {Resource:%q Max:%d}, want %q and %d", le.Resource, le.Max, resource, max)
			}
			if !strings.Contains(err.Error(), c.said) {
				t.Errorf("error %q lost what the CLI said, %q", err, c.said)
			}
			if c.as != nil && !errors.As(err, c.as) {
				t.Errorf("error %v: the decoder's %T is not in its chain", err, c.as)
			}
		})
	}
}
