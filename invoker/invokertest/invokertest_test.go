package invokertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// memInvoker keeps the contract without any process: it plays the Fake
// itself. The suite must accept it.
type memInvoker struct {
	f   invokertest.Fake
	seq *atomic.Int64
}

func (memInvoker) Name() string { return "mem" }

func (memInvoker) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Images: true, SystemPrompt: true, OutputSchema: true, MaxTurns: true}
}

func (memInvoker) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}

func (m memInvoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	res := &invoker.Result{ExitCode: -1}
	fail := func(err error) (*invoker.Result, error) { return res, fmt.Errorf("mem: %w", err) }
	if strings.TrimSpace(req.Prompt) == "" || !filepath.IsAbs(req.Workdir) || !req.Permission.Valid() {
		return fail(invoker.ErrInvalidRequest)
	}
	if _, err := os.Stat(req.Workdir); err != nil {
		return fail(fmt.Errorf("%w: %v", invoker.ErrInvalidRequest, err))
	}
	for i, kv := range req.Env {
		if k, v, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(v, 0) {
			return fail(fmt.Errorf("%w: Request.Env[%d] is not KEY=VALUE", invoker.ErrInvalidRequest, i))
		}
	}
	if req.MaxBudgetUSD != 0 {
		return fail(driver.Unsupported("MaxBudgetUSD", ""))
	}
	if req.Approve != nil {
		return fail(driver.Unsupported("Approve", ""))
	}
	if len(req.MCPServers) > 0 {
		return fail(driver.Unsupported("MCPServers", ""))
	}
	if err := ctx.Err(); err != nil {
		return fail(cancelError(ctx))
	}
	emit := func(ev invoker.Event) {
		ev.SessionID = res.SessionID
		if ev.Raw == nil {
			ev.Raw, _ = json.Marshal(ev.Kind.String())
		}
		if req.OnEvent != nil {
			req.OnEvent(ev)
		}
	}
	res.SessionID = m.f.SessionID
	if res.SessionID == "" {
		res.SessionID = req.SessionID
	}
	if res.SessionID == "" {
		res.SessionID = fmt.Sprintf("mem-%d", m.seq.Add(1))
	}
	emit(invoker.Event{Kind: invoker.KindSession, SessionID: res.SessionID})
	res.Stderr = m.f.Stderr
	if m.f.HugeLine > 0 {
		raw, _ := json.Marshal(strings.Repeat("x", m.f.HugeLine))
		emit(invoker.Event{Kind: invoker.KindToolResult, Raw: raw})
	}
	switch {
	case m.f.Stream:
		res.Text = "partial"
		emit(invoker.Event{Kind: invoker.KindMessage, Text: res.Text})
		<-ctx.Done()
		return fail(cancelError(ctx))
	case m.f.AnswerOverLimit:
		return fail(fmt.Errorf("%w: the answer's line was skipped; raise the limit with invoker.Options.MaxLineSize", invoker.ErrLineTooLong))
	case m.f.Fail != "":
		res.ExitCode = 1
		return fail(&invoker.StreamError{Message: m.f.Fail})
	case m.f.ExitCode != 0:
		res.ExitCode = m.f.ExitCode
		return fail(&invoker.ExitError{ExitCode: m.f.ExitCode, Stderr: m.f.Stderr})
	}
	if m.f.Tool && req.MaxTurns == 1 {
		res.ExitCode = 1
		return fail(&invoker.LimitError{Limit: invoker.ErrMaxTurns, SessionID: res.SessionID})
	}
	res.Text, res.ExitCode = m.f.Answer, 0
	if len(req.OutputSchema) > 0 {
		// Checks only that the answer is JSON: enough for the suite.
		if !json.Valid([]byte(res.Text)) {
			return fail(&invoker.SchemaError{Text: res.Text, Err: errors.New("not JSON")})
		}
		res.Structured = json.RawMessage(res.Text)
	}
	emit(invoker.Event{Kind: invoker.KindMessage, Text: res.Text})
	emit(invoker.Event{Kind: invoker.KindDone})
	return res, nil
}

// cancelError is ctx.Err() naming the cause without wrapping it.
func cancelError(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && c != ctx.Err() {
		return fmt.Errorf("%w (cause: %v)", ctx.Err(), c)
	}
	return ctx.Err()
}

func TestSuiteAcceptsACorrectInvoker(t *testing.T) {
	var seq atomic.Int64
	invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
		return memInvoker{f: f, seq: &seq}
	})
}

// brokenInvoker ignores its context, forgets the session id and accepts any
// request.
type brokenInvoker struct{ f invokertest.Fake }

func (brokenInvoker) Name() string { return "broken" }

func (brokenInvoker) Capabilities() invoker.Capabilities { return invoker.Capabilities{} }

