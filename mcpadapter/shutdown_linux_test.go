package mcpadapter_test

// The example server's shutdown, driven the way MCP hosts drive it: the
// signal bursts Claude Code sends its stdio servers when it is
// interrupted (docs/cli-facts.md, "Claude Code 2.1.197 as an MCP host"), a
// single signal, and standard input closed, each while a run with a tool
// tree (a grandchild and a setsid daemon) is active.

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// callOutcome is what CallTool returned.
type callOutcome struct {
	res *mcp.CallToolResult
	err error
}

// checkShutdownAnswer checks the answer to a call whose run the server's
// shutdown cancelled: an isError result holding the session id, which
// says how to resume.
func checkShutdownAnswer(t *testing.T, res *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("CallTool() error = %v, want the call answered before the server exits", err)
		return
	}
	var out mcpadapter.Output
	decode(t, res, &out)
	if !res.IsError || out.Status != mcpadapter.StatusCancelled || out.SessionID == "" ||
		!strings.Contains(out.Error, "shutting down") || !strings.Contains(out.Resume, out.SessionID) {
		t.Errorf("answer: IsError %v, output %+v; want cancelled by the shutdown, with the session id to resume", res.IsError, out)
	}
}

// A serverProc is the example server started by startServerPipes.
type serverProc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the server's standard input, to close it as a host killed by SIGKILL does
	stdout *os.File // the read ends of its standard output and error, to close them as a host that went away does
	stderr *os.File
	exited chan struct{} // closed once the server is reaped; cmd.ProcessState is then set
}

// startServerPipes starts the example server over stdio like startServer,
// on pipes of its own rather than mcp.CommandTransport, whose Close waits
// for the calls in flight before it closes the server's standard input.
func startServerPipes(t *testing.T, bin, fake string, s fakeagent.Script, root, transcript string) (*mcp.ClientSession, *serverProc, chan *mcp.ProgressNotificationParams) {
	t.Helper()
	cmd := exec.Command(bin, "-cli", "codex", "-sandbox", "off", "-codex-bin", fake, "-root", root, "-transcript", transcript, "-progress", "1ms")
	cmd.Env = append(os.Environ(), s.Env()...)
	// Standard error on a pipe of our own too, so that a test can close it
	// as a host that went away does.
	var stderr strings.Builder
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = errW
	copied := make(chan struct{})
	go func() {
		io.Copy(&stderr, errR)
		close(copied)
	}()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	srv := &serverProc{cmd: cmd, stdin: inW, stdout: outR, stderr: errR, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(srv.exited)
	}()
	t.Cleanup(func() {
		inW.Close()
		cmd.Process.Kill() // no-op when it exited, as it should have
		<-srv.exited
		outR.Close()
		errR.Close()
		<-copied
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
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting to examples/mcpserver: %v", err)
	}
	return cs, srv, progress
}

// A hostStep is one thing a host does to its server, at a time after the
// first signal.
type hostStep struct {
	at     time.Duration
	signal syscall.Signal // 0: none
	cancel bool           // notifications/cancelled for the call
}

// buildFakeAgent builds examples/demo, which runs as the fake agent when
// re-executed with a fake's environment (fakeagent.Main), into a temporary
// directory: a fake built without the race detector, as the real CLIs are.
// A race-built test binary takes far longer to die of SIGKILL on a loaded
// machine (the kernel unmaps its shadow memory), time a real CLI does not
// take, and which would eat into the margin TestExampleServerShutdown
// holds the shutdown ladder to.
func buildFakeAgent(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build examples/demo")
	}
	bin := filepath.Join(t.TempDir(), "fakeagent")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/clinvoke/clinvoke/examples/demo")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/demo: %v\n%s", err, out)
	}
	return bin
}

