package mcpadapter_test

// Tests with real process trees: the codex backend runs this test binary as
// the fake agent (TestMain hands over to fakeagent.Main), which starts a
// grandchild and a setsid escapee like the real CLIs' tools do. The fake's
// /proc scans (Survivors, Record.Alive) are Linux-only, hence the file name.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// tracked wraps an Invoker to tell when its runs have returned: a run
// returns only after its whole tree is reaped, which is the moment to look
// for survivors.
type tracked struct {
	invoker.Invoker
	mu     sync.Mutex
	cond   *sync.Cond
	active int
	ended  chan error // one per finished run
}

func track(inv invoker.Invoker) *tracked {
	t := &tracked{Invoker: inv, ended: make(chan error, 100)}
	t.cond = sync.NewCond(&t.mu)
	return t
}

func (t *tracked) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	t.mu.Lock()
	t.active++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.active--
		t.cond.Broadcast()
		t.mu.Unlock()
	}()
	res, err := t.Invoker.Invoke(ctx, req)
	t.ended <- err
	return res, err
}

// waitIdle waits until no run is in flight.
func (t *tracked) waitIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.active > 0 {
		t.cond.Wait()
	}
}

// fakeCodex returns the codex backend running s in this test binary.
func fakeCodex(s fakeagent.Script) invoker.Invoker {
	return codex.New(
		invoker.Options{Binary: os.Args[0], Env: s.Env(), InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond},
	)
}

// noSurvivors fails the test if a process of tag's trees is alive, other
// than the processes named by except (an example server given the fake's
// environment to pass on carries the tag too).
func noSurvivors(t *testing.T, tag string, except ...int) {
	t.Helper()
	var left []int
	for _, pid := range fakeagent.Survivors(tag) {
		if !slices.Contains(except, pid) {
			left = append(left, pid)
		}
	}
	if len(left) > 0 {
		t.Errorf("processes survived: %v", left)
	}
}

func TestRealClientCancelKillsTree(t *testing.T) {
	s := fakeagent.Script{
		Flavor:     fakeagent.Codex,
		Tool:       true,
		StreamFor:  time.Hour,
		Grandchild: true,
		Escapee:    true,
		RecordDir:  t.TempDir(),
		Tag:        fakeagent.NewTag(),
	}
	inv := track(fakeCodex(s))
	quick := answer("quick")
	h := newHarness(t, &mcpadapter.Options{ProgressInterval: time.Nanosecond}, inv, quick)
	h.abandon()
	t.Cleanup(func() {
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill() // leave no sleeper behind if the library failed
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", t.TempDir())}
		params.SetProgressToken("tok")
		_, err := h.cs.CallTool(ctx, params)
		errc <- err
	}()
	// A progress message means the fake printed events, so its tree is
	// complete and recorded.
	for p := range h.progress {
		if strings.Contains(p.Message, "running: ") || strings.Contains(p.Message, "thinking") {
			break
		}
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Procs) < 3 {
		t.Fatalf("the fake's tree has %d processes, want the agent, a grandchild and an escapee", len(rec.Procs))
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool() error = %v, want context.Canceled", err)
	}
	if err := <-inv.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("Invoke() error = %v, want context.Canceled", err)
	}
	if alive := rec.Alive(); len(alive) > 0 {
		t.Errorf("processes of the cancelled run survived: %v", alive)
	}
	noSurvivors(t, s.Tag)

	// The session goes on.
	var out mcpadapter.Output
	if res := h.call(context.Background(), t, "quick", args("next", t.TempDir()), &out); res.IsError || out.Text != "echo: next" {
		t.Errorf("call after a cancel: IsError %v, output %+v", res.IsError, out)
	}
}

func TestRealRunCompletes(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, Chunks: 3, Answer: "all done", Tag: fakeagent.NewTag()}
	h := newHarness(t, nil, fakeCodex(s))
	var out mcpadapter.Output
	res := h.call(context.Background(), t, "codex", args("hi", t.TempDir()), &out)
	if res.IsError || out.Status != "completed" || out.Text != "all done" || out.SessionID == "" || out.ExitCode != 0 {
		t.Errorf("IsError %v, output %+v; want the fake's answer and a session id", res.IsError, out)
	}
	noSurvivors(t, s.Tag)
}

func TestRealRandomCancelsLeaveNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 50 process trees")
	}
	const calls = 50
	s := fakeagent.Script{
		Flavor:     fakeagent.Codex,
		StreamFor:  time.Hour,
		Grandchild: true,
		Tag:        fakeagent.NewTag(),
	}
	inv := track(fakeCodex(s))
	h := newHarness(t, &mcpadapter.Options{MaxConcurrent: 8}, inv)
	h.abandon()
	dir := t.TempDir()

	var (
		wg        sync.WaitGroup
		cancelled atomic.Int64
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Every call is cancelled, at a random moment: before it is
			// sent, while it waits for a slot, while the fake starts, or
			// while it streams.
			stop := time.AfterFunc(time.Duration(rand.IntN(300))*time.Millisecond, cancel)
			defer stop.Stop()
			_, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "codex", Arguments: args(fmt.Sprint("call ", i), dir)})
			if errors.Is(err, context.Canceled) {
				cancelled.Add(1)
			} else {
				t.Errorf("CallTool() error = %v, want context.Canceled", err)
			}
		}()
	}
	wg.Wait()
	// The handlers of cancelled calls may still be reaping: wait for
	// the runs in flight, then no process of any tree may be left.
	inv.waitIdle()
	noSurvivors(t, s.Tag)
	t.Logf("%d calls cancelled; %d runs started", cancelled.Load(), len(inv.ended))

	// The server still serves.
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 2 {
		t.Errorf("ListTools() after the cancels: %v, %v", res, err)
	}
}

// buildServer builds examples/mcpserver into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds examples/mcpserver")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build examples/mcpserver")
	}
	bin := filepath.Join(t.TempDir(), "mcpserver")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/clinvoke/clinvoke/examples/mcpserver")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/mcpserver: %v\n%s", err, out)
	}
	return bin
}

// startServer starts the example server over stdio, serving the codex
// backend with this test binary as its binary, running s. The server runs
// without its default sandbox (-sandbox off): these tests prove its
// serving, shutdown and cancellation, and the fake records its runs in the
// test's temporary directory, which a sandboxed run cannot write.
func startServer(t *testing.T, bin string, s fakeagent.Script, root, transcript string, flags ...string) (*mcp.ClientSession, *exec.Cmd, chan *mcp.ProgressNotificationParams) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-cli", "codex", "-sandbox", "off", "-codex-bin", os.Args[0], "-root", root,
		"-transcript", transcript, "-progress", "1ms"}, flags...)...)
	cmd.Env = append(os.Environ(), s.Env()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	progress := make(chan *mcp.ProgressNotificationParams, 1000)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to examples/mcpserver: %v", err)
	}
	return cs, cmd, progress
}

// readTranscript returns the lines of the transcript at path; none if the
// file does not exist yet.
func readTranscript(t *testing.T, path string) []mcpadapter.TranscriptEntry {
	t.Helper()
	var entries []mcpadapter.TranscriptEntry
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e mcpadapter.TranscriptEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		entries = append(entries, e)
	}
	return entries
}