func (brokenInvoker) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}

func (b brokenInvoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if req.OnEvent != nil {
		req.OnEvent(invoker.Event{Kind: invoker.KindMessage, Text: b.f.Answer})
	}
	return &invoker.Result{Text: b.f.Answer}, nil
}

func TestSuiteRejectsABrokenInvoker(t *testing.T) {
	err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker { return brokenInvoker{f} }, t.TempDir())
	if err == nil {
		t.Fatal("Test() = nil, want errors for a broken invoker")
	}
	for _, c := range []string{"Complete", "EventsCarrySession", "Resume", "CancelCause", "CancelReapsTree", "DeadlineReapsTree", "StreamFailureKeepsSession", "ExitStatus", "DroppedAnswer", "BadInput", "Capabilities"} {
		if !strings.Contains(err.Error(), c+": ") {
			t.Errorf("Test() error does not report case %s:\n%v", c, err)
		}
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) < 7 {
		t.Errorf("Test() error does not unwrap to the list of failures: %v", err)
	}
}

// blindLongLived declares two-way control and keeps the contract in the
// one-shot mode, but with Request.Approve set, the long-lived mode, it
// answers whatever the Fake asked: as a session that waits for the end of
// a turn it lost, or ignores the CLI's exit status.
type blindLongLived struct{ memInvoker }

func (b blindLongLived) Capabilities() invoker.Capabilities {
	c := b.memInvoker.Capabilities()
	c.Approve = true
	return c
}

func (b blindLongLived) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if req.Approve != nil {
		req.Approve = nil
		b.f.AnswerOverLimit, b.f.ExitCode = false, 0
	}
	return b.memInvoker.Invoke(ctx, req)
}

// The suite runs the dropped answer and the exit status in the long-lived
// mode too, where an Invoker declares two-way control, and reports an
// Invoker that gets them right only in the one-shot mode.
func TestSuiteChecksTheLongLivedMode(t *testing.T) {
	var seq atomic.Int64
	err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker {
		return blindLongLived{memInvoker{f: f, seq: &seq}}
	}, t.TempDir())
	for _, c := range []string{"DroppedAnswer", "ExitStatus"} {
		if want := c + ": with Request.Approve set (the long-lived mode): "; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Test() error does not report %q:\n%v", want, err)
		}
		if err != nil && strings.Contains(err.Error(), c+": Invoke()") {
			t.Errorf("Test() error reports case %s in the one-shot mode, which the Invoker keeps:\n%v", c, err)
		}
	}
}

// ignoringInvoker declares OutputSchema and MaxTurns but drops both.
type ignoringInvoker struct{ memInvoker }

func (i ignoringInvoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	req.OutputSchema, req.MaxTurns = nil, 0
	return i.memInvoker.Invoke(ctx, req)
}

func TestSuiteRejectsIgnoredSchemaAndLimit(t *testing.T) {
	var seq atomic.Int64
	err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker {
		return ignoringInvoker{memInvoker{f: f, seq: &seq}}
	}, t.TempDir())
	for _, c := range []string{"StructuredAnswer", "MaxTurnsReached"} {
		if err == nil || !strings.Contains(err.Error(), c+": ") {
			t.Errorf("Test() error does not report case %s:\n%v", c, err)
		}
	}
}

// leakyInvoker quotes a bad environment entry whole in its error.
type leakyInvoker struct{ memInvoker }

func (l leakyInvoker) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return &invoker.Result{ExitCode: -1}, fmt.Errorf("%w: Env entry %q is not KEY=VALUE", invoker.ErrInvalidRequest, kv)
		}
	}
	return l.memInvoker.Invoke(ctx, req)
}

func TestSuiteRejectsAQuotedSecret(t *testing.T) {
	var seq atomic.Int64
	err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker {
		return leakyInvoker{memInvoker{f: f, seq: &seq}}
	}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "SecretsNotQuoted: ") {
		t.Errorf("Test() error does not report case SecretsNotQuoted:\n%v", err)
	}
}

// The suite runs, through the public Agent, on an Invoker built on one of
// the module's backends and wrapped the way a user's middleware wraps one:
// the path a third party takes, with no CLI installed.
func TestRunWithAgent(t *testing.T) {
	invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
		a, opts := f.Agent("claude")
		return wrapped{claude.New(a.Options(), opts, invoker.Options{InterruptGrace: 500 * time.Millisecond})}
	})
}

// wrapped is a user's middleware: it embeds the Invoker it wraps.
type wrapped struct{ invoker.Invoker }

