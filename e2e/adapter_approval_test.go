//go:build e2e

package e2e

// mcpadapter with Approvals: elicit over each real CLI: the nested agent's
// question about a shell command becomes an elicitation/create to the MCP
// client of the call, whose answer decides whether the command runs. The
// package's own tests use stand-in invokers, and the hosts of
// TestHostElicitation refuse every question headless; here a go-sdk
// client answers, so the answer's whole path (client, adapter, invoker,
// CLI's approval protocol, the CLI's tool) is exercised for real.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

func TestAdapterElicit(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		t.Run("allow", func(t *testing.T) { adapterElicitAllow(t, newRig(t, r.cli)) })
		t.Run("deny", func(t *testing.T) { adapterElicitDeny(t, newRig(t, r.cli)) })
		t.Run("cancel", func(t *testing.T) { adapterElicitCancel(t, newRig(t, r.cli)) })
	})
}

// noLeaks fails the test if a goroutine started after this call is still
// alive when the test's later cleanups (the adapter's teardown) are done.
// Call it before newAdapterRig, so that it runs after that teardown.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines left after the call and the teardown: %v", err)
		}
	})
}

// callTool calls the rig's CLI tool with prompt and returns the result's
// Output.
func (a *adapterRig) callTool(t *testing.T, ctx context.Context, prompt string) (*mcp.CallToolResult, mcpadapter.Output) {
	t.Helper()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: a.cli.name, Arguments: a.arguments(prompt, elicitPermission[a.cli.name])})
	if err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	if ps := a.survivors(); len(ps) > 0 {
		t.Errorf("processes of the run alive after the call returned:\n%s", strings.Join(ps, "\n"))
	}
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return res, out
}

// checkAsked checks that the client was asked once, by the adapter's form,
// about the command.
func (a *adapterRig) checkAsked(t *testing.T, seen []*mcp.ElicitParams, command string) {
	t.Helper()
	if len(seen) != 1 {
		t.Fatalf("the client got %d elicitations, want 1: %s", len(seen), jsonString(seen))
	}
	p := seen[0]
	for _, s := range []string{"The " + a.cli.name + " agent asks: run the command `", command, "Allow it?"} {
		if !strings.Contains(p.Message, s) {
			t.Errorf("elicitation message %q does not say %q", p.Message, s)
		}
	}
	schema, _ := json.Marshal(p.RequestedSchema)
	if !strings.Contains(string(schema), `"enum":["allow","deny"]`) || !strings.Contains(string(schema), `"required":["decision"]`) {
		t.Errorf("elicitation schema %s, want a required decision among allow and deny", schema)
	}
	t.Logf("elicitation: %q", p.Message)
}

// checkLogged checks that the server logged the approval as decided by the
// client, with allow.
func (a *adapterRig) checkLogged(t *testing.T, allow string) {
	t.Helper()
	for _, line := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(line, "msg=approval ") && strings.Contains(line, "cli="+a.cli.name) &&
			strings.Contains(line, "allow="+allow) && strings.Contains(line, "by=client") {
			return
		}
	}
	t.Errorf("the server logged no approval with allow=%s by=client", allow)
}

// elicitTouch has the rig's CLI, called through the adapter, ask to run
// touch on the file name in its workdir, and the client answer the question
// with answer (whose "decision" is "allow" or "deny"). It checks what an
// allowed and a denied command have alike: the call completes, after one
// question about the command; the server logs the client's decision; the
// transcript's final entry is completed. It returns the file and the call's
// output.
func elicitTouch(t *testing.T, r *rig, name string, answer map[string]any) (string, mcpadapter.Output) {
	t.Helper()
	noLeaks(t)
	file := filepath.Join(r.workdir, name)
	command := "touch " + file
	r.srv.Enqueue(fakemodel.Shell(command), fakemodel.EchoToolResult("after: "))
	el := &elicitations{answer: answerWith(answer)}
	a := newAdapterRig(t, r, el.handle)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(90*time.Second))
	defer cancel()

	res, out := a.callTool(t, ctx, "make the file")
	if res.IsError || out.Status != mcpadapter.StatusCompleted {
		t.Fatalf("call result IsError=%v, output %s; want a completed run (a denial, too, is for the model to read)", res.IsError, jsonString(out))
	}
	a.checkAsked(t, el.list(), command)
	a.checkLogged(t, fmt.Sprint(answer["decision"] == "allow"))
	if e := finalEntry(t, a.transcript, "make the file"); e.Status != mcpadapter.StatusCompleted {
		t.Errorf("transcript's final entry %s, want status completed", jsonString(e))
	}
	return file, out
}

