package mcpadapter_test

// The identity of a call (Options.HTTPAccess): its runs' limit per
// identity, Tools.Calls and Tools.Cancel, a token removed from the set,
// a DELETE of another identity's session, and the call's span.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// asyncCall calls tool with args on cs in a goroutine; the outcome
// arrives on the returned channel.
func asyncCall(cs *mcp.ClientSession, params *mcp.CallToolParams) chan outcome {
	c := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), params)
		c <- outcome{res, err}
	}()
	return c
}

// recv receives from c, or fails the test once the wait is over
// testenv.Hang: what it waits for did not happen.
func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testenv.Timeout(testenv.Hang)):
		t.Fatalf("still waiting for %s", what)
	}
	panic("unreachable")
}

// outcome is what a call returned.
type outcome struct {
	res *mcp.CallToolResult
	err error
}

// progressClient connects a go-sdk client with token whose progress
// notifications go to the returned channel.
func (s *accessServer) progressClient(t *testing.T, token string) (*mcp.ClientSession, chan *mcp.ProgressNotificationParams) {
	t.Helper()
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: withToken(token), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
	})
	return cs, progress
}

// TestMaxConcurrentPerIdentity: an identity at its limit waits, reporting
// that it is queued, without holding a slot of MaxConcurrent: another
// identity's call runs meanwhile. Tools.Calls lists the calls with their
// identity, and Tools.Cancel stops those of one identity only.
func TestMaxConcurrentPerIdentity(t *testing.T) {
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken + "\nbob:" + bobToken)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker("echo")
	root := t.TempDir()
	s := newAccessServer(t, &mcpadapter.Options{MaxConcurrent: 2, MaxConcurrentPerIdentity: 1,
		HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, false, b)
	alice, aliceProgress := s.progressClient(t, aliceToken)
	bob := s.connect(t, bobToken)

	first := asyncCall(alice, &mcp.CallToolParams{Name: "echo", Arguments: args("alice 1", root)})
	if req := recv(t, b.started, "a run to start"); req.Prompt != "alice 1" {
		t.Fatalf("started %q, want alice's first call", req.Prompt)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: args("alice 2", root)}
	params.SetProgressToken("alice 2")
	second := asyncCall(alice, params)
	for {
		p := recv(t, aliceProgress, "alice's second call to report it is queued")
		if p.ProgressToken == "alice 2" && strings.Contains(p.Message, "queued") {
			if want := "queued, 0 ahead for one of the 1 run of alice at once"; p.Message != want {
				t.Errorf("progress %q, want %q", p.Message, want)
			}
			break
		}
	}
	// Alice's second call waits; MaxConcurrent has a slot left, and Bob
	// gets it.
	third := asyncCall(bob, &mcp.CallToolParams{Name: "echo", Arguments: args("bob 1", root)})
	if req := recv(t, b.started, "a run to start"); req.Prompt != "bob 1" {
		t.Fatalf("started %q, want bob's call: alice's second must wait for alice's first", req.Prompt)
	}

	calls := s.tools.Calls()
	byIdentity := map[string]int{}
	for _, c := range calls {
		byIdentity[c.Identity]++
		if c.Tool != "echo" || c.Session == "" || c.Start.IsZero() {
			t.Errorf("Calls() has %+v, want the tool, a session and a start", c)
		}
	}
	if len(calls) != 3 || byIdentity["alice"] != 2 || byIdentity["bob"] != 1 {
		t.Errorf("Calls() = %+v, want 2 of alice and 1 of bob", calls)
	}

	if n := s.tools.Cancel("alice"); n != 2 {
		t.Errorf("Cancel(alice) = %d, want 2", n)
	}
	for name, c := range map[string]chan outcome{"alice 1": first, "alice 2": second} {
		r := recv(t, c, name)
		var out mcpadapter.Output
		if r.err == nil {
			decode(t, r.res, &out)
		}
		if r.err != nil || !r.res.IsError || out.Status != mcpadapter.StatusCancelled || !strings.Contains(out.Error, "withdrew") {
			t.Errorf("%s: %v %+v, want cancelled because the server withdrew the access", name, r.err, out)
		}
	}
	if cause := recv(t, b.cancelled, "a run to be cancelled"); !errors.Is(cause, mcpadapter.ErrRevoked) {
		t.Errorf("alice's run cancelled with %v, want ErrRevoked", cause)
	}
	if b.calls.Load() != 2 {
		t.Errorf("%d runs started, want 2: alice's second never started", b.calls.Load())
	}
	// Bob's run goes on.
	if len(b.cancelled) != 0 {
		t.Errorf("bob's run was cancelled too")
	}
	if n := s.tools.Cancel("bob"); n != 1 {
		t.Errorf("Cancel(bob) = %d, want 1", n)
	}
	recv(t, third, "the call's answer")
	recv(t, b.cancelled, "a run to be cancelled")
	for _, e := range transcriptLines(t, s.transcript) {
		if e.Status == mcpadapter.StatusRunning {
			continue
		}
		if want := strings.Fields(e.Prompt)[0]; e.Identity != want {
			t.Errorf("transcript: the run of %q has identity %q, want %q", e.Prompt, e.Identity, want)
		}
	}
}

