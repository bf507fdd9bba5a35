package driver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

func TestMain(m *testing.M) {
	fakeagent.Main() // the test binary doubles as the fake agent CLI
	goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
}

// Short ladder for tests: the behaviour is the same, only faster.
var fastLadder = []invoker.Options{
	invoker.Options{InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond},
}

// fixture is one scripted run of the fake agent.
type fixture struct {
	t      *testing.T
	script fakeagent.Script
	inv    invoker.Invoker
	req    invoker.Request
}

// newFixture prepares an Invoker running the test binary as the fake agent
// with script s, and registers a check that nothing of the run survives.
func newFixture(t *testing.T, s fakeagent.Script, opts ...invoker.Options) *fixture {
	t.Helper()
	if s.RecordDir == "" {
		s.RecordDir = t.TempDir()
	}
	if s.Tag == "" {
		s.Tag = fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
	}
	opts = append([]invoker.Options{invoker.Options{Binary: os.Args[0], Logger: testLogger(t)}}, opts...)
	return &fixture{
		t:      t,
		script: s,
		inv:    driver.New(testBackend{}, opts...),
		req:    invoker.Request{Prompt: "say hello", Workdir: t.TempDir(), Env: s.Env()},
	}
}

// record returns what the fake agent recorded about its processes.
func (f *fixture) record() *fakeagent.Record {
	f.t.Helper()
	rec, err := fakeagent.ReadRecord(f.script.RecordDir)
	if err != nil {
		f.t.Fatalf("ReadRecord: %v", err)
	}
	return rec
}

// assertReaped checks, right after Invoke returned, that no process of the
// run is alive: neither a recorded pid nor anything carrying the run's tag.
// wantProcs is the least number of processes the script must have started,
// so the check cannot pass vacuously.
func (f *fixture) assertReaped(wantProcs int) {
	f.t.Helper()
	rec := f.record()
	if len(rec.Procs) < wantProcs {
		f.t.Errorf("fake agent recorded %d processes, want at least %d", len(rec.Procs), wantProcs)
	}
	if alive := rec.Alive(); len(alive) > 0 {
		f.t.Errorf("processes of the run still alive after Invoke returned: %v", alive)
	}
	if alive := fakeagent.Survivors(f.script.Tag); len(alive) > 0 {
		f.t.Errorf("processes carrying the run's tag still alive after Invoke returned: %v", alive)
	}
}

func TestInvokeCompletes(t *testing.T) {
	f := newFixture(t, fakeagent.Script{SessionID: "thread-1", Answer: "Hello there."})
	var kinds []invoker.EventKind
	f.req.OnEvent = func(ev invoker.Event) { kinds = append(kinds, ev.Kind) }
	res, err := f.inv.Invoke(context.Background(), f.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	if res.SessionID != "thread-1" || res.Text != "Hello there." || res.ExitCode != 0 {
		t.Errorf("Invoke() = {SessionID:%q Text:%q ExitCode:%d}, want thread-1, Hello there., 0", res.SessionID, res.Text, res.ExitCode)
	}
	if len(kinds) == 0 || kinds[0] != invoker.KindSession || kinds[len(kinds)-1] != invoker.KindDone {
		t.Errorf("event kinds = %v, want session first and done last", kinds)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v, want > 0", res.Duration)
	}
	f.assertReaped(1)
}

// A cancelled run returns the context's error with the session id and the
// partial text, and leaves neither the CLI, nor its grandchild, nor a
// process that escaped into a session of its own.
func TestCancelMidStreamKillsWholeTree(t *testing.T) {
	f := newFixture(t, fakeagent.Script{
		SessionID:  "thread-cancel",
		Chunks:     3,
		StallFor:   time.Minute,
		Grandchild: true,
		Escapee:    true,
	}, fastLadder...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			cancel() // mid-stream: the agent has said something
		}
	}
	res, err := f.inv.Invoke(ctx, f.req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke() error = %v, want context.Canceled", err)
	}
	if res == nil {
		t.Fatal("Invoke() returned a nil Result")
	}
	if res.SessionID != "thread-cancel" {
		t.Errorf("Result.SessionID = %q, want thread-cancel", res.SessionID)
	}
	if res.Text == "" {
		t.Error("Result.Text is empty, want the partial text seen before the cancel")
	}
	f.assertReaped(3) // CLI, grandchild, escapee
}

