//go:build e2e

package e2e

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// elicitProtocol is the newest MCP protocol version in which a server may
// send the client a request (elicitation/create) while it serves a call;
// from 2026-07-28 on, which go-sdk's client asks for by default, it may
// not, and mcpadapter falls back to its ApprovalFallback (see
// docs/approvals.md).
const elicitProtocol = "2025-11-25"

// An adapterRig serves a rig's real CLI as MCP tools (mcpadapter, with
// approvals put to the client by elicitation) to a go-sdk client over
// in-memory transports.
type adapterRig struct {
	*rig
	tools      *mcpadapter.Tools
	cs         *mcp.ClientSession
	transcript string
	log        *lockedBuffer // the server's slog records, as text
	// abandoned says that the test cancels a call on the client side: the
	// client forgets it at once, and the server's late answer may find the
	// connection closed (see the teardown).
	abandoned bool
}

// newAdapterRig registers r's invoker on a new server with
// Approvals: elicit (the permission ceiling Unlimited, the workdir
// restricted to r's), and connects a client that declares elicitation,
// answered by elicit, at elicitProtocol. Teardown runs in reverse: the
// client is closed, the server session awaited, and the tools shut down
// last, which fails the test if a call has not ended.
func newAdapterRig(t *testing.T, r *rig, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *adapterRig {
	t.Helper()
	a := &adapterRig{rig: r, transcript: t.TempDir() + "/transcript.jsonl", log: &lockedBuffer{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "e2e-adapter", Version: "v0"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		Approvals:      mcpadapter.ApprovalsElicit,
		MaxPermission:  invoker.Unlimited,
		Roots:          []string{r.workdir},
		TranscriptPath: a.transcript,
		Logger:         slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, r.inv)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	a.tools = tools
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v with %d calls in progress", err, tools.Active())
		}
		if t.Failed() {
			t.Logf("server log:\n%s", a.log)
		}
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatalf("Server.Connect() error = %v", err)
	}
	t.Cleanup(func() {
		err := ss.Wait()
		if a.abandoned && errors.Is(err, io.ErrClosedPipe) {
			// The server answered the cancelled call after the client
			// had closed the connection: expected of an abandoned call.
			err = nil
		}
		if err != nil {
			t.Errorf("ServerSession.Wait() error = %v", err)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-elicit-client", Version: "v0"},
		&mcp.ClientOptions{ElicitationHandler: elicit})
	cs, err := client.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: elicitProtocol})
	if err != nil {
		t.Fatalf("Client.Connect() error = %v", err)
	}
	a.cs = cs
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
	})
	if got := cs.InitializeResult().ProtocolVersion; got != elicitProtocol {
		t.Fatalf("negotiated protocol version %q, want %q", got, elicitProtocol)
	}
	return a
}

// arguments returns the arguments of a call of the CLI's tool that runs
// prompt in the rig's workdir at perm, with the CLI's model.
func (a *adapterRig) arguments(prompt string, perm invoker.Permission) map[string]any {
	args := map[string]any{"prompt": prompt, "workdir": a.workdir, "permission": string(perm)}
	if a.cli.model != "" {
		args["model"] = a.cli.model
	}
	return args
}

// elicitations records the elicitations a client received, and answers
// each with answer.
type elicitations struct {
	answer func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error)

	mu   sync.Mutex
	seen []*mcp.ElicitParams
}

func (e *elicitations) handle(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	e.seen = append(e.seen, req.Params)
	e.mu.Unlock()
	return e.answer(ctx, req)
}

func (e *elicitations) list() []*mcp.ElicitParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), e.seen...)
}

// answerWith returns an answer that accepts the form with content.
func answerWith(content map[string]any) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: content}, nil
	}
}

// elicitPermission is the permission level under which each CLI asks its
// approval callback about a shell command that writes a file in the
// workdir (as measured in twoway_<cli>_test.go): Codex asks at
// workspace-write, whose sandbox lets the command write there; Claude Code
// and Gemini CLI ask at unlimited (Gemini declares its shell tool only
// there, and rejects a command below it without asking).
var elicitPermission = map[string]invoker.Permission{
	"claude": invoker.Unlimited,
	"codex":  invoker.WorkspaceWrite,
	"gemini": invoker.Unlimited,
}

// deniedWords is what the model reads, in its next request, after a denial
// whose message is msg: Claude Code passes the message on; Codex and
// Gemini CLI have no message field, and say it in their own words.
func deniedWords(cli, msg string) string {
	switch cli {
	case "codex":
		return "rejected by user"
	case "gemini":
		return geminiDenial
	}
	return msg
}