// TestTokenRemovedCancelsItsCalls: a token removed from the file stops
// the calls made with it at the next request to the server; the other
// tokens' calls go on.
func TestTokenRemovedCancelsItsCalls(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	rotate(t, file, "alice:"+aliceToken+"\nbob:"+bobToken+"\n")
	tokens, err := mcpadapter.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker("echo")
	root := t.TempDir()
	s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, false, b)
	alice := s.connect(t, aliceToken)
	bob := s.connect(t, bobToken)
	bobs := asyncCall(bob, &mcp.CallToolParams{Name: "echo", Arguments: args("bob's long run", root)})
	recv(t, b.started, "a run to start")
	alices := asyncCall(alice, &mcp.CallToolParams{Name: "echo", Arguments: args("alice's long run", root)})
	recv(t, b.started, "a run to start")

	rotate(t, file, "alice:"+aliceToken+"\n")
	// The next request, whoever makes it, notices the file changed.
	if _, err := alice.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, b.cancelled, "a run to be cancelled"); !errors.Is(cause, mcpadapter.ErrRevoked) {
		t.Errorf("bob's run cancelled with %v, want ErrRevoked", cause)
	}
	r := recv(t, bobs, "bob's answer")
	var out mcpadapter.Output
	if r.err == nil {
		decode(t, r.res, &out)
	}
	if r.err != nil || out.Status != mcpadapter.StatusCancelled || out.SessionID != "sess-blocked" || out.Text != "partial" {
		t.Errorf("bob's call: %v %+v, want cancelled with its partial text and session", r.err, out)
	}
	if len(b.cancelled) != 0 || s.tools.Active() != 1 {
		t.Errorf("alice's call was cancelled too (%d calls active)", s.tools.Active())
	}
	s.tools.Cancel("alice")
	recv(t, alices, "the call's answer")
	recv(t, b.cancelled, "a run to be cancelled")
}

// rotation is a server whose tokens follow a file that holds alice's old
// token, with a call of that token in flight: where the rotation tests
// start.
type rotation struct {
	file   string
	tokens *mcpadapter.Tokens
	b      *blocker
	s      *accessServer
	root   string
	old    chan outcome // the old token's call
}

func startRotation(t *testing.T) *rotation {
	t.Helper()
	r := &rotation{file: filepath.Join(t.TempDir(), "tokens"), b: newBlocker("echo"), root: t.TempDir()}
	rotate(t, r.file, "alice:"+oldToken+"\n")
	var err error
	if r.tokens, err = mcpadapter.LoadTokens(r.file); err != nil {
		t.Fatal(err)
	}
	r.s = newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: r.tokens}}, false, r.b)
	r.old = r.call(t, r.s.connect(t, oldToken), "the old token's run")
	return r
}

// call starts a call on cs and waits for its run to start.
func (r *rotation) call(t *testing.T, cs *mcp.ClientSession, prompt string) chan outcome {
	t.Helper()
	c := asyncCall(cs, &mcp.CallToolParams{Name: "echo", Arguments: args(prompt, r.root)})
	recv(t, r.b.started, "a run to start")
	return c
}

