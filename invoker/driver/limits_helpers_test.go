package driver_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// Helpers of the tests of limits, accounting and admission.

const mib = 1 << 20

// requireLimits fails (in CI, as root) or skips the test where inv cannot
// enforce the fields of Limits named.
func requireLimits(t *testing.T, inv invoker.Invoker, fields ...string) {
	t.Helper()
	c := inv.Capabilities()
	have := strings.Fields(c.Limits)
	for _, f := range fields {
		if !slices.Contains(have, f) {
			if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
				t.Fatalf("Capabilities.Limits = %q, want %s: CI runs as root, where limits must work (%s)", c.Limits, f, c.LimitsNote)
			}
			t.Skipf("no %s limit on this host: %s", f, c.LimitsNote)
		}
	}
}

// limitRun is one run of Claude Code's fake agent with a script.
type limitRun struct {
	t      *testing.T
	script fakeagent.Script
	inv    invoker.Invoker
	req    invoker.Request
}

// newLimitRun prepares a run of script on a claude Invoker with opts, and
// checks at the end of the test that nothing of it survived.
func newLimitRun(t *testing.T, s fakeagent.Script, opts ...invoker.Options) *limitRun {
	t.Helper()
	return newLimitRunOf(t, fakeagent.Claude, claude.New, s, opts...)
}

// newLimitRunOf is newLimitRun for the fake of flavor on the Invoker made
// by newInv.
func newLimitRunOf(t *testing.T, flavor string, newInv func(...invoker.Options) invoker.Invoker, s fakeagent.Script, opts ...invoker.Options) *limitRun {
	t.Helper()
	s.Flavor = flavor
	if s.RecordDir == "" {
		s.RecordDir = t.TempDir()
	}
	if s.Tag == "" {
		s.Tag = fakeagent.NewTag()
	}
	opts = append([]invoker.Options{{Binary: os.Args[0], Logger: testLogger(t)}}, opts...)
	r := &limitRun{t: t, script: s, inv: newInv(opts...)}
	r.req = invoker.Request{Prompt: "run the tool", Workdir: t.TempDir(), Env: s.Env()}
	t.Cleanup(func() {
		if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
			t.Errorf("processes of the run survived: %v", left)
		}
	})
	return r
}

// gateAtDone makes the fake wait, after its terminal event and before
// its TouchAtExit, until the run has delivered KindDone (the warnings of
// what came before it included): a FIFO in the run's Workdir, opened by
// the run's OnEvent at KindDone. Call it once Workdir and OnEvent are set,
// before anything is added to Env.
func (r *limitRun) gateAtDone() {
	r.t.Helper()
	path, open, err := fakeagent.NewExitGate(r.req.Workdir)
	if err != nil {
		r.t.Fatal(err)
	}
	r.script.ExitGate = path
	r.req.Env = r.script.Env()
	on := r.req.OnEvent
	r.req.OnEvent = func(ev invoker.Event) {
		on(ev)
		if ev.Kind == invoker.KindDone {
			if err := open(); err != nil {
				r.t.Errorf("opening the exit gate: %v", err)
			}
		}
	}
}

// events collects a run's events, with the time each came.
type evlog struct {
	mu  sync.Mutex
	evs []invoker.Event
	at  []time.Time
}

func (e *evlog) on(ev invoker.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs, e.at = append(e.evs, ev), append(e.at, time.Now())
}

// first returns the first event of kind k whose text holds text, and when
// it came.
func (e *evlog) first(k invoker.EventKind, text string) (invoker.Event, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, ev := range e.evs {
		if ev.Kind == k && strings.Contains(ev.Text, text) {
			return ev, e.at[i], true
		}
	}
	return invoker.Event{}, time.Time{}, false
}

func (e *evlog) count(k invoker.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}