// expiring is a context whose deadline passes when expire is called: a
// deadline that a test can make pass after an event, whatever the
// machine's speed.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiring) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *expiring) Done() <-chan struct{}       { return c.done }
func (c *expiring) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestDeadlineActsLikeCancel(t *testing.T) {
	f := newFixture(t, fakeagent.Script{StreamFor: time.Minute, Grandchild: true}, fastLadder...)
	ctx := newExpiring()
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindSession {
			ctx.expire() // the deadline passes once the session is known
		}
	}
	res, err := f.inv.Invoke(ctx, f.req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Invoke() error = %v, want context.DeadlineExceeded", err)
	}
	if res.SessionID == "" {
		t.Error("Result.SessionID is empty after the deadline, want the session seen")
	}
	f.assertReaped(2)
}

// A CLI that ignores SIGINT and SIGTERM is killed at the end of the ladder.
func TestStubbornChildIsKilledAtEndOfLadder(t *testing.T) {
	f := newFixture(t, fakeagent.Script{StreamFor: time.Minute, IgnoreSignals: true, Grandchild: true}, fastLadder...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindSession {
			cancel()
		}
	}
	res, err := f.inv.Invoke(ctx, f.req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke() error = %v, want context.Canceled", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("Result.ExitCode = %d, want -1 (killed by a signal)", res.ExitCode)
	}
	f.assertReaped(2)
}

// A CLI that exits while its grandchild keeps stdout open: Invoke returns
// with the answer instead of waiting for the grandchild, and the grandchild
// is gone.
func TestPipeHeldByGrandchild(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Answer: "done", HoldStdout: true})
	res, err := f.inv.Invoke(context.Background(), f.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	if res.Text != "done" {
		t.Errorf("Result.Text = %q, want done", res.Text)
	}
	f.assertReaped(2)
}

func TestHugeLines(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		maxLine  int
		wantWarn bool
	}{
		{"8MiB", 8 << 20, 0, false},
		{"64MiB", 64 << 20, 65 << 20, false},
		{"over the cap", 2 << 20, 1 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []invoker.Options
			if tt.maxLine > 0 {
				opts = append(opts, invoker.Options{MaxLineSize: tt.maxLine})
			}
			f := newFixture(t, fakeagent.Script{HugeLine: tt.size, Answer: "after the big line"}, opts...)
			var longest int
			var warned bool
			f.req.OnEvent = func(ev invoker.Event) {
				longest = max(longest, len(ev.Raw))
				if ev.Kind == invoker.KindWarning && strings.Contains(ev.Text, "exceeds the line limit") {
					warned = true
				}
			}
			res, err := f.inv.Invoke(context.Background(), f.req)
			switch {
			case tt.wantWarn && !errors.Is(err, invoker.ErrLineTooLong):
				// The line skipped may have held the answer: never a
				// success.
				t.Errorf("Invoke() error = %v, want ErrLineTooLong", err)
			case !tt.wantWarn && err != nil:
				t.Fatalf("Invoke() error = %v, want nil", err)
			}
			if res.Text != "after the big line" {
				t.Errorf("Result.Text = %q: streaming did not go on after the big line", res.Text)
			}
			if warned != tt.wantWarn {
				t.Errorf("warning for the long line = %v, want %v", warned, tt.wantWarn)
			}
			if !tt.wantWarn && longest < tt.size {
				t.Errorf("longest Raw line = %d bytes, want the %d-byte line intact", longest, tt.size)
			}
			f.assertReaped(1)
		})
	}
}

