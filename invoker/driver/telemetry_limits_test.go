package driver_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// A run that waited for the Budget: its span has the wait's events
// (clinvoke.queued with its place, clinvoke.admitted with the time waited)
// and what the run used; the metrics have the waits, the runs waiting
// (back at 0) and the resources of each run.
func TestTelemetryQueuedAndResources(t *testing.T) {
	rig := newTelRig(t)
	budget := &invoker.Budget{Runs: 1}
	holder := codexScript(t, fakeagent.Script{})
	inv := codex.New(rig.options(invoker.Options{Budget: budget})...)
	s, err := inv.OpenSession(context.Background(), invoker.SessionRequest{Workdir: t.TempDir(), Env: holder.Env()})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	waiter := codexScript(t, fakeagent.Script{Tool: true})
	queued := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once bool
		_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: waiter.Env(),
			OnEvent: func(ev invoker.Event) {
				if ev.Kind == invoker.KindQueued && !once {
					once = true
					close(queued)
				}
			}})
		done <- err
	}()
	<-queued
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	assertGone(t, waiter, 1)
	rig.checkAllEnded()

	run := rig.span("invoke_agent codex")
	for _, ev := range []string{"clinvoke.queued", "clinvoke.admitted", "clinvoke.start"} {
		if !hasEvent(run, ev) {
			t.Errorf("run span events = %v, want %s", events(run), ev)
		}
	}
	if i, j := slices.Index(events(run), "clinvoke.admitted"), slices.Index(events(run), "clinvoke.start"); i > j {
		t.Errorf("run span events = %v: admitted after the start", events(run))
	}
	checkEventAttr(t, run, "clinvoke.queued", attribute.Int("clinvoke.queue.ahead", 0))
	checkEventAttr(t, run, "clinvoke.admitted", attribute.Bool("clinvoke.queue.admitted", true))
	checkHasAttrs(t, run, "clinvoke.memory.peak", "clinvoke.cpu.time", "clinvoke.processes.peak", "clinvoke.resources.sampled")
	checkHasAttrs(t, rig.span("session codex"), "clinvoke.memory.peak", "clinvoke.cpu.time")

	rm := rig.collect()
	cli := attribute.String("clinvoke.cli", "codex")
	if n, total := count(rm, "clinvoke.run.queued", cli, attribute.Bool("clinvoke.queue.admitted", true)); n != 2 || total <= 0 {
		t.Errorf("clinvoke.run.queued count %d, sum %v; want the session's wait of 0 and the run's", n, total)
	}
	if v, ok := sum(rm, "clinvoke.runs.waiting", cli); !ok || v != 0 {
		t.Errorf("clinvoke.runs.waiting = %v (present: %v), want back at 0", v, ok)
	}
	for _, name := range []string{"clinvoke.run.memory.peak", "clinvoke.run.cpu.time"} {
		if n, total := count(rm, name, cli); n != 2 || total <= 0 {
			t.Errorf("%s count %d, sum %v; want the run and the session", name, n, total)
		}
	}
}

// checkEventAttr checks that the span's first event name has the
// attribute want.
func checkEventAttr(t *testing.T, s sdktrace.ReadOnlySpan, name string, want attribute.KeyValue) {
	t.Helper()
	for _, e := range s.Events() {
		if e.Name != name {
			continue
		}
		for _, kv := range e.Attributes {
			if kv == want {
				return
			}
		}
		t.Errorf("event %s attributes %v, want %v", name, e.Attributes, want)
		return
	}
}

// A run whose CLI the kernel killed at its memory limit: outcome
// resource_limit, and the limit named on the span.
func TestTelemetryResourceLimit(t *testing.T) {
	rig := newTelRig(t)
	s := codexScript(t, fakeagent.Script{Load: fakeagent.Load{Alloc: 256 * mib, InCLI: true}})
	inv := codex.New(rig.options(invoker.Options{Limits: invoker.Limits{Memory: 64 * mib}})...)
	requireLimits(t, inv, "Memory")
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env()})
	if err == nil || !strings.Contains(err.Error(), "memory limit of 64 MiB") {
		t.Fatalf("Invoke() error = %v, want the memory limit", err)
	}
	run := rig.span("invoke_agent codex")
	checkAttrs(t, run,
		attribute.String("clinvoke.outcome", "resource_limit"),
		attribute.String("clinvoke.limit.resource", "memory"),
		attribute.Int64("clinvoke.limit.max", 64*mib),
	)
	checkRunMetrics(t, rig.collect(), "codex", "invoke", "resource_limit")
}

// A run that failed while forks were refused at its process limit, in
// words its backend reads as an authentication failure (Gemini CLI's exit
// status 41): the kernel's evidence names the outcome, resource_limit, as
// it names the error.
func TestTelemetryEvidenceOutcome(t *testing.T) {
	rig := newTelRig(t)
	s := fakeagent.Script{Flavor: fakeagent.Gemini, NoTerminal: true, ExitCode: 41, Tag: fakeagent.NewTag(),
		Load: fakeagent.Load{Forks: 10000, Hold: 50 * time.Millisecond, InCLI: true}}
	inv := gemini.New(rig.options(invoker.Options{Limits: invoker.Limits{Processes: 48}})...)
	requireLimits(t, inv, "Processes")
	_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env()})
	if !errors.Is(err, invoker.ErrResourceLimit) || !errors.Is(err, invoker.ErrAuthRequired) {
		t.Fatalf("Invoke() error = %v, want ErrResourceLimit keeping the CLI's ErrAuthRequired", err)
	}
	if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
		t.Errorf("processes of the run survived: %v", left)
	}
	checkAttrs(t, rig.span("invoke_agent gemini"),
		attribute.String("clinvoke.outcome", "resource_limit"),
		attribute.String("clinvoke.limit.resource", "processes"),
		attribute.Int64("clinvoke.limit.max", 48),
	)
}