func adapterElicitAllow(t *testing.T, r *rig) {
	file, out := elicitTouch(t, r, "allowed.txt", map[string]any{"decision": "allow"})
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	if !strings.HasPrefix(out.Text, "after:") {
		t.Errorf("Text = %q, want the model's answer after the tool's result", out.Text)
	}
	if n := len(r.srv.Scripted()); n != 2 {
		t.Errorf("the CLI asked the model %d times, want 2 (the command, then the answer)", n)
	}
}

func adapterElicitDeny(t *testing.T, r *rig) {
	const why = "no files today (clinvoke e2e)"
	file, out := elicitTouch(t, r, "denied.txt", map[string]any{"decision": "deny", "message": why})
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied command ran: stat %s = %v", file, err)
	}
	want := deniedWords(r.cli.name, "denied by the user: "+why)
	if body := lastScripted(t, r.srv); !strings.Contains(body, want) {
		t.Errorf("the model's next request does not carry the denial %q:\n%s", want, body)
	}
	if r.cli.name == "claude" && out.Text != "after: denied by the user: "+why {
		t.Errorf("Text = %q, want the denial's message echoed", out.Text)
	}
	t.Logf("answer after the denial: %q (the user's message reached the model: %v)", out.Text, strings.Contains(lastScripted(t, r.srv), why))
}

func adapterElicitCancel(t *testing.T, r *rig) {
	noLeaks(t)
	file := filepath.Join(r.workdir, "cancelled.txt")
	command := "touch " + file
	r.srv.Enqueue(fakemodel.Shell(command), fakemodel.Answer("not reached"))
	asked := make(chan struct{}, 1)
	withdrawn := make(chan error, 1)
	release := make(chan struct{}) // a failed test's teardown must not hang on the handler
	defer close(release)
	el := &elicitations{answer: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		select {
		case <-ctx.Done():
			withdrawn <- ctx.Err()
			return nil, ctx.Err()
		case <-release:
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
	}}
	a := newAdapterRig(t, r, el.handle)
	a.abandoned = true
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(90*time.Second))
	defer cancel()
	callCtx, cancelCall := context.WithCancel(ctx)
	defer cancelCall()
	done := make(chan error, 1)
	go func() {
		_, err := a.cs.CallTool(callCtx, &mcp.CallToolParams{Name: r.cli.name,
			Arguments: a.arguments("make the file", elicitPermission[r.cli.name])})
		done <- err
	}()

	wait := testenv.Timeout(testenv.Hang)
	select {
	case <-asked:
	case err := <-done:
		t.Fatalf("the call ended (error %v) before the client was asked", err)
	case <-time.After(wait):
		t.Fatal("the client was not asked")
	}
	// The CLI waits for the answer: its processes are alive.
	if len(r.survivors()) == 0 {
		t.Error("no process of the run is alive while its question waits")
	}
	cancelCall()
	select {
	case err := <-withdrawn:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the elicitation's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(wait):
		t.Fatal("the elicitation was not withdrawn from the client")
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("CallTool() error = %v, want context.Canceled", err)
		}
	case <-time.After(wait):
		t.Fatal("CallTool did not return after its context was cancelled")
	}
	// The server's side of the call ends too, and has reaped the run.
	wctx, stop := context.WithTimeout(ctx, wait)
	defer stop()
	if err := a.tools.Wait(wctx); err != nil {
		t.Fatalf("Tools.Wait() = %v with %d calls in progress", err, a.tools.Active())
	}
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes of the run alive after the call ended:\n%s", strings.Join(ps, "\n"))
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran: stat %s = %v", file, err)
	}
	a.checkAsked(t, el.list(), command)
	a.checkLogged(t, "false")
	e := finalEntry(t, a.transcript, "make the file")
	if e.Status != mcpadapter.StatusCancelled {
		t.Errorf("transcript's final entry %s, want status cancelled", jsonString(e))
	}
	t.Logf("the run ended: exit code %d, error %q", e.ExitCode, e.Error)
	if n := r.srv.Pending(); n != 1 {
		t.Errorf("%d scripted turns left, want 1 (the model was not asked again)", n)
	}
}
