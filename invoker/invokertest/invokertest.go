// Package invokertest is for testing code that runs agents, as
// net/http/httptest is for HTTP and testing/fstest for file systems. It has
// two parts:
//
//   - [Agent], a scripted stand-in for the Codex, Gemini and Claude Code
//     CLIs that the real backends run with no CLI installed and no network
//     (the test binary plays it: call [Main] from TestMain; a program that
//     is not a test calls [RunAgent] first thing in main). It answers,
//     streams, calls a tool, stalls, fails, ignores signals, leaves
//     processes behind, and holds sessions of several turns.
//   - [Run], a conformance suite that checks that an [invoker.Invoker]
//     keeps the contract of package invoker, runs and sessions alike, the
//     way testing/fstest.TestFS checks a file system and
//     testing/slogtest checks a slog.Handler.
//
// The suite runs each case on a fresh Invoker from a factory that the
// test supplies. The factory receives a [Fake]: a description of what the
// CLI must do in that case (answer, stream until stopped, fail, print a
// huge line, start a grandchild...). For an Invoker built on one of this
// module's backends (a wrapper of your own, say), [Fake.Agent] gives the
// Agent that does it:
//
//	func TestConformance(t *testing.T) {
//		invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
//			a, opts := f.Agent("claude")
//			return mywrapper.New(claude.New(a.Options(), opts))
//		})
//	}
//
// A backend for another CLI points its Invoker at a fake of that CLI that
// does what the Fake asks.
//
// Survivors are found on Linux by scanning /proc for processes whose
// environment holds the case's tag ([TagVar]), which the suite passes in
// the request's Env and every descendant inherits; elsewhere that check is
// skipped.
package invokertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/procstat"
	"github.com/clinvoke/clinvoke/invoker"
)

// TagVar is the environment variable the suite sets in Request.Env to a
// unique value per case, so that the processes of the case can be found.
const TagVar = "CLINVOKE_CONFORMANCE_TAG"

// A Fake describes what the CLI run by the Invoker under test must do in
// one case. The zero value answers at once.
type Fake struct {
	// SessionID is the session id the CLI must report. When empty, the
	// CLI reports the id it was asked to resume (Request.SessionID), or
	// any id of its own.
	SessionID string
	// Answer is the final answer the CLI must give.
	Answer string
	// Stream asks the CLI to keep streaming messages until it is stopped.
	Stream bool
	// Grandchild asks the CLI to start a long-lived child process, and
	// Escapee one that leaves the CLI's session (setsid) and is orphaned.
	Grandchild, Escapee bool
	// Fail asks the CLI to report a failure with this message in its own
	// stream, the way the real CLI reports a model error.
	Fail string
	// Stderr is written to the CLI's standard error.
	Stderr string
	// ExitCode is the CLI's exit status; with a non-zero value the CLI
	// ends without its terminal event.
	ExitCode int
	// HugeLine asks for one event line of about this many bytes before the
	// answer.
	HugeLine int
	// Tool asks the CLI to call a shell tool before it answers, which
	// takes one turn of its own: with Request.MaxTurns 1 the CLI reaches
	// its turn limit after the tool's result, as the real CLIs do.
	Tool bool
	// Ask asks the CLI to ask permission to run this shell command
	// (Request.Approve decides), to run it in the working directory if
	// allowed, and to answer with a first line "approved", or, denied,
	// not to run it and to answer with a first line starting with
	// "denied" (see Agent.Ask).
	Ask string
	// AskCount, above 1, asks the CLI to ask Ask's question that many
	// times at once, as the parallel tool calls of one model response
	// (each its own tool call, all asked before any answer is awaited),
	// and to answer with one line for each, in order (see
	// Agent.AskCount).
	AskCount int
	// Edit asks the CLI to ask permission to write this file, a path
	// relative to the working directory (Request.Approve decides, with an
	// Approval of Kind "file_change" naming the file in its Paths), after
	// Ask; to write it if allowed and answer with the line "edited", or,
	// denied, to leave it alone and answer with a line starting with
	// "denied" (see Agent.Edit).
	Edit string
	// CallTool asks the CLI to call the tool named "server/tool" of an
	// MCP server of the request with ToolArgs, and to answer with the
	// tool's result text (see Agent.CallTool).
	CallTool string
	// ToolArgs are the arguments of CallTool's call.
	ToolArgs map[string]any
	// AnswerOverLimit asks for a final answer longer than the Invoker's
	// line limit (invoker.Options.MaxLineSize), so that the lines that carry
	// it are skipped. The factory may lower the limit for the case rather
	// than have the CLI print more than 64 MiB.
	AnswerOverLimit bool
}

