package driver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// How what a run lost turns into its error: a skipped line or streams cut
// at the wait delay are never a clean success, and the error says so.
func TestVerdictNamesWhatWasLost(t *testing.T) {
	tests := []struct {
		name        string
		out         Outcome
		skipped     int
		waitDelayed bool
		want        []error // errors.Is targets; nil means a nil error
		notWant     []error
		wantMsg     []string
	}{
		{name: "clean success", out: Outcome{Success: true}},
		{
			name: "success after streams cut at the wait delay",
			out:  Outcome{Success: true}, waitDelayed: true,
		},
		{
			name: "success after a skipped line",
			out:  Outcome{Success: true}, skipped: 1,
			want:    []error{invoker.ErrLineTooLong},
			notWant: []error{invoker.ErrNoResult},
			wantMsg: []string{"reported success", "104857600 bytes", "Options.MaxLineSize"},
		},
		{
			name: "no terminal event after a skipped line", skipped: 2,
			want:    []error{invoker.ErrNoResult, invoker.ErrLineTooLong},
			wantMsg: []string{"2 stdout lines", "Options.MaxLineSize"},
		},
		{
			name: "no terminal event, streams cut at the wait delay", waitDelayed: true,
			want:    []error{invoker.ErrNoResult},
			notWant: []error{invoker.ErrLineTooLong},
			wantMsg: []string{"wait delay", "Result.OutputCut"},
		},
		{
			name: "a failure reported in the stream wins", skipped: 1,
			out:     Outcome{Err: &invoker.StreamError{Message: "overloaded"}},
			want:    []error{errStreamTarget},
			notWant: []error{invoker.ErrLineTooLong},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRun(time.Second)
			r.stats.skipped, r.stats.skippedMax, r.exit.cut = tt.skipped, 100<<20, tt.waitDelayed
			err := r.verdict(&tt.out, r.skippedError(), nil, &invoker.Result{})
			if tt.want == nil {
				if err != nil {
					t.Errorf("verdict() = %v, want nil", err)
				}
				return
			}
			for _, w := range tt.want {
				if w == errStreamTarget {
					var se *invoker.StreamError
					if !errors.As(err, &se) {
						t.Errorf("verdict() = %v, want a *StreamError", err)
					}
					continue
				}
				if !errors.Is(err, w) {
					t.Errorf("verdict() = %v, want it to match %v", err, w)
				}
			}
			for _, w := range tt.notWant {
				if errors.Is(err, w) {
					t.Errorf("verdict() = %v, want it not to match %v", err, w)
				}
			}
			for _, m := range tt.wantMsg {
				if err == nil || !strings.Contains(err.Error(), m) {
					t.Errorf("verdict() = %v, want its message to contain %q", err, m)
				}
			}
		})
	}
}

// errStreamTarget stands for "a *StreamError" in the table above.
var errStreamTarget = errors.New("a *StreamError")