// An answer in a line over the line limit is lost: the run is an error
// that says so and how to raise the limit, even though the CLI reported
// success after it, and the Result keeps the session.
func TestDroppedAnswerIsAnError(t *testing.T) {
	f := newFixture(t, fakeagent.Script{SessionID: "thread-big", AnswerSize: 256 << 10}, invoker.Options{MaxLineSize: 64 << 10})
	res, err := f.inv.Invoke(context.Background(), f.req)
	if !errors.Is(err, invoker.ErrLineTooLong) {
		t.Errorf("Invoke() error = %v, want ErrLineTooLong", err)
	}
	if err != nil && !strings.Contains(err.Error(), "Options.MaxLineSize") {
		t.Errorf("Invoke() error = %q, want it to say how to raise the limit", err)
	}
	if res.SessionID != "thread-big" {
		t.Errorf("Result.SessionID = %q, want thread-big", res.SessionID)
	}
	f.assertReaped(1)
}

// A prompt much larger than a pipe's buffer is written while the output is
// read, so neither side blocks the other.
func TestHugePromptDoesNotDeadlock(t *testing.T) {
	f := newFixture(t, fakeagent.Script{HugeLine: 4 << 20})
	f.req.Prompt = strings.Repeat("0123456789abcdef", 10<<20/16)
	res, err := f.inv.Invoke(context.Background(), f.req)
	if err != nil {
		t.Fatalf("Invoke() error = %v, want nil", err)
	}
	if res.SessionID == "" {
		t.Error("no session id: the run did not complete")
	}
	sum := sha256.Sum256([]byte(f.req.Prompt))
	rec := f.record()
	if rec.StdinLen != int64(len(f.req.Prompt)) || rec.StdinSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("CLI read %d bytes of stdin (sha256 %s), want the %d-byte prompt intact", rec.StdinLen, rec.StdinSHA256, len(f.req.Prompt))
	}
	f.assertReaped(1)
}