// oldRevoked checks that the old token's call was cancelled, with
// ErrRevoked as its run's cause.
func (r *rotation) oldRevoked(t *testing.T) {
	t.Helper()
	if cause := recv(t, r.b.cancelled, "the old token's run to be cancelled"); !errors.Is(cause, mcpadapter.ErrRevoked) {
		t.Errorf("the old token's run cancelled with %v, want ErrRevoked", cause)
	}
	o := recv(t, r.old, "the old token's answer")
	var out mcpadapter.Output
	if o.err == nil {
		decode(t, o.res, &out)
	}
	if o.err != nil || out.Status != mcpadapter.StatusCancelled {
		t.Errorf("the old token's call: %v %+v, want cancelled", o.err, out)
	}
}

// newGoesOn checks, after a request of cs, that the new token's call c is
// the one call left, then ends it.
func (r *rotation) newGoesOn(t *testing.T, cs *mcp.ClientSession, c chan outcome) {
	t.Helper()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(r.b.cancelled) != 0 || r.s.tools.Active() != 1 {
		t.Errorf("the new token's call was cancelled too (%d calls active)", r.s.tools.Active())
	}
	r.s.tools.Cancel("alice")
	recv(t, c, "the call's answer")
	recv(t, r.b.cancelled, "a run to be cancelled")
}

// TestTokenReplacedCancelsItsCalls: a token replaced under the same name
// stops the calls the old token authorized, though the name stays in the
// set; a call of the new token goes on.
func TestTokenReplacedCancelsItsCalls(t *testing.T) {
	r := startRotation(t)
	rotate(t, r.file, "alice:"+aliceToken+"\n")
	alice := r.s.connect(t, aliceToken) // its requests notice the change
	r.oldRevoked(t)
	r.newGoesOn(t, alice, r.call(t, alice, "the new token's run"))
}

// TestTokenRotationOverlaps: a name may have two tokens at once, both
// accepted; removing the old one stops only the calls it authorized.
func TestTokenRotationOverlaps(t *testing.T) {
	r := startRotation(t)
	// The overlap: both tokens of alice are accepted.
	rotate(t, r.file, "alice:"+oldToken+"\nalice:"+newToken+"\n")
	if err := r.tokens.Err(); err != nil {
		t.Fatalf("Err() = %v, want the file with two tokens of alice taken", err)
	}
	if got := strings.Join(r.tokens.Names(), ","); got != "alice" {
		t.Errorf("Names() = %s, want alice once", got)
	}
	alice := r.s.connect(t, newToken)
	news := r.call(t, alice, "the new token's run")
	if len(r.b.cancelled) != 0 || r.s.tools.Active() != 2 {
		t.Fatalf("a call was cancelled by adding a token (%d calls active)", r.s.tools.Active())
	}
	// The end of the overlap: the old token goes, and its call with it.
	rotate(t, r.file, "alice:"+newToken+"\n")
	if _, err := alice.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r.oldRevoked(t)
	r.newGoesOn(t, alice, news)
}