// Run runs every case of the suite as a subtest of t, each on a fresh
// Invoker from newInvoker. The suite reads what the Invoker supports from
// its Capabilities: it checks that every optional field declared supported
// is honoured and that every other one is refused with
// invoker.ErrUnsupported before anything starts, runs the session
// cases when Capabilities.Sessions is true (else it checks that
// OpenSession refuses with ErrUnsupported), and the cases of Approve and
// of Go MCP servers when Capabilities.Approve and Capabilities.GoTools
// are.
func Run(t *testing.T, newInvoker func(t *testing.T, f Fake) invoker.Invoker) {
	t.Helper()
	for _, c := range slices.Concat(cases, sessionCases, twoWayCases) {
		t.Run(c.name, func(t *testing.T) {
			r := &report{}
			c.run(r, newCase(t, newInvoker))
			for _, msg := range r.errs {
				t.Errorf("%s\n\tcontract: %s", msg, c.rule)
			}
		})
	}
}

// Test runs the suite without a *testing.T, for tests of the suite itself,
// and returns every failure joined, or nil. newInvoker is called once per
// case; workdir is an existing directory used as Request.Workdir.
func Test(newInvoker func(f Fake) invoker.Invoker, workdir string) error {
	var errs []error
	for _, c := range slices.Concat(cases, sessionCases, twoWayCases) {
		r := &report{}
		k := &kase{
			newInvoker: func(f Fake) invoker.Invoker { return newInvoker(f) },
			workdir:    func() string { return workdir },
		}
		c.run(r, k)
		for _, msg := range r.errs {
			errs = append(errs, fmt.Errorf("%s: %s (contract: %s)", c.name, msg, c.rule))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invokertest found errors:\n%w", errors.Join(errs...))
	}
	return nil
}

type report struct {
	mu   sync.Mutex
	errs []string
}

func (r *report) errorf(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// kase is what a case needs: a factory and a workdir.
type kase struct {
	newInvoker func(Fake) invoker.Invoker
	workdir    func() string
}

func newCase(t *testing.T, newInvoker func(*testing.T, Fake) invoker.Invoker) *kase {
	return &kase{
		newInvoker: func(f Fake) invoker.Invoker { return newInvoker(t, f) },
		workdir:    t.TempDir,
	}
}

// capabilities returns what the factory's Invokers declare.
func (k *kase) capabilities() invoker.Capabilities {
	return k.newInvoker(Fake{}).Capabilities()
}

// invoke runs one request with a fresh tag and checks afterwards that no
// process carrying the tag is alive.
func (k *kase) invoke(r *report, ctx context.Context, f Fake, req invoker.Request) (*invoker.Result, error) {
	return k.invokeWith(r, k.newInvoker(f), ctx, req)
}

func (k *kase) invokeWith(r *report, inv invoker.Invoker, ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	tag := newTag()
	if req.Workdir == "" {
		req.Workdir = k.workdir()
	}
	if req.Prompt == "" {
		req.Prompt = "conformance"
	}
	req.Env = append(req.Env, TagVar+"="+tag)
	req.Deltas = req.Deltas && inv.Capabilities().Deltas
	res, err := inv.Invoke(ctx, req)
	if res == nil {
		r.errorf("Invoke() returned a nil *Result (error %v)", err)
		res = &invoker.Result{}
	}
	if alive := survivors(tag); len(alive) > 0 {
		r.errorf("processes of the run alive after Invoke returned: pids %v", alive)
	}
	return res, err
}

var tagSeq struct {
	sync.Mutex
	n int
}

func newTag() string {
	tagSeq.Lock()
	defer tagSeq.Unlock()
	tagSeq.n++
	return fmt.Sprintf("%d-%d-%d", os.Getpid(), time.Now().UnixNano(), tagSeq.n)
}

// survivors lists live processes whose environment holds TagVar=tag.
func survivors(tag string) []int {
	if runtime.GOOS != "linux" {
		return nil
	}
	want := []byte(TagVar + "=" + tag + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains(string(env)+"\x00", string(want)) {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil && !errors.Is(err, procstat.ErrMalformed) {
			continue
		}
		if err == nil && st.State == 'Z' {
			continue // a zombie is dead; init reaps it
		}
		pids = append(pids, pid)
	}
	return pids
}