// Bad input is a typed error and starts no process.
func TestBadInputStartsNothing(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/file"
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		backend testBackend
		binary  string
		edit    func(*invoker.Request)
		want    error
		wantMsg string
	}{
		{"empty prompt", testBackend{}, "", func(r *invoker.Request) { r.Prompt = " \n" }, invoker.ErrInvalidRequest, "empty prompt"},
		{"no workdir", testBackend{}, "", func(r *invoker.Request) { r.Workdir = "" }, invoker.ErrInvalidRequest, "no workdir"},
		{"relative workdir", testBackend{}, "", func(r *invoker.Request) { r.Workdir = "some/dir" }, invoker.ErrInvalidRequest, "relative"},
		{"missing workdir", testBackend{}, "", func(r *invoker.Request) { r.Workdir = dir + "/nope" }, invoker.ErrInvalidRequest, "does not exist"},
		{"workdir is a file", testBackend{}, "", func(r *invoker.Request) { r.Workdir = file }, invoker.ErrInvalidRequest, "not a directory"},
		{"unknown permission", testBackend{}, "", func(r *invoker.Request) { r.Permission = "root" }, invoker.ErrInvalidRequest, "unknown permission"},
		{"relative image", testBackend{}, "", func(r *invoker.Request) { r.Images = []string{"a.png"} }, invoker.ErrInvalidRequest, "relative"},
		{"bad env", testBackend{}, "", func(r *invoker.Request) { r.Env = append(r.Env, "NOEQUALS") }, invoker.ErrInvalidRequest, "KEY=VALUE"},
		{"env without key", testBackend{}, "", func(r *invoker.Request) { r.Env = []string{"=s3cret"} }, invoker.ErrInvalidRequest, "Request.Env[0] has an empty key"},
		// A NUL byte cannot reach the kernel: before, each gave
		// "fork/exec ...: invalid argument", matching no typed error.
		{"NUL in env", testBackend{}, "", func(r *invoker.Request) { r.Env = append(r.Env, "K=a\x00b") }, invoker.ErrInvalidRequest, "holds a NUL byte at offset 3"},
		{"NUL in model", testBackend{}, "", func(r *invoker.Request) { r.Model = "gpt\x00" }, invoker.ErrInvalidRequest, "Request.Model holds a NUL byte"},
		{"NUL in session id", testBackend{}, "", func(r *invoker.Request) { r.SessionID = "\x00" }, invoker.ErrInvalidRequest, "Request.SessionID holds a NUL byte"},
		{"NUL in system prompt", testBackend{}, "", func(r *invoker.Request) { r.SystemPrompt = "be\x00brief" }, invoker.ErrInvalidRequest, "Request.SystemPrompt holds a NUL byte"},
		{"NUL in extra args", testBackend{}, "", func(r *invoker.Request) { r.ExtraArgs = []string{"--x=\x00"} }, invoker.ErrInvalidRequest, "Request.ExtraArgs[0] holds a NUL byte"},
		{"unsupported field", testBackend{cmdErr: driver.Unsupported("Images", "use @path")}, "", func(*invoker.Request) {}, invoker.ErrUnsupported, "use @path"},
		{"unsupported images before their paths", testBackend{cmdErr: driver.Unsupported("Images", "use @path")}, "", func(r *invoker.Request) { r.Images = []string{dir + "/missing.png"} }, invoker.ErrUnsupported, "use @path"},
		{"binary not on PATH", testBackend{binary: "clinvoke-no-such-cli"}, "default", func(*invoker.Request) {}, exec.ErrNotFound, "npm install -g fake-agent"},
		{"binary path missing", testBackend{}, dir + "/no-such-cli", func(*invoker.Request) {}, invoker.ErrNotInstalled, "invoker.Options.Binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := t.TempDir()
			s := fakeagent.Script{RecordDir: rec}
			var opts []invoker.Options
			switch tt.binary {
			case "":
				opts = append(opts, invoker.Options{Binary: os.Args[0]})
			case "default":
			default:
				opts = append(opts, invoker.Options{Binary: tt.binary})
			}
			inv := driver.New(tt.backend, opts...)
			req := invoker.Request{Prompt: "hi", Workdir: dir, Env: s.Env()}
			tt.edit(&req)
			res, err := inv.Invoke(context.Background(), req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Invoke() error = %v, want %v", err, tt.want)
			}
			if tt.want == exec.ErrNotFound && !errors.Is(err, invoker.ErrNotInstalled) {
				t.Errorf("Invoke() error = %v, want it to match ErrNotInstalled too", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Invoke() error = %q quotes the value of an environment entry", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "fake: ") {
				t.Errorf("Invoke() error = %q, want it prefixed %q and to mention %q", err, "fake: ", tt.wantMsg)
			}
			if res == nil || res.ExitCode != -1 {
				t.Errorf("Result = %+v, want non-nil with ExitCode -1", res)
			}
			if entries, _ := os.ReadDir(rec); len(entries) > 0 {
				t.Errorf("a process started for a bad request: record dir holds %d files", len(entries))
			}
		})
	}
}

