//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// Captures of the real CLIs' session protocols (Claude Code's stream-json
// input, Codex's app-server, Gemini CLI's ACP), as the backends' session
// tests replay them (<cli>/testdata/session/*.jsonl, read by
// internal/testkit/golden.LoadSession). Run
//
//	CLINVOKE_CAPTURE=1 e2e/run -run TestCaptureSessions -v
//
// to record them again, for instance after a CLI's pin moved. Each
// session runs through the library as usual, with the test binary between
// the engine and the real CLI (captureProxy): it copies every line both
// ways and writes them, in the order it saw them, to the capture, one per
// line: "> " and the line the session wrote on the CLI's standard input,
// "< " and a line of its standard output, "! " and a line of its standard
// error. The workdir and home of the run are replaced by
// captureWorkdir and captureHome, so that a replay can give the same
// Request.Workdir.

const (
	captureEnv     = "CLINVOKE_CAPTURE"      // set to 1 to record the captures
	captureRealEnv = "CLINVOKE_CAPTURE_REAL" // the proxy's CLI
	captureFileEnv = "CLINVOKE_CAPTURE_FILE" // the proxy's transcript
	captureWorkdir = "/capture/workdir"      // stands for the run's workdir
	captureHome    = "/capture/home"         // stands for the run's home
	captureMaxLine = 64 << 20                // longer lines are not expected
	captureNote    = "# recorded by e2e/capture_test.go (CLINVOKE_CAPTURE=1 e2e/run -run TestCaptureSessions)"
)

// captureProxy runs the CLI named by CLINVOKE_CAPTURE_REAL with the
// proxy's arguments, copies standard input, output and error line by line,
// appends each line to the transcript, and exits with the CLI's status. It
// takes no signal itself: the CLI is in its process group and gets the
// engine's signals directly, and the proxy ends when the CLI does.
func captureProxy() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	cliPath, file := os.Getenv(captureRealEnv), os.Getenv(captureFileEnv)
	log, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capture proxy:", err)
		return 2
	}
	defer log.Close()
	var mu sync.Mutex
	record := func(dir string, line []byte) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(log, "%s %s\n", dir, line)
	}
	cmd := exec.Command(cliPath, os.Args[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, captureRealEnv+"=") && !strings.HasPrefix(kv, captureFileEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return 2
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 2
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "capture proxy:", err)
		return 127
	}
	copyLines := func(dst io.Writer, src io.Reader, dir string) {
		sc := bufio.NewScanner(src)
		sc.Buffer(nil, captureMaxLine)
		for sc.Scan() {
			record(dir, sc.Bytes())
			dst.Write(append(sc.Bytes(), '\n'))
		}
	}
	go func() {
		copyLines(in, os.Stdin, ">")
		in.Close() // end of input for the CLI, as for the engine
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyLines(os.Stdout, out, "<") }()
	go func() { defer wg.Done(); copyLines(os.Stderr, errp, "!") }()
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

// A captureScenario is one recorded session: the model's scripted answers
// and the turns, each of which may be interrupted once ready says so.
type captureScenario struct {
	name  string
	perm  func(c *cli) invoker.Permission
	model []fakemodel.Turn
	turns []captureTurn
	only  string // the one CLI that sends what the scenario is about
}

type captureTurn struct {
	prompt string
	// interrupt, when set, is the moment the turn is cancelled:
	// "stream", a moment after the model's stalled answer began, as in
	// TestSessionInterruptWhileModelStreams; "tool", once longTool runs.
	interrupt string
}

