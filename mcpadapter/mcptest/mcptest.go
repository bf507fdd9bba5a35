// Package mcptest is for testing MCP servers built on package mcpadapter,
// as net/http/httptest is for HTTP handlers. It drives the real server
// through the real go-sdk client, over in-memory transports: no process
// for the server, no network.
//
// A [Client] connects to the server under test, calls its tools and
// decodes their results into [mcpadapter.Output] (checking that the result
// is one the adapter could have given), and waits until the runs of the
// calls are reaped, which is the moment to look for processes left behind.
// An [Invoker] wraps an invoker given to the server so that a test can wait
// for a run to start, and cancel its call then, rather than sleep.
//
// With invoker/invokertest, whose Agent stands in for each CLI, a test
// needs no CLI and no key. Typical usage inside a test, with a server of
// one's own (newServer) and invokertest.Main in TestMain:
//
//	agent := invokertest.Agent{CLI: "claude", Answer: "Done."}
//	server, tools := newServer(claude.New(agent.Options()))
//	c := mcptest.Connect(t, server, tools, nil)
//	out, err := c.Call(t.Context(), "claude", mcpadapter.Input{Prompt: "Fix it.", Workdir: dir})
//	if err != nil || out.Text != "Done." {
//		t.Errorf("Call() = %+v, %v", out, err)
//	}
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

// closeTimeout bounds the wait of Close for the calls in progress and the
// warm sessions, which Tools.Shutdown cancels: long enough for any ladder
// of the invokers' grace periods, short of go test's own timeout.
const closeTimeout = time.Minute

// A Client is an MCP client connected to a server over in-memory
// transports, for tests. Its methods may be called concurrently.
type Client struct {
	// Session is the client's session, for what the methods of Client do
	// not cover (ListTools, a call with a progress token). Close closes
	// it; do not close it yourself.
	Session *mcp.ClientSession

	server    *mcp.ServerSession
	tools     *mcpadapter.Tools
	abandoned atomic.Bool // a call was given up by the client (its context ended)
}

// NewClient connects a new client to server, on which tools were
// registered (the Tools that mcpadapter.Register returned), over
// in-memory transports. opts configures the client (an ElicitationHandler
// to answer approval questions, say) and may be nil. The caller must call
// Close; in a test, [Connect] does.
func NewClient(server *mcp.Server, tools *mcpadapter.Tools, opts *mcp.ClientOptions) (*Client, error) {
	if server == nil || tools == nil {
		return nil, errors.New("mcptest: NewClient: the server and its *mcpadapter.Tools are required")
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptest: connecting the server: %w", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcptest", Version: "v1.0.0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("mcptest: connecting the client: %w", err), ss.Close())
	}
	return &Client{Session: cs, server: ss, tools: tools}, nil
}

