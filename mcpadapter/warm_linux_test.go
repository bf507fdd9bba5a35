package mcpadapter_test

// Warm sessions (Options.WarmSessions) with real process trees: the
// backends run this test binary as the fake agent, which speaks each CLI's
// long-lived protocol and numbers its turns ("Turn N: ..."), so that a
// call answered by a warm session is told from a cold run by its text, and
// the processes of each session are counted in the fake's record.

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// warmRig is a server with warm sessions over the fake of one CLI.
type warmRig struct {
	*harness
	t        *testing.T
	cli      string
	script   fakeagent.Script
	finished chan string // the status of each call, when its record is written
	closing  chan string // why, for each warm session the server closes
}

// logSink passes the adapter's log records the tests wait for.
type logSink struct{ r *warmRig }

func (s logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s logSink) WithGroup(string) slog.Handler            { return s }
func (s logSink) Handle(_ context.Context, rec slog.Record) error {
	attr := func(key string) string {
		v := ""
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v = a.Value.String()
				return false
			}
			return true
		})
		return v
	}
	switch rec.Message {
	case "run finished":
		s.r.finished <- attr("status")
	case "warm session closing":
		s.r.closing <- attr("why")
	}
	return nil
}

// newWarmRig serves the fake of flavor running s with warm sessions. Its
// cleanup shuts the server down, waits for its calls and warm sessions,
// and checks that no process of the fake's trees survived.
func newWarmRig(t *testing.T, flavor string, warm mcpadapter.WarmSessions, s fakeagent.Script) *warmRig {
	t.Helper()
	s.Flavor = flavor
	s.RecordDir = t.TempDir()
	s.Tag = fakeagent.NewTag()
	opts := []invoker.Options{
		invoker.Options{Binary: os.Args[0], Env: s.Env(), TurnInterruptGrace: testenv.Timeout(testenv.Hang), InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond},
	}
	var inv invoker.Invoker
	switch flavor {
	case fakeagent.Codex:
		inv = codex.New(opts...)
	case fakeagent.Claude:
		inv = claude.New(opts...)
	case fakeagent.Gemini:
		inv = gemini.New(opts...)
	}
	r := &warmRig{t: t, cli: flavor, script: s,
		finished: make(chan string, 100), closing: make(chan string, 100)}
	// Registered before the harness: runs after the client and server
	// sessions are closed and the tools shut down.
	t.Cleanup(func() {
		if r.harness != nil {
			r.shutdown()
		}
		noSurvivors(t, s.Tag)
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill() // leave nothing behind if the library failed
		}
	})
	r.harness = newHarness(t, &mcpadapter.Options{
		WarmSessions:     warm,
		ProgressInterval: time.Nanosecond,
		Deltas:           true, // the fakes stall after the first pieces of an answer, which only deltas show
		MaxPermission:    invoker.Unlimited,
		Logger:           slog.New(logSink{r}),
	}, inv)
	return r
}

// shutdown shuts the tools down and checks that every call and warm
// session ended.
func (r *warmRig) shutdown() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := r.tools.Shutdown(ctx); err != nil {
		r.t.Errorf("Shutdown() = %v, want the calls and warm sessions ended", err)
	}
}

// ask calls the CLI's tool with prompt (and session id, when not empty)
// and waits until the call's record is written.
func (r *warmRig) ask(prompt, sessionID string, kv ...any) mcpadapter.Output {
	r.t.Helper()
	if sessionID != "" {
		kv = append(kv, "session_id", sessionID)
	}
	var out mcpadapter.Output
	r.call(context.Background(), r.t, r.cli, args(prompt, r.workdir(), kv...), &out)
	r.awaitFinished()
	return out
}

// workdir is one directory for all the calls of a test: a warm session is
// used only by calls with its workdir.
func (r *warmRig) workdir() string {
	return r.script.RecordDir
}