func TestCaptureSessions(t *testing.T) {
	if os.Getenv(captureEnv) != "1" {
		t.Skipf("records the session captures of the real CLIs into <cli>/testdata/session; set %s=1 to run", captureEnv)
	}
	readOnly := func(*cli) invoker.Permission { return invoker.ReadOnly }
	shell := func(c *cli) invoker.Permission { return c.shell }
	scenarios := []captureScenario{
		{name: "turn", perm: readOnly, model: []fakemodel.Turn{fakemodel.Answer("hi there friend")},
			turns: []captureTurn{{prompt: "say hi"}}},
		{name: "interrupt-stream", perm: readOnly,
			model: []fakemodel.Turn{fakemodel.Stall("partial words "), fakemodel.Answer("after interrupt")},
			turns: []captureTurn{{prompt: "stall", interrupt: "stream"}, {prompt: "and now"}}},
		{name: "interrupt-tool", perm: shell,
			model: []fakemodel.Turn{fakemodel.Shell(longTool), fakemodel.Answer("after tool")},
			turns: []captureTurn{{prompt: "follow", interrupt: "tool"}, {prompt: "and now"}}},
		// In ACP's default mode Gemini asks before a shell command that
		// changes something (0.61.0 asked nothing for "echo hello"); a
		// read-only session refuses it. Claude Code (no
		// --permission-prompt-tool) and Codex (policy "never") ask
		// nothing.
		{name: "approval", perm: readOnly, only: "gemini",
			model: []fakemodel.Turn{fakemodel.Shell("touch made.txt"), fakemodel.Answer("not allowed then")},
			turns: []captureTurn{{prompt: "make a file"}}},
	}
	for i := range clis {
		c := &clis[i]
		t.Run(c.name, func(t *testing.T) {
			for _, sc := range scenarios {
				if sc.only != "" && sc.only != c.name {
					continue
				}
				t.Run(sc.name, func(t *testing.T) { captureSession(t, c, sc) })
			}
		})
	}
}

func captureSession(t *testing.T, c *cli, sc captureScenario) {
	r := newRig(t, c)
	bin, err := exec.LookPath(c.name)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "capture.jsonl")
	env := append(c.setup(t, r.srv, r.home), "HOME="+r.home, tagVar+"="+r.tag,
		captureEnv+"=proxy", captureRealEnv+"="+bin, captureFileEnv+"="+file)
	inv := c.new(invoker.Options{Binary: os.Args[0], Env: env})
	writeFile(t, filepath.Join(r.workdir, "follow.log"), "")
	r.srv.Enqueue(sc.model...)

	ctx := turnCtx(t)
	s, err := inv.OpenSession(ctx, invoker.SessionRequest{Workdir: r.workdir, Model: c.model, Permission: sc.perm(c)})
	if err != nil {
		t.Fatalf("OpenSession() error = %v", err)
	}
	for i, turn := range sc.turns {
		switch turn.interrupt {
		case "stream":
			calls := len(r.srv.Scripted())
			var seen time.Time
			interruptWhen(t, s, turn.prompt, "the model streams", func() bool {
				if seen.IsZero() && len(r.srv.Scripted()) > calls {
					seen = time.Now()
				}
				return !seen.IsZero() && time.Since(seen) > 300*time.Millisecond
			})
			continue
		case "tool":
			interruptWhen(t, s, turn.prompt, "a tool runs "+longTool, func() bool { return r.toolRunning(longTool) })
			r.waitFor("the tool to end after the interrupt", quick, func() bool { return !r.toolRunning(longTool) })
			continue
		}
		res, err := s.Turn(ctx, invoker.TurnRequest{Prompt: turn.prompt})
		if err != nil {
			t.Fatalf("turn %d: Turn() error = %v; stderr tail:\n%s", i+1, err, res.Stderr)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes of the session alive after Close returned:\n%s", strings.Join(ps, "\n"))
	}

	if sc.name == "approval" {
		if _, err := os.Stat(filepath.Join(r.workdir, "made.txt")); err == nil {
			t.Errorf("the read-only session let the CLI run touch made.txt")
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The longer path first: the workdir may lie under the home.
	repl := []string{r.workdir, captureWorkdir, r.home, captureHome}
	if len(r.home) > len(r.workdir) {
		repl = []string{r.home, captureHome, r.workdir, captureWorkdir}
	}
	text := strings.NewReplacer(repl...).Replace(string(b))
	dest := filepath.Join("..", c.name, "testdata", "session", sc.name+".jsonl")
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("%s\n# %s %s, scenario %q, permission %s\n", captureNote, c.name, cliVersion(t, c), sc.name, sc.perm(c))
	if err := os.WriteFile(dest, []byte(header+text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d lines)", dest, strings.Count(text, "\n"))
}

// cliVersion is the CLI's --version, for the capture's header.
func cliVersion(t *testing.T, c *cli) string {
	ctx, cancel := context.WithTimeout(context.Background(), quick)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.name, "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}