func TestAlreadyCancelledStartsNothing(t *testing.T) {
	f := newFixture(t, fakeagent.Script{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.inv.Invoke(ctx, f.req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke() error = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(f.script.RecordDir); len(entries) > 0 {
		t.Errorf("a process started for a cancelled context")
	}
}

// One Invoker used by 16 goroutines at once, half of them cancelled: the
// others finish with their own session ids and answers.
func TestConcurrentInvokesHalfCancelled(t *testing.T) {
	inv := driver.New(testBackend{}, append(fastLadder, invoker.Options{Binary: os.Args[0]})...)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := fakeagent.Script{
				SessionID:  fmt.Sprintf("thread-%02d", i),
				Answer:     fmt.Sprintf("answer %02d", i),
				Grandchild: true,
				RecordDir:  t.TempDir(),
				Tag:        fmt.Sprintf("concurrent-%d-%d", i, time.Now().UnixNano()),
			}
			cancelled := i%2 == 0
			if cancelled {
				s.StallFor = time.Minute
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := invoker.Request{Prompt: "hello", Workdir: s.RecordDir, Env: s.Env()}
			if cancelled {
				req.OnEvent = func(ev invoker.Event) {
					if ev.Kind == invoker.KindMessage {
						cancel()
					}
				}
			}
			res, err := inv.Invoke(ctx, req)
			switch {
			case cancelled && !errors.Is(err, context.Canceled):
				errs <- fmt.Errorf("run %d: Invoke() error = %v, want context.Canceled", i, err)
			case !cancelled && err != nil:
				errs <- fmt.Errorf("run %d: Invoke() error = %v, want nil", i, err)
			case res.SessionID != s.SessionID:
				errs <- fmt.Errorf("run %d: SessionID = %q, want %q", i, res.SessionID, s.SessionID)
			case !cancelled && res.Text != s.Answer:
				errs <- fmt.Errorf("run %d: Text = %q, want %q", i, res.Text, s.Answer)
			}
			rec, err := fakeagent.ReadRecord(s.RecordDir)
			if err != nil {
				errs <- err
				return
			}
			if alive := rec.Alive(); len(alive) > 0 {
				errs <- fmt.Errorf("run %d: processes alive after Invoke returned: %v", i, alive)
			}
			if alive := fakeagent.Survivors(s.Tag); len(alive) > 0 {
				errs <- fmt.Errorf("run %d: tagged processes alive after Invoke returned: %v", i, alive)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A panic in OnEvent is re-raised to the caller after the tree is reaped.
func TestPanicInOnEventLeavesNoProcess(t *testing.T) {
	f := newFixture(t, fakeagent.Script{StallFor: time.Minute, Grandchild: true, Escapee: true, IgnoreSignals: true})
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			panic("boom in OnEvent")
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "boom in OnEvent" {
				t.Errorf("recover() = %v, want the OnEvent panic", p)
			}
		}()
		f.inv.Invoke(context.Background(), f.req)
		t.Error("Invoke returned normally, want the OnEvent panic re-raised")
	}()
	f.assertReaped(3)
}

// testLogger sends the engine's lifecycle records to the test log (shown
// with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// A cause given with context.WithCancelCause is named in the message and
// available from context.Cause, but errors.Is does not find it: the run
// did not fail with the caller's reason. The same holds for a context
// cancelled before the call.
func TestCancelCause(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("before=%v", before), func(t *testing.T) {
			f := newFixture(t, fakeagent.Script{Chunks: 2, StallFor: time.Minute}, fastLadder...)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			// A cause that is one of the run's own sentinels: a cancelled
			// run must not look rate limited.
			cause := fmt.Errorf("the scheduler gave up: %w", invoker.ErrRateLimited)
			if before {
				cancel(cause)
			} else {
				f.req.OnEvent = func(ev invoker.Event) {
					if ev.Kind == invoker.KindMessage {
						cancel(cause)
					}
				}
			}
			_, err := f.inv.Invoke(ctx, f.req)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Invoke() error = %v, want it to match context.Canceled", err)
			}
			if errors.Is(err, cause) || errors.Is(err, invoker.ErrRateLimited) {
				t.Errorf("Invoke() error = %v matches the cancel cause; want the cause only in context.Cause", err)
			}
			if err != nil && !strings.Contains(err.Error(), cause.Error()) {
				t.Errorf("Invoke() error = %q, want the cause named in the message", err)
			}
			if got := context.Cause(ctx); got != cause {
				t.Errorf("context.Cause(ctx) = %v, want %v", got, cause)
			}
			if !before {
				f.assertReaped(1)
			} else if entries, _ := os.ReadDir(f.script.RecordDir); len(entries) > 0 {
				t.Errorf("a process started for a cancelled context")
			}
		})
	}
}

// In an errgroup, the runs cancelled because a sibling failed report
// context.Canceled, never the sibling's *ExitError.
func TestErrgroupSiblingIsNotTheFailure(t *testing.T) {
	stuck := newFixture(t, fakeagent.Script{Chunks: 2, StallFor: time.Minute}, fastLadder...)
	failing := newFixture(t, fakeagent.Script{ExitCode: 3, NoTerminal: true, Stderr: "boom"}, fastLadder...)
	g, ctx := errgroup.WithContext(context.Background())
	started := make(chan struct{})
	var stuckErr error
	g.Go(func() error {
		var once sync.Once
		stuck.req.OnEvent = func(ev invoker.Event) {
			if ev.Kind == invoker.KindMessage {
				once.Do(func() { close(started) })
			}
		}
		_, stuckErr = stuck.inv.Invoke(ctx, stuck.req)
		return stuckErr
	})
	g.Go(func() error {
		<-started // fail only once the sibling is mid-stream
		_, err := failing.inv.Invoke(ctx, failing.req)
		return err
	})
	groupErr := g.Wait()
	var ee *invoker.ExitError
	if !errors.As(groupErr, &ee) || ee.ExitCode != 3 {
		t.Errorf("errgroup error = %v, want the failing run's *ExitError", groupErr)
	}
	if !errors.Is(stuckErr, context.Canceled) {
		t.Errorf("sibling's Invoke() error = %v, want context.Canceled", stuckErr)
	}
	if errors.As(stuckErr, &ee) {
		t.Errorf("sibling's Invoke() error = %v matches *ExitError, want only context.Canceled", stuckErr)
	}
	stuck.assertReaped(1)
	failing.assertReaped(1)
}

// runtime.Goexit in OnEvent (t.FailNow, say) is handed back to the caller
// of Invoke after the tree is reaped, like a panic.
func TestGoexitInOnEvent(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Chunks: 2, StallFor: time.Minute, Grandchild: true, IgnoreSignals: true})
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			runtime.Goexit()
		}
	}
	returned := make(chan bool)
	go func() {
		normal := false
		defer func() { returned <- normal }()
		f.inv.Invoke(context.Background(), f.req)
		normal = true
	}()
	if <-returned {
		t.Error("Invoke returned normally, want runtime.Goexit handed back to its caller")
	}
	f.assertReaped(2)
}