// awaitFinished waits for the next call's record and returns its status.
func (r *warmRig) awaitFinished() string {
	r.t.Helper()
	select {
	case st := <-r.finished:
		return st
	case <-time.After(testenv.Timeout(testenv.Hang)):
		r.t.Fatal("no call finished")
		return ""
	}
}

// awaitProgress waits for a progress notification holding s.
func (r *warmRig) awaitProgress(s string) {
	r.t.Helper()
	timeout := time.After(testenv.Timeout(testenv.Hang))
	for {
		select {
		case p := <-r.progress:
			if strings.Contains(p.Message, s) {
				return
			}
		case <-timeout:
			r.t.Fatalf("no progress notification holding %q", s)
		}
	}
}

// awaitClosing waits until the server closes a warm session and returns
// why.
func (r *warmRig) awaitClosing() string {
	r.t.Helper()
	select {
	case why := <-r.closing:
		return why
	case <-time.After(testenv.Timeout(testenv.Hang)):
		r.t.Fatal("no warm session was closed")
		return ""
	}
}

// agents returns the pids of the fake agent processes started so far, in
// order.
func (r *warmRig) agents() []fakeagent.Proc {
	r.t.Helper()
	rec, err := fakeagent.ReadRecord(r.script.RecordDir)
	if err != nil {
		r.t.Fatalf("ReadRecord: %v", err)
	}
	var ps []fakeagent.Proc
	for _, p := range rec.Procs {
		if p.Role == "agent" {
			ps = append(ps, p)
		}
	}
	return ps
}

// alive returns the pids among ps still running.
func (r *warmRig) alive(ps ...fakeagent.Proc) []int {
	rec := &fakeagent.Record{Procs: ps}
	return rec.Alive()
}

// wantText checks a completed call's answer.
func wantText(t *testing.T, what string, out mcpadapter.Output, want string) {
	t.Helper()
	if out.Status != mcpadapter.StatusCompleted || out.Text != want {
		t.Errorf("%s: status %q, text %q (error %q); want completed with %q", what, out.Status, out.Text, out.Error, want)
	}
}

func turnText(n int) string { return "Turn " + string(rune('0'+n)) + ": " + fakeagent.DefaultAnswer }

// Two calls of one conversation are two turns of one CLI process, for
// each CLI; the server's shutdown then closes it.
func TestWarmSameSessionReusesProcess(t *testing.T) {
	for _, cli := range []string{fakeagent.Codex, fakeagent.Claude, fakeagent.Gemini} {
		t.Run(cli, func(t *testing.T) {
			r := newWarmRig(t, cli, mcpadapter.WarmSessions{MaxSessions: 2}, fakeagent.Script{})
			first := r.ask("first", "")
			wantText(t, "first call", first, turnText(1))
			if first.SessionID == "" {
				t.Fatal("first call: no session id")
			}
			second := r.ask("second", first.SessionID)
			wantText(t, "second call", second, turnText(2))
			if second.SessionID != first.SessionID {
				t.Errorf("second call: session id %q, want %q", second.SessionID, first.SessionID)
			}
			if ps := r.agents(); len(ps) != 1 {
				t.Errorf("the fake agent ran %d times (%v), want one process for both calls", len(ps), ps)
			}
		})
	}
}

// A client's cancel of a call is the CLI's own interrupt: the process
// lives on and answers the next call of the conversation.
func TestWarmCancelInterruptsInProtocol(t *testing.T) {
	for _, tc := range []struct{ cli, interrupt string }{
		{fakeagent.Codex, `"turn/interrupt"`},
		{fakeagent.Claude, `"subtype":"interrupt"`},
		{fakeagent.Gemini, `"session/cancel"`},
	} {
		t.Run(tc.cli, func(t *testing.T) { testWarmCancel(t, tc.cli, tc.interrupt) })
	}
}