// The suite catches an Invoker that mishandles the questions about file
// changes (and does not take that for a fake that ignores Fake.Edit):
// one that hides their paths, and one that allows them without asking
// the callback. The same Invoker passing the questions on passes.
func TestSuiteChecksFileChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		approve func(orig func(context.Context, invoker.Approval) invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision
		want    string // in ApproveFileChange's failure; "" for none
	}{
		{"passed on", nil, ""},
		{"paths hidden", func(orig func(context.Context, invoker.Approval) invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision {
			return func(ctx context.Context, a invoker.Approval) invoker.Decision {
				a.Paths = nil
				return orig(ctx, a)
			}
		}, "want a file_change whose Paths name"},
		{"allowed without asking", func(orig func(context.Context, invoker.Approval) invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision {
			return func(ctx context.Context, a invoker.Approval) invoker.Decision {
				if a.Kind == "file_change" {
					return invoker.Decision{Allow: true}
				}
				return orig(ctx, a)
			}
		}, "Approve was called 0 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker {
				if f.Edit == "" {
					return stubInvoker{} // the other cases are not under test
				}
				a, opts := f.Agent("claude")
				return approveWrapper{claude.New(a.Options(), opts), tc.approve}
			}, t.TempDir())
			var got []string
			for _, line := range strings.Split(fmt.Sprint(err), "\n") {
				if strings.HasPrefix(line, "ApproveFileChange: ") {
					got = append(got, line)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("ApproveFileChange failed an Invoker that passes the questions on:\n%s", strings.Join(got, "\n"))
			case tc.want != "" && !strings.Contains(strings.Join(got, "\n"), tc.want):
				t.Errorf("ApproveFileChange reported %q, want a failure holding %q", got, tc.want)
			}
		})
	}
}

// approveWrapper is a middleware that changes the Approve callback of
// each request with approve, when set.
type approveWrapper struct {
	invoker.Invoker
	approve func(func(context.Context, invoker.Approval) invoker.Decision) func(context.Context, invoker.Approval) invoker.Decision
}

func (w approveWrapper) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if w.approve != nil && req.Approve != nil {
		req.Approve = w.approve(req.Approve)
	}
	return w.Invoker.Invoke(ctx, req)
}

// stubInvoker declares Approve and fails every call at once.
type stubInvoker struct{ brokenInvoker }

func (stubInvoker) Capabilities() invoker.Capabilities { return invoker.Capabilities{Approve: true} }

func (stubInvoker) Invoke(context.Context, invoker.Request) (*invoker.Result, error) {
	return &invoker.Result{ExitCode: -1}, errors.New("stub")
}

// The suite catches an Invoker whose Approvals leave out what a policy
// compares: the workdir and the MCP tool's names left empty, paths given
// as the CLI named them rather than absolute and resolved. The same
// Invoker passing the Approvals on passes.
func TestSuiteChecksApprovalForm(t *testing.T) {
	t.Parallel()
	type approve = func(context.Context, invoker.Approval) invoker.Decision
	for _, tc := range []struct {
		name   string
		change func(a *invoker.Approval)
		want   []string // in ApproveForm's failures
	}{
		{"passed on", nil, nil},
		{"left empty", func(a *invoker.Approval) {
			a.Workdir, a.Cwd = "", ""
			a.MCP.Server, a.MCP.Tool = "", ""
		}, []string{"Approval.Workdir = \"\"", "Approval.Cwd = \"\"", "Approval.MCP = {Server: Tool:}"}},
		{"unresolved", func(a *invoker.Approval) {
			for i, p := range a.Paths {
				a.Paths[i] = filepath.Join(filepath.Base(filepath.Dir(p)), ".", filepath.Base(p))
			}
		}, []string{"not absolute and clean", "want"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := invokertest.Test(func(f invokertest.Fake) invoker.Invoker {
				a, opts := f.Agent("claude")
				inv := claude.New(a.Options(), opts)
				if f.Edit == "" || f.Ask == "" {
					// The other cases are not under test.
					return capsStub{caps: inv.Capabilities()}
				}
				var wrap func(approve) approve
				if tc.change != nil {
					wrap = func(orig approve) approve {
						return func(ctx context.Context, a invoker.Approval) invoker.Decision {
							tc.change(&a)
							return orig(ctx, a)
						}
					}
				}
				return approveWrapper{inv, wrap}
			}, t.TempDir())
			var got []string
			for _, line := range strings.Split(fmt.Sprint(err), "\n") {
				if strings.HasPrefix(line, "ApproveForm: ") {
					got = append(got, line)
				}
			}
			if tc.want == nil && len(got) > 0 {
				t.Errorf("ApproveForm failed an Invoker that passes the Approvals on:\n%s", strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("ApproveForm reported %q, want a failure holding %q", got, w)
				}
			}
		})
	}
}

// capsStub declares caps and fails every call at once.
type capsStub struct {
	stubInvoker
	caps invoker.Capabilities
}

func (s capsStub) Capabilities() invoker.Capabilities { return s.caps }