func TestExampleServerShutdown(t *testing.T) {
	bin := buildServer(t)
	fake := buildFakeAgent(t)
	// Claude Code interrupted by SIGINT: SIGINT to the server, then
	// notifications/cancelled and a second SIGINT at +22 ms, SIGTERM at
	// +100 ms and SIGKILL at +500 ms.
	claudeBurst := []hostStep{
		{at: 0, signal: syscall.SIGINT},
		{at: 22 * time.Millisecond, signal: syscall.SIGINT, cancel: true},
		{at: 100 * time.Millisecond, signal: syscall.SIGTERM},
		{at: 500 * time.Millisecond, signal: syscall.SIGKILL},
	}
	// Ctrl-C in Claude Code's terminal adds the process group's own
	// SIGINT: three signals within 40 ms.
	terminalBurst := []hostStep{
		{at: 0, signal: syscall.SIGINT},
		{at: 22 * time.Millisecond, signal: syscall.SIGINT, cancel: true},
		{at: 35 * time.Millisecond, signal: syscall.SIGINT},
		{at: 100 * time.Millisecond, signal: syscall.SIGTERM},
		{at: 500 * time.Millisecond, signal: syscall.SIGKILL},
	}
	for _, tc := range []struct {
		name       string
		steps      []hostStep
		closeStdin bool
		hostGone   bool // the host closes both pipes: the server's writes fail with EPIPE
		ignore     bool // the fake ignores SIGINT and SIGTERM: the ladder ends in SIGKILL
		answered   bool // the call gets its isError answer
	}{
		{name: "claude burst", steps: claudeBurst},
		{name: "terminal burst", steps: terminalBurst},
		{name: "claude burst, CLI ignores signals", steps: claudeBurst, ignore: true},
		{name: "SIGINT", steps: []hostStep{{signal: syscall.SIGINT}}, answered: true},
		{name: "SIGTERM", steps: []hostStep{{signal: syscall.SIGTERM}}, answered: true},
		{name: "SIGINT, CLI ignores signals", steps: []hostStep{{signal: syscall.SIGINT}}, ignore: true, answered: true},
		// A second signal shortens the wait for answers, but the answer of
		// a run reaped after it still goes out.
		{name: "two SIGINTs, CLI ignores signals", steps: []hostStep{{signal: syscall.SIGINT}, {at: 22 * time.Millisecond, signal: syscall.SIGINT}},
			ignore: true, answered: true},
		{name: "SIGHUP", steps: []hostStep{{signal: syscall.SIGHUP}}, answered: true},
		{name: "stdin closed", closeStdin: true},
		// A host that exits without a word closes the server's pipes:
		// answering, and logging, then write to broken pipes, which must
		// not kill the server (SIGPIPE) before the run is recorded.
		{name: "host gone, pipes closed", closeStdin: true, hostGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
			s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: time.Hour, Grandchild: true, Escapee: true,
				IgnoreSignals: tc.ignore, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
			cs, srv, progress := startServerPipes(t, bin, fake, s, root, transcript)
			cmd := srv.cmd
			t.Cleanup(func() {
				if rec, err := fakeagent.ReadRecord(s.RecordDir); err == nil {
					rec.Kill() // leave no sleeper behind if the server failed
				}
			})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resc := make(chan callOutcome, 1)
			go func() {
				params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", root)}
				params.SetProgressToken("tok")
				res, err := cs.CallTool(ctx, params)
				resc <- callOutcome{res, err}
			}()
			for p := range progress { // the fake's whole tree is started
				if strings.Contains(p.Message, "running: ") || strings.Contains(p.Message, "thinking") {
					break
				}
			}
			rec, err := fakeagent.ReadRecord(s.RecordDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Procs) < 3 {
				t.Fatalf("the fake's tree has %d processes, want the agent, a grandchild and a setsid daemon", len(rec.Procs))
			}

			// Replay the host: the steps' times are the input of the test.
			t0 := time.Now()
			for _, st := range tc.steps {
				time.Sleep(time.Until(t0.Add(st.at)))
				if st.cancel {
					cancel()
				}
				if st.signal != 0 {
					// The server may be gone already: a signal to a
					// zombie or a reaped process is no failure.
					_ = cmd.Process.Signal(st.signal)
				}
			}
			if tc.hostGone {
				srv.stdout.Close()
				srv.stderr.Close()
			}
			if tc.closeStdin {
				t0 = time.Now()
				srv.stdin.Close()
			}
			r := <-resc // answered, or the connection ended with the server
			<-srv.exited
			// The server is gone: the session's pipes are broken, the one
			// error tolerated.
			if err := cs.Close(); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.EOF) {
				t.Errorf("ClientSession.Close() error = %v", err)
			}

			if alive := rec.Alive(); len(alive) > 0 {
				t.Errorf("processes of the run survived the server: %v", alive)
			}
			noSurvivors(t, s.Tag, cmd.Process.Pid)

			st := cmd.ProcessState
			killed := st != nil && !st.Exited() // the host's SIGKILL got there first
			if st == nil || (!killed && !st.Success()) {
				t.Errorf("server exit: %v, want success (or the host's SIGKILL)", st)
			}
			if tc.answered {
				checkShutdownAnswer(t, r.res, r.err)
			}

			// The transcript holds the run's session id in any case: the
			// line written when it became known.
			var started, ended *mcpadapter.TranscriptEntry
			entries := readTranscript(t, transcript)
			for i, e := range entries {
				switch {
				case e.Status == mcpadapter.StatusRunning && started == nil:
					started = &entries[i]
				case e.Status != mcpadapter.StatusRunning:
					ended = &entries[i]
				}
			}
			if started == nil || started.SessionID == "" || started.Run == "" {
				t.Fatalf("transcript %+v: no line with the run's session id", entries)
			}
			// A server that exited by itself wrote the run's final record
			// first.
			// A host's SIGKILL comes 500 ms after its first signal; the
			// shutdown ladder (200 ms + 100 ms) reaps even a CLI that
			// ignores every signal well before it, so the final record
			// must be there in every case, killed or not.
			switch {
			case ended == nil && killed:
				t.Errorf("the server was killed by the host's SIGKILL before the run's final record (only its session %s is in the transcript); the shutdown ladder must record the run first", started.SessionID)
			case ended == nil:
				t.Errorf("the server exited (%v) without the run's final record; transcript %+v", st, entries)
			case ended.Run != started.Run || ended.SessionID != started.SessionID || ended.Status != mcpadapter.StatusCancelled:
				t.Errorf("final record %+v, want the run %s cancelled, with session %s", ended, started.Run, started.SessionID)
			default:
				t.Logf("run recorded %v after the first signal or close (%v)", ended.Time.Sub(t0).Round(time.Millisecond), ended.Error)
			}
			if killed {
				t.Logf("server killed by the host's SIGKILL")
			}
		})
	}
}