// A panic in OnEvent after a fatal condition was already reported still
// kills the run at once and is re-raised.
func TestPanicAfterFatal(t *testing.T) {
	f := newFixture(t, fakeagent.Script{Stderr: fatalSignature + "\n", Chunks: 2, StallFor: time.Minute, IgnoreSignals: true},
		invoker.Options{InterruptGrace: time.Hour})
	f.req.OnEvent = func(ev invoker.Event) {
		if ev.Kind == invoker.KindMessage {
			panic("late panic")
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "late panic" {
				t.Errorf("recover() = %v, want the OnEvent panic", p)
			}
		}()
		f.inv.Invoke(context.Background(), f.req)
	}()
	f.assertReaped(1)
}

// A binary that exists but cannot be executed, or whose interpreter line
// is bad, is not a working install.
func TestBrokenBinaryIsNotInstalled(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, content string }{
		{"no exec bit", "#!/bin/sh\n"},
		{"missing interpreter", "#!/nonexistent/interpreter\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("%s/cli%d", dir, i)
			mode := os.FileMode(0o755)
			if i == 0 {
				mode = 0o644
			}
			if err := os.WriteFile(path, []byte(tt.content), mode); err != nil {
				t.Fatal(err)
			}
			inv := driver.New(testBackend{}, invoker.Options{Binary: path})
			_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: dir})
			if !errors.Is(err, invoker.ErrNotInstalled) {
				t.Errorf("Invoke() error = %v, want ErrNotInstalled", err)
			}
		})
	}
}

// A relative Options.Binary names a file from the program's working
// directory, where Invoke checks it, not from the run's Workdir, where the
// CLI starts: a project's file of the same name never runs instead.
func TestRelativeBinaryIsTheProgramsPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prog := t.TempDir()
	if err := os.MkdirAll(filepath.Join(prog, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(prog, "bin", "cli")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(prog)
	f := newFixture(t, fakeagent.Script{Answer: "done"}, invoker.Options{Binary: "./bin/cli"})
	planted := filepath.Join(f.req.Workdir, "planted-ran")
	if err := os.MkdirAll(filepath.Join(f.req.Workdir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.req.Workdir, "bin", "cli"), []byte("#!/bin/sh\ntouch "+planted+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := f.inv.Invoke(t.Context(), f.req)
	if err != nil || res.Text != "done" {
		t.Errorf("Invoke() = %q, %v; want the CLI's answer", res.Text, err)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Error("the Workdir's bin/cli ran instead of the program's")
	}
	f.assertReaped(1)
}
