package driver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// How the end of a run becomes Invoke's error: success only with the
// terminal success event, a typed error otherwise, and always a Result with
// what was gathered.
func TestOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		script   fakeagent.Script
		opts     []invoker.Options
		check    func(t *testing.T, err error)
		wantCode int
		wantText string
	}{
		{
			name:     "failure reported in the stream",
			script:   fakeagent.Script{Fail: "model overloaded", SessionID: "thread-f"},
			wantCode: 1,
			check: func(t *testing.T, err error) {
				var se *invoker.StreamError
				if !errors.As(err, &se) || se.Message != "model overloaded" {
					t.Errorf("Invoke() error = %v, want a *StreamError with the CLI's message", err)
				}
			},
		},
		{
			name:     "non-zero exit with stderr",
			script:   fakeagent.Script{ExitCode: 3, NoTerminal: true, Stderr: "something broke\nbadly"},
			wantCode: 3,
			check: func(t *testing.T, err error) {
				var ee *invoker.ExitError
				if !errors.As(err, &ee) || ee.ExitCode != 3 || !strings.Contains(ee.Stderr, "something broke") {
					t.Errorf("Invoke() error = %v, want an *ExitError with code 3 and the stderr tail", err)
				}
				if !strings.Contains(err.Error(), "badly") {
					t.Errorf("error message %q does not show the stderr tail", err)
				}
			},
		},
		{
			name:     "exit 0 without the terminal event",
			script:   fakeagent.Script{NoTerminal: true, Answer: "half an answer"},
			wantCode: 0,
			wantText: "half an answer",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrNoResult) {
					t.Errorf("Invoke() error = %v, want ErrNoResult", err)
				}
			},
		},
		{
			name:     "a program printing text, not events",
			script:   fakeagent.Script{Replay: "testdata/not-a-cli.stdout", Stderr: "agent-wrapper: giving up\n"},
			wantCode: 0,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrNoResult) {
					t.Errorf("Invoke() error = %v, want ErrNoResult", err)
				}
				for _, want := range []string{`"Usage: agent-wrapper [options] PROMPT"`, "is the binary the CLI", "stderr: agent-wrapper: giving up"} {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Invoke() error = %v, want it to show %s", err, want)
					}
				}
			},
		},
		{
			name:     "a stream truncated in its terminal event",
			script:   fakeagent.Script{Replay: "testdata/truncated.stdout", SessionID: "thread-t"},
			wantCode: 0,
			wantText: "cut short",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrNoResult) || !strings.Contains(err.Error(), "was its terminal event") {
					t.Errorf("Invoke() error = %v, want ErrNoResult saying no terminal event came", err)
				}
			},
		},
		{
			name:     "a program printing nothing",
			script:   fakeagent.Script{Replay: "testdata/empty.stdout"},
			wantCode: 0,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrNoResult) || !strings.Contains(err.Error(), "printed nothing on stdout") {
					t.Errorf("Invoke() error = %v, want ErrNoResult saying stdout was empty", err)
				}
			},
		},
		{
			name:     "fatal signature on stderr",
			script:   fakeagent.Script{Stderr: "FATAL: not logged in\n", StreamFor: time.Minute},
			opts:     fastLadder,
			wantCode: 1,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrAuthRequired) {
					t.Errorf("Invoke() error = %v, want ErrAuthRequired", err)
				}
			},
		},
		{
			name:   "first-event timeout",
			script: fakeagent.Script{SilentFor: time.Minute},
			// Long enough for the fake to start and record itself on a
			// busy machine, far shorter than its silence.
			opts:     append([]invoker.Options{invoker.Options{FirstEventTimeout: 3 * time.Second}}, fastLadder...),
			wantCode: 1,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrFirstEventTimeout) {
					t.Errorf("Invoke() error = %v, want ErrFirstEventTimeout", err)
				}
			},
		},
		{
			name:   "idle timeout",
			script: fakeagent.Script{StreamFor: time.Minute, Interval: time.Minute},
			// The same margin as the first-event case: long enough for the
			// race-built fake to start, print and record itself on a busy
			// machine, far shorter than the minute between its events.
			opts:     append([]invoker.Options{{IdleTimeout: 3 * time.Second}}, fastLadder...),
			wantCode: 1,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, invoker.ErrIdleTimeout) {
					t.Errorf("Invoke() error = %v, want ErrIdleTimeout", err)
				}
			},
		},
		{
			name:     "malformed and non-UTF-8 lines",
			script:   fakeagent.Script{Malformed: true, Answer: "still fine"},
			wantCode: 0,
			wantText: "still fine",
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Errorf("Invoke() error = %v, want nil", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.script, tt.opts...)
			res, err := f.inv.Invoke(context.Background(), f.req)
			tt.check(t, err)
			if res == nil {
				t.Fatal("Invoke() returned a nil Result")
			}
			if tt.wantCode != 1 && res.ExitCode != tt.wantCode {
				t.Errorf("Result.ExitCode = %d, want %d", res.ExitCode, tt.wantCode)
			}
			if tt.wantText != "" && res.Text != tt.wantText {
				t.Errorf("Result.Text = %q, want %q", res.Text, tt.wantText)
			}
			if tt.script.SessionID != "" && res.SessionID != tt.script.SessionID {
				t.Errorf("Result.SessionID = %q, want %q", res.SessionID, tt.script.SessionID)
			}
			f.assertReaped(1)
		})
	}
}