func testWarmCancel(t *testing.T, cli, interrupt string) {
	// Each turn leaves a grandchild, a setsid daemon and an env -i daemon:
	// the cancelled call's are swept when the call returns.
	r := newWarmRig(t, cli, mcpadapter.WarmSessions{MaxSessions: 1}, fakeagent.Script{TurnSpawns: true})
	r.abandon()
	first := r.ask("first", "")
	wantText(t, "first call", first, turnText(1))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: r.cli, Arguments: args("stall "+fakeagent.PromptStall, r.workdir(), "session_id", first.SessionID)}
		params.SetProgressToken("tok")
		_, err := r.cs.CallTool(ctx, params)
		errc <- err
	}()
	r.awaitProgress("Turn 2") // the answer streams before the stall: the turn runs
	cancel()
	if err := <-errc; err == nil {
		t.Error("CallTool() of the cancelled call returned no error")
	}
	if st := r.awaitFinished(); st != string(mcpadapter.StatusCancelled) {
		t.Errorf("cancelled call: status %q, want cancelled", st)
	}
	assertTurnSwept(t, r.script.RecordDir, 2)
	third := r.ask("third", first.SessionID)
	wantText(t, "call after the cancel", third, turnText(3))
	ps := r.agents()
	if len(ps) != 1 {
		t.Errorf("the fake agent ran %d times (%v), want one process kept across the interrupt", len(ps), ps)
	}

	// The interrupt went to the CLI in its protocol.
	r.shutdown()
	rec, err := fakeagent.ReadRecord(r.script.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if stdin, err := rec.Stdin(); err != nil || !strings.Contains(string(stdin), interrupt) {
		t.Errorf("the CLI's standard input = %q (%v), want an interrupt request (%s)", stdin, err, interrupt)
	}
}

// A call of a conversation whose session answers another call is refused
// at once; the first call goes on.
func TestWarmBusySessionRefuses(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 2}, fakeagent.Script{})
	r.abandon()
	first := r.ask("first", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		params := &mcp.CallToolParams{Name: r.cli, Arguments: args("stall "+fakeagent.PromptStall, r.workdir(), "session_id", first.SessionID)}
		params.SetProgressToken("tok")
		r.cs.CallTool(ctx, params)
	}()
	r.awaitProgress("Turn 2")
	busy := r.ask("again", first.SessionID)
	if busy.Status != mcpadapter.StatusRefused || !strings.Contains(busy.Error, "answering another call") {
		t.Errorf("call while the session is busy: status %q, error %q; want refused, answering another call", busy.Status, busy.Error)
	}
	cancel()
	<-done
	r.awaitFinished()
	wantText(t, "call after the cancel", r.ask("third", first.SessionID), turnText(3))
}

// MaxSessions bounds the warm sessions: the least recently used one is
// closed (its process gone) before a new one opens, and a call resuming
// its conversation then opens a session that resumes it.
func TestWarmEvictsLeastRecentlyUsed(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 1}, fakeagent.Script{})
	a := r.ask("a", "")
	wantText(t, "call a", a, turnText(1))
	b := r.ask("b", "")
	wantText(t, "call b", b, turnText(1))
	if why := r.awaitClosing(); !strings.Contains(why, "MaxSessions") {
		t.Errorf("closed a warm session because %q, want the eviction", why)
	}
	ps := r.agents()
	if len(ps) != 2 {
		t.Fatalf("the fake agent ran %d times, want 2", len(ps))
	}
	if alive := r.alive(ps[0]); len(alive) > 0 {
		t.Errorf("the evicted session's process %v is alive, want it closed", alive)
	}
	if alive := r.alive(ps[1]); len(alive) != 1 {
		t.Errorf("the warm session's process is gone, want it alive")
	}
	again := r.ask("a again", a.SessionID)
	wantText(t, "call resuming a", again, turnText(1)) // a new process resumed the thread
	if again.SessionID != a.SessionID {
		t.Errorf("call resuming a: session id %q, want %q", again.SessionID, a.SessionID)
	}
	if alive := r.alive(r.agents()[1]); len(alive) > 0 {
		t.Errorf("b's process %v is alive after a took the only place", alive)
	}
}