// transcriptEntries waits until path holds n final entries (those of
// ended or refused runs, not the "running" lines written when a session id
// becomes known) and returns them. The server is another process: its
// transcript line, written after the run's tree was reaped, is the one
// sign of a finished run it gives.
func transcriptEntries(t *testing.T, path string, n int) []mcpadapter.TranscriptEntry {
	t.Helper()
	bound := testenv.Timeout(testenv.Hang)
	deadline := time.Now().Add(bound)
	for {
		var final []mcpadapter.TranscriptEntry
		for _, e := range readTranscript(t, path) {
			if e.Status != mcpadapter.StatusRunning {
				final = append(final, e)
			}
		}
		if len(final) >= n {
			return final
		}
		if time.Now().After(deadline) {
			t.Fatalf("transcript has %d final entries after %v, want %d", len(final), bound, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExampleServerStdio(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, Answer: "served", Tag: fakeagent.NewTag()}
	cs, cmd, _ := startServer(t, bin, s, root, transcript)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("ListTools() = %v, %v; want codex and codex_parallel", tools, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", root)})
	if err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	var out mcpadapter.Output
	decode(t, res, &out)
	if res.IsError || out.Text != "served" || out.SessionID == "" {
		t.Errorf("IsError %v, output %+v; want the fake's answer", res.IsError, out)
	}
	// A workdir outside -root is refused.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())})
	if err != nil || !res.IsError {
		t.Errorf("workdir outside -root: IsError %v, error %v; want refused", res != nil && res.IsError, err)
	}
	// Closing the session closes the server's stdin: it exits cleanly.
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("server exit: %v, want success", cmd.ProcessState)
	}
	if e := transcriptEntries(t, transcript, 2); e[0].Status != "completed" || e[1].Status != "refused" {
		t.Errorf("transcript statuses %q, %q; want completed, refused", e[0].Status, e[1].Status)
	}
	noSurvivors(t, s.Tag)
}

func TestExampleServerCancelAndSignal(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: time.Hour, Grandchild: true, Escapee: true, Tag: fakeagent.NewTag()}
	cs, cmd, progress := startServer(t, bin, s, root, transcript)

	// startRun calls codex with a progress token and returns once the
	// fake streams, with the call's context's cancel and its outcome.
	calls := 0
	startRun := func() (context.CancelFunc, chan callOutcome) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan callOutcome, 1)
		calls++
		token := fmt.Sprintf("tok%d", calls)
		go func() {
			params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", root)}
			params.SetProgressToken(token)
			res, err := cs.CallTool(ctx, params)
			errc <- callOutcome{res, err}
		}()
		// A progress message of this call means the fake printed events,
		// which it does once its whole tree is started. (Messages of an
		// earlier call may still be queued: they do not count.)
		for p := range progress {
			if p.ProgressToken == token && (strings.Contains(p.Message, "running: ") || strings.Contains(p.Message, "thinking")) {
				break
			}
		}
		return cancel, errc
	}

	// A client cancel kills the run's tree; the server answers the next
	// call.
	cancel, resc := startRun()
	cancel()
	if err := (<-resc).err; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool() error = %v, want context.Canceled", err)
	}
	if e := transcriptEntries(t, transcript, 1); e[0].Status != "cancelled" {
		t.Errorf("transcript status %q, want cancelled", e[0].Status)
	}
	noSurvivors(t, s.Tag, cmd.Process.Pid)

	// SIGINT to the server cancels the run in flight, answers its call and
	// the server exits once its tree is reaped.
	cancel, resc = startRun()
	defer cancel()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := <-resc
	checkShutdownAnswer(t, r.res, r.err)
	if e := transcriptEntries(t, transcript, 2); e[1].Status != "cancelled" || !strings.Contains(e[1].Error, "shutting down") {
		t.Errorf("transcript entry %+v, want cancelled by the shutdown", e[1])
	}
	noSurvivors(t, s.Tag, cmd.Process.Pid)
	// The server exited by itself; closing the session reaps it. Its
	// stdin may already be closed, the one error tolerated here.
	if err := cs.Close(); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("server exit after SIGINT: %v, want success", cmd.ProcessState)
	}
}

// The runs Tools.Shutdown cancels walk the ladder the invoker's
// StopGraces gives ErrShuttingDown, not its own: here the invoker would
// give a CLI that ignores SIGINT and SIGTERM an hour, and the shutdown
// none.
func TestShutdownWalksStopGraces(t *testing.T) {
	s := fakeagent.Script{
		Flavor:        fakeagent.Codex,
		StreamFor:     time.Hour,
		IgnoreSignals: true,
		Grandchild:    true,
		RecordDir:     t.TempDir(),
		Tag:           fakeagent.NewTag(),
	}
	inv := track(codex.New(
		invoker.Options{Binary: os.Args[0], Env: s.Env(), InterruptGrace: time.Hour, TerminateGrace: time.Hour,
			// The server's shutdown, and it alone, goes straight to SIGKILL.
			StopGraces: func(cause error) (time.Duration, time.Duration, bool) {
				return -1, -1, errors.Is(cause, mcpadapter.ErrShuttingDown)
			}},
	))
	h := newHarness(t, &mcpadapter.Options{ProgressInterval: time.Nanosecond}, inv)
	t.Cleanup(func() {
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill() // leave no process behind if the library failed
		}
	})

	outc := make(chan mcpadapter.Output, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", t.TempDir())}
		params.SetProgressToken("tok")
		res, err := h.cs.CallTool(context.Background(), params)
		var out mcpadapter.Output
		if err == nil {
			remarshal(t, res.StructuredContent, &out)
		}
		outc <- out
	}()
	// A progress message means the fake printed events, so its tree is
	// complete and recorded.
	for p := range h.progress {
		if strings.Contains(p.Message, "thinking") || strings.Contains(p.Message, "running: ") {
			break
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- h.tools.Shutdown(context.Background()) }()
	select {
	case err := <-inv.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Invoke() error = %v, want context.Canceled", err)
		}
	case <-time.After(testenv.Timeout(time.Minute)):
		t.Fatal("the run was not stopped: the shutdown walked the invoker's hour-long ladder")
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown() error = %v", err)
	}
	if out := <-outc; out.Status != mcpadapter.StatusCancelled {
		t.Errorf("call answered with status %q, want %q", out.Status, mcpadapter.StatusCancelled)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Procs) < 2 {
		t.Errorf("the fake recorded %d processes, want the agent and its grandchild", len(rec.Procs))
	}
	if alive := rec.Alive(); len(alive) > 0 {
		t.Errorf("processes of the run survived: %v", alive)
	}
	noSurvivors(t, s.Tag)
}
