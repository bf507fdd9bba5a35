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
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// ladderSteps returns the run span's ladder steps in order, a step not
// taken because the CLI ignores its signal marked "(ignored)".
func ladderSteps(s sdktrace.ReadOnlySpan) []string {
	var steps []string
	for _, e := range s.Events() {
		if e.Name != "clinvoke.interrupt" && e.Name != "clinvoke.terminate" && e.Name != "clinvoke.kill" {
			continue
		}
		step := strings.TrimPrefix(e.Name, "clinvoke.")
		if slices.Contains(e.Attributes, attribute.Bool("clinvoke.signal.ignored", true)) {
			step += " (ignored)"
		}
		steps = append(steps, step)
	}
	return steps
}

// A CLI whose process ignores a signal (SIG_IGN: a host started with
// SIGINT ignored, as nohup and a shell script's `cmd &` leave it, passes
// that on, and a shell-script CLI cannot trap it) is sent it all the same,
// for the rest of its process group, whose tools may handle it: the
// ladder then goes on to the next step at once instead of waiting its
// grace, and straight to SIGKILL for a CLI that ignores both SIGINT and
// SIGTERM. A helper of the group that catches signals gets SIGINT.
// The ladder's own record says which steps were taken; the graces are
// long, so that a step waited out shows (BenchmarkCancelSigIgn shows the
// time).
func TestLadderSkipsIgnoredSignals(t *testing.T) {
	tests := []struct {
		name   string
		sigIgn []string
		want   []string
		exit   attribute.KeyValue
		group  string // a signal the group's helper catches; "" not looked at
	}{
		{"none ignored", nil, []string{"interrupt"}, attribute.Int("process.exit.code", 1), "SIGINT"},
		// Codex exits 143 on SIGTERM.
		{"SIGINT ignored", []string{"SIGINT"}, []string{"interrupt (ignored)", "terminate"}, attribute.Int("process.exit.code", 143), "SIGINT"},
		// Killed outright, the fake cannot wait for its helper to record.
		{"SIGINT and SIGTERM ignored", []string{"SIGINT", "SIGTERM"}, []string{"interrupt (ignored)", "terminate (ignored)", "kill"}, attribute.String("clinvoke.exit.signal", "SIGKILL"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig := newTelRig(t)
			s := codexScript(t, fakeagent.Script{StreamFor: time.Hour, SigIgn: tt.sigIgn, Grandchild: true, GrandchildTraps: tt.group != ""})
			inv := codex.New(rig.options(invoker.Options{InterruptGrace: 30 * time.Second, TerminateGrace: 30 * time.Second})...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := inv.Invoke(ctx, invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(), OnEvent: func(ev invoker.Event) {
				if ev.Kind == invoker.KindSession {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Invoke() error = %v, want context.Canceled", err)
			}
			assertGone(t, s, 2)
			run := rig.span("invoke_agent codex")
			if got := ladderSteps(run); !slices.Equal(got, tt.want) {
				t.Errorf("ladder steps = %q, want %q", got, tt.want)
			}
			checkAttrs(t, run, tt.exit)
			if tt.group == "" {
				return
			}
			rec, err := fakeagent.ReadRecord(s.RecordDir)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Signals[rec.Pid("sleeper")]; !slices.Contains(got, tt.group) {
				t.Errorf("the group's helper caught %q, want %s among them", got, tt.group)
			}
		})
	}
}