// A warm session idle for IdleTimeout is closed and its process reaped,
// while the server keeps serving.
func TestWarmIdleReaped(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 2, IdleTimeout: time.Millisecond}, fakeagent.Script{})
	wantText(t, "call", r.ask("hello", ""), turnText(1))
	if why := r.awaitClosing(); !strings.Contains(why, "idle") {
		t.Errorf("closed a warm session because %q, want idle", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := r.tools.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v, want the reaped session to end", err)
	}
	noSurvivors(t, r.script.Tag)
	wantText(t, "call after the reaping", r.ask("hello again", ""), turnText(1))
}

// The server's shutdown closes every warm session, idle or answering a
// call, and Shutdown waits until they are reaped.
func TestWarmShutdownClosesSessions(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 4}, fakeagent.Script{})
	idle := r.ask("idle", "")
	wantText(t, "idle session's call", idle, turnText(1))
	errc := make(chan error, 1)
	var busy *mcp.CallToolResult
	go func() {
		params := &mcp.CallToolParams{Name: r.cli, Arguments: args("stall "+fakeagent.PromptStall, r.workdir())}
		params.SetProgressToken("tok")
		var err error
		busy, err = r.cs.CallTool(context.Background(), params)
		errc <- err
	}()
	r.awaitProgress("Turn 1")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := r.tools.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v, want every warm session closed", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("CallTool() of the call in flight = %v, want an answer", err)
	}
	checkShutdownAnswer(t, busy, nil)
	if ps := r.agents(); len(ps) != 2 || len(r.alive(ps...)) > 0 {
		t.Errorf("agents %v, alive %v after the shutdown; want 2 processes, none alive", ps, r.alive(ps...))
	}
	noSurvivors(t, r.script.Tag)
}

// A call continuing a warm conversation with another permission does not
// use its session: the session is closed, and a new one with the call's
// permission resumes the conversation.
func TestWarmMismatchDoesNotReuse(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 2}, fakeagent.Script{})
	first := r.ask("first", "", "permission", "read-only")
	wantText(t, "first call", first, turnText(1))
	second := r.ask("second", first.SessionID, "permission", "workspace-write")
	wantText(t, "call with another permission", second, turnText(1))
	if why := r.awaitClosing(); !strings.Contains(why, "permission") {
		t.Errorf("closed the warm session because %q, want the mismatch", why)
	}
	ps := r.agents()
	if len(ps) != 2 || len(r.alive(ps[0])) > 0 {
		t.Errorf("agents %v, first alive %v; want a second process and the first closed", ps, r.alive(ps[0]))
	}
	// The parallel tool runs cold, and closes the warm session of the
	// conversation it continues first.
	var par mcpadapter.ParallelOutput
	r.call(context.Background(), t, r.cli+mcpadapter.ParallelSuffix, map[string]any{
		"workdir": r.workdir(), "tasks": []map[string]any{{"prompt": "cold", "session_id": first.SessionID}}}, &par)
	r.awaitFinished()
	// With Options.Deltas, a cold Codex run is a session of one turn on
	// its app-server: a new process's first turn all the same.
	if len(par.Results) != 1 || par.Results[0].Text != fakeagent.DefaultAnswer && par.Results[0].Text != turnText(1) {
		t.Errorf("parallel task: %+v, want the cold run's answer %q (or %q, a one-turn session's)", par.Results, fakeagent.DefaultAnswer, turnText(1))
	}
	if ps := r.agents(); len(ps) != 3 || len(r.alive(ps[1])) > 0 {
		t.Errorf("agents %v; want a cold run's process and the warm session closed first", ps)
	}
}