// TestDeleteOfAnotherIdentitysSession: a DELETE naming a session of
// another identity is refused by the SDK (403) and cancels none of its
// calls; the owner's DELETE does.
func TestDeleteOfAnotherIdentitysSession(t *testing.T) {
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken + "\nbob:" + bobToken)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker("echo")
	root := t.TempDir()
	s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, false, b)
	alice, err := s.dial(aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	done := asyncCall(alice, &mcp.CallToolParams{Name: "echo", Arguments: args("alice's run", root)})
	recv(t, b.started, "a run to start")

	resp, body := s.do(t, rawRequest{method: "DELETE", path: "/", header: map[string]string{
		"Authorization": "Bearer " + bobToken, "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-06-18"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's DELETE of alice's session: %s %q, want 403", resp.Status, body)
	}
	if len(b.cancelled) != 0 || s.tools.Active() != 1 {
		t.Fatalf("bob's DELETE cancelled alice's call")
	}
	// Alice's own DELETE (her client's Close) cancels it.
	resp, body = s.do(t, rawRequest{method: "DELETE", path: "/", header: map[string]string{
		"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-06-18"}})
	if resp.StatusCode >= 300 {
		t.Errorf("alice's DELETE: %s %q", resp.Status, body)
	}
	if cause := recv(t, b.cancelled, "a run to be cancelled"); !errors.Is(cause, mcpadapter.ErrClientGone) {
		t.Errorf("alice's run cancelled with %v, want ErrClientGone", cause)
	}
	recv(t, done, "the call's answer")
	// The session is gone already: its client's DELETE finds nothing.
	if err := alice.Close(); err != nil && !strings.Contains(err.Error(), "404") {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
}

// TestIdentityOnTheSpan: the call's span carries its identity as
// enduser.id; a call without identity has none.
func TestIdentityOnTheSpan(t *testing.T) {
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	root := t.TempDir()
	s := newAccessServer(t, &mcpadapter.Options{TracerProvider: tp, HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, true, answer("echo"))
	cs := s.connect(t, aliceToken)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args("hi", root)}); err != nil || res.IsError {
		t.Fatalf("CallTool() = %+v, %v", res, err)
	}
	var found bool
	for _, sp := range spans.Ended() {
		if sp.Name() != "tools/call echo" {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == attribute.Key("enduser.id") && kv.Value.AsString() == "alice" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no tools/call span with enduser.id alice among %d spans", len(spans.Ended()))
	}
}

// TestTokensFile: the format's errors name the line and the fix; a file
// replaced with a broken one leaves the set as it was, and Err says why
// until a good one replaces it.
func TestTokensFile(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"", "has no token"},
		{"# only a comment\n", "has no token"},
		{aliceToken, "line 1: want NAME:TOKEN"},
		{"alice:short", "too short"},
		{"al ice:" + aliceToken, `character ' ' is not allowed`},
		{"alice:" + aliceToken + "!", "letters, digits"},
		{"alice:" + aliceToken + "\nbob:" + aliceToken, "line 2: token \"bob\" is the token of line 1"},
	} {
		if _, err := mcpadapter.ParseTokens(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTokens(%q) error = %v, want one saying %q", tc.text, err, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if _, err := mcpadapter.LoadTokens(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadTokens(missing) error = %v, want ErrNotExist", err)
	}
	rotate(t, file, "alice:"+aliceToken+"\nbob:"+bobToken+"\n")
	tokens, err := mcpadapter.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tokens.Names(), ","); got != "alice,bob" {
		t.Errorf("Names() = %s", got)
	}
	for _, tc := range []struct{ token, name string }{{aliceToken, "alice"}, {bobToken, "bob"}, {oldToken, ""}, {aliceToken[:len(aliceToken)-1], ""}, {"", ""}} {
		info, err := tokens.Verify(context.Background(), tc.token, nil)
		switch {
		case tc.name == "" && err == nil:
			t.Errorf("Verify(%.8q) = %+v, want an error", tc.token, info)
		case tc.name != "" && (err != nil || info.UserID != tc.name || info.Expiration.IsZero()):
			t.Errorf("Verify(%.8q) = %+v, %v; want %s with an expiration", tc.token, info, err, tc.name)
		}
	}
	if err := tokens.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
	rotate(t, file, "alice:"+aliceToken+"\nbob:short\n")
	if got := strings.Join(tokens.Names(), ","); got != "alice,bob" {
		t.Errorf("after a broken file: Names() = %s, want the set as it was", got)
	}
	if err := tokens.Err(); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("after a broken file: Err() = %v, want why it was not taken", err)
	}
	if err := tokens.Reload(); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("Reload() of a broken file: %v, want the error", err)
	}
	rotate(t, file, "bob:"+bobToken+"\n")
	if _, err := tokens.Verify(context.Background(), aliceToken, nil); err == nil {
		t.Errorf("alice's token is still accepted after its removal")
	}
	if err := tokens.Err(); err != nil {
		t.Errorf("after a good file: Err() = %v, want nil", err)
	}
}