// Connect is NewClient for a test: it reports an error of NewClient with
// t.Fatal, and registers Close with t.Cleanup, reporting its error with
// t.Error. Cleanups run in reverse order of registration, so a Client
// connected after another closes first.
func Connect(t testing.TB, server *mcp.Server, tools *mcpadapter.Tools, opts *mcp.ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(server, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Close ends the client and the server's side of its connection, in that
// order, then shuts the tools down (Tools.Shutdown): the runs still in
// flight are cancelled, the warm sessions closed, and Close returns once
// every run is reaped and recorded. The server's other clients, if any,
// should be closed at the same time: the tools refuse calls from then on.
//
// It returns every error of the teardown, joined, and an error when the
// runs are not reaped within a minute. A call that the client gave up
// (its context ended, so that Call returned the context's error) is still
// answered by the server when its run ends; if the connection is closed
// by then, the server's write fails with io.ErrClosedPipe, which Close
// expects and does not report.
func (c *Client) Close() error {
	var errs []error
	if err := c.Session.Close(); err != nil {
		errs = append(errs, fmt.Errorf("mcptest: closing the client session: %w", err))
	}
	if err := c.server.Wait(); err != nil && !(c.abandoned.Load() && errors.Is(err, io.ErrClosedPipe)) {
		errs = append(errs, fmt.Errorf("mcptest: the server session ended with: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := c.tools.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("mcptest: shutting the tools down: %d calls still in progress after %v: %w", c.tools.Active(), closeTimeout, err))
	}
	return errors.Join(errs...)
}

// Wait returns once no call of the tools is in progress and no warm
// session is alive: each call's run has been reaped (its CLI and every
// process it started are gone) and recorded (Tools.Wait). It returns
// ctx.Err() if ctx is done first.
//
// A call the client cancelled returns before the server has stopped its
// run: wait before looking for processes left behind
// (invokertest.Survivors). A warm session (Options.WarmSessions) counts
// until it has been idle for its IdleTimeout, minutes by default: a test
// of warm sessions calls Close instead, which closes them.
func (c *Client) Wait(ctx context.Context) error {
	return c.tools.Wait(ctx)
}

// Call calls the single-run tool named tool with args (an
// mcpadapter.Input, or a map of its JSON fields) and returns the
// structured content of the result.
//
// The error is the client's when the call got no result: the context's
// error for a call that ctx ended (a client that cancels gets no answer,
// as MCP has it), or a protocol error. A result is decoded whatever its
// status: a failed, cancelled or refused run is an Output with that
// status, and a nil error. A result that no tool of mcpadapter gives — no
// structured content, a field Output does not have, an unknown status, or
// an isError flag that contradicts the status — is an error that says
// what is wrong, returned with what could be decoded.
func (c *Client) Call(ctx context.Context, tool string, args any) (mcpadapter.Output, error) {
	var out mcpadapter.Output
	res, err := c.call(ctx, tool, args, &out)
	if err != nil {
		return out, err
	}
	var problems []string
	switch out.Status {
	case mcpadapter.StatusCompleted, mcpadapter.StatusFailed, mcpadapter.StatusCancelled, mcpadapter.StatusRefused:
		if failed := out.Status != mcpadapter.StatusCompleted; res.IsError != failed {
			problems = append(problems, fmt.Sprintf("isError is %v for status %q", res.IsError, out.Status))
		}
	default:
		problems = append(problems, fmt.Sprintf("status %q is none of completed, failed, cancelled and refused", out.Status))
	}
	if out.Status != mcpadapter.StatusCompleted && out.Error == "" {
		problems = append(problems, fmt.Sprintf("status %q without an error saying why", out.Status))
	}
	return out, c.invalid(tool, res, problems)
}

// CallParallel calls the parallel tool named tool (an invoker's name with
// mcpadapter.ParallelSuffix) with args (an mcpadapter.ParallelInput, or a
// map of its JSON fields) and returns the structured content of the
// result, with the errors of Call; a result is also refused when its
// counts do not add up to its tasks, when a task is out of place, or when
// isError is not set exactly when no task completed.
func (c *Client) CallParallel(ctx context.Context, tool string, args any) (mcpadapter.ParallelOutput, error) {
	var out mcpadapter.ParallelOutput
	res, err := c.call(ctx, tool, args, &out)
	if err != nil {
		return out, err
	}
	var problems []string
	counts := map[mcpadapter.Status]int{}
	for i, r := range out.Results {
		if r.Index != i {
			problems = append(problems, fmt.Sprintf("results[%d] has index %d", i, r.Index))
		}
		counts[r.Status]++
	}
	if c, f, x := counts[mcpadapter.StatusCompleted], counts[mcpadapter.StatusFailed]+counts[mcpadapter.StatusRefused], counts[mcpadapter.StatusCancelled]; c != out.Completed || f != out.Failed || x != out.Cancelled {
		problems = append(problems, fmt.Sprintf("counts completed %d, failed %d, cancelled %d, but the results hold %d, %d and %d", out.Completed, out.Failed, out.Cancelled, c, f, x))
	}
	if res.IsError != (out.Completed == 0) {
		problems = append(problems, fmt.Sprintf("isError is %v with %d tasks completed", res.IsError, out.Completed))
	}
	return out, c.invalid(tool, res, problems)
}

// call calls tool and decodes the result's structured content into out,
// refusing a field out does not have.
func (c *Client) call(ctx context.Context, tool string, args any, out any) (*mcp.CallToolResult, error) {
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			c.abandoned.Store(true)
		}
		return nil, err
	}
	if res.StructuredContent == nil {
		return res, c.invalid(tool, res, []string{"it has no structured content"})
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return res, fmt.Errorf("mcptest: tool %q: structured content: %w", tool, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return res, c.invalid(tool, res, []string{fmt.Sprintf("its structured content %s does not decode into %s: %v", b, strings.TrimPrefix(fmt.Sprintf("%T", out), "*"), err)})
	}
	return res, nil
}

// invalid returns the error of a result of tool with problems, or nil when
// there are none.
func (c *Client) invalid(tool string, res *mcp.CallToolResult, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	var text []string
	for _, ct := range res.Content {
		if t, ok := ct.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	return fmt.Errorf("mcptest: tool %q answered with a result no mcpadapter tool gives: %s (its text: %q)", tool, strings.Join(problems, "; "), strings.Join(text, "\n"))
}