// A session whose CLI dies mid-turn fails that call and is dropped; the
// next call of the conversation opens a new session resuming it.
func TestWarmDeadSessionDropped(t *testing.T) {
	r := newWarmRig(t, fakeagent.Codex, mcpadapter.WarmSessions{MaxSessions: 2}, fakeagent.Script{})
	first := r.ask("first", "")
	wantText(t, "first call", first, turnText(1))
	died := r.ask("die "+fakeagent.PromptDie, first.SessionID)
	if died.Status != mcpadapter.StatusFailed {
		t.Errorf("call whose CLI died: status %q (error %q), want failed", died.Status, died.Error)
	}
	next := r.ask("next", first.SessionID)
	wantText(t, "call after the death", next, turnText(1))
	if ps := r.agents(); len(ps) != 2 {
		t.Errorf("the fake agent ran %d times, want a new process after the death", len(ps))
	}
}

// Gemini CLI cannot resume a conversation in a session: a call resuming
// one that is not warm runs cold, and the warm sessions are untouched.
func TestWarmResumeUnsupportedRunsCold(t *testing.T) {
	r := newWarmRig(t, fakeagent.Gemini, mcpadapter.WarmSessions{MaxSessions: 2}, fakeagent.Script{})
	warm := r.ask("warm", "")
	wantText(t, "new conversation", warm, turnText(1))
	other := "5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e18"
	for range 2 {
		cold := r.ask("resume", other)
		wantText(t, "call resuming a conversation that is not warm", cold, fakeagent.DefaultAnswer)
	}
	wantText(t, "warm conversation again", r.ask("again", warm.SessionID), turnText(2))
	ps := r.agents()
	if len(ps) != 3 {
		t.Errorf("the fake agent ran %d times, want 3 (one warm, two cold)", len(ps))
	}
	if !slices.ContainsFunc(ps, func(p fakeagent.Proc) bool { return len(r.alive(p)) == 1 }) {
		t.Error("the warm session's process is gone")
	}
}

// The example server's -warm flag keeps a conversation's CLI between its
// calls, and its shutdown (standard input closed) leaves nothing behind.
func TestExampleServerWarm(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	s := fakeagent.Script{Flavor: fakeagent.Codex, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	t.Cleanup(func() {
		if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
			rec.Kill()
		}
	})
	cs, cmd, _ := startServer(t, bin, s, root, filepath.Join(t.TempDir(), "transcript.jsonl"), "-warm", "2", "-warm-idle", "1h")
	var first, second mcpadapter.Output
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("first", root)})
	if err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	decode(t, res, &first)
	wantText(t, "first call", first, turnText(1))
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("second", root, "session_id", first.SessionID)})
	if err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	decode(t, res, &second)
	wantText(t, "second call", second, turnText(2))
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("server exit: %v, want success", cmd.ProcessState)
	}
	rec, err := fakeagent.ReadRecord(s.RecordDir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Procs); n != 1 {
		t.Errorf("the fake recorded %d processes, want one for both calls", n)
	}
	noSurvivors(t, s.Tag)
}

// assertTurnSwept checks that the processes turn n of a session left
// (TurnSpawns) are gone. The env -i daemon is checked only where the runs
// get cgroup containment: the tracking level cannot find it (README).
func assertTurnSwept(t *testing.T, recordDir string, n int) {
	t.Helper()
	rec, err := fakeagent.ReadRecord(recordDir)
	if err != nil {
		t.Fatal(err)
	}
	cgroup := codex.New().Capabilities().Containment == "cgroup"
	var left []fakeagent.Proc
	for _, p := range rec.Turn(n) {
		switch p.Role {
		case "turn-grandchild", "turn-daemon":
			left = append(left, p)
		case "turn-envi-daemon":
			if cgroup {
				left = append(left, p)
			}
		}
	}
	if len(left) < 2 {
		t.Fatalf("turn %d recorded %d of its lasting processes: %+v", n, len(left), rec.Turn(n))
	}
	if alive := (&fakeagent.Record{Procs: left}).Alive(); len(alive) > 0 {
		t.Errorf("the processes of the cancelled call's turn %v are alive after the call returned", alive)
	}
}