// The environment: the host's, minus what the backend unsets, plus invoker.Options.Env,
// the backend's variables and Request.Env, in that order of precedence, and
// the run marker.
func TestEnvironment(t *testing.T) {
	t.Setenv("CLINVOKE_TEST_HOST", "host")
	t.Setenv("CLINVOKE_TEST_UNSET", "should be gone")
	t.Setenv("CLINVOKE_TEST_OVERRIDE", "host")
	t.Setenv("CLAUDECODE", "1") // set by a host running under Claude Code
	s := fakeagent.Script{RecordDir: t.TempDir()}
	inv := driver.New(testBackend{unset: []string{"CLINVOKE_TEST_UNSET"}},
		invoker.Options{Binary: os.Args[0], Env: []string{"CLINVOKE_TEST_OVERRIDE=option", "CLINVOKE_TEST_OPTION=option"}})
	req := invoker.Request{Prompt: "env", Workdir: t.TempDir(), Env: append(s.Env(), "CLINVOKE_TEST_OVERRIDE=request")}
	if _, err := inv.Invoke(context.Background(), req); err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CLINVOKE_TEST_HOST":     "host",
		"CLINVOKE_TEST_UNSET":    "",
		"CLAUDECODE":             "",
		"CLINVOKE_TEST_OVERRIDE": "request",
		"CLINVOKE_TEST_OPTION":   "option",
		"FAKE_BACKEND_VAR":       "backend",
	}
	for k, v := range want {
		if got, _ := rec.Getenv(k); got != v {
			t.Errorf("CLI saw %s=%q, want %q", k, got, v)
		}
	}
	if v, _ := rec.Getenv(driver.MarkerVar); v == "" {
		t.Errorf("CLI environment lacks the run marker %s", driver.MarkerVar)
	}
}

func TestInheritEnvFilter(t *testing.T) {
	t.Setenv("CLINVOKE_TEST_SECRET", "secret")
	s := fakeagent.Script{RecordDir: t.TempDir()}
	inv := driver.New(testBackend{}, invoker.Options{Binary: os.Args[0], InheritEnv: func(k string) bool { return k != "CLINVOKE_TEST_SECRET" }})
	req := invoker.Request{Prompt: "env", Workdir: t.TempDir(), Env: s.Env()}
	if _, err := inv.Invoke(context.Background(), req); err != nil {
		t.Fatalf("Invoke() error = %v", err)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := rec.Getenv("CLINVOKE_TEST_SECRET"); ok {
		t.Errorf("filtered variable reached the CLI: %q", v)
	}
}
