package mcpadapter_test

// Who may reach the tools over HTTP (Options.HTTPAccess), served by
// Tools.Handler in this process: every endpoint refuses a request without
// the right credentials before anything starts, the right ones work, and
// the identity follows the call.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// Tokens of the tests: long enough for MinTokenLength.
const (
	aliceToken  = "alice-0123456789abcdef0123456789abcdef"
	bobToken    = "bob-fedcba9876543210fedcba9876543210"
	oldToken    = "old-00000000000000000000000000000000000"
	newToken    = "new-11111111111111111111111111111111111"
	oauthGood   = "oauth-good-2222222222222222222222222222"
	oauthNarrow = "oauth-narrow-33333333333333333333333333"
)

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	base := b.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// withToken returns an HTTP client that sends token.
func withToken(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token}}
}

// accessServer is Tools.Handler over the SDK's streamable handler, with a
// /metrics beside the MCP endpoint, on a loopback httptest server.
type accessServer struct {
	url        string
	tools      *mcpadapter.Tools
	transcript string
}

func newAccessServer(t *testing.T, opts *mcpadapter.Options, stateless bool, invokers ...invoker.Invoker) *accessServer {
	t.Helper()
	s := &accessServer{transcript: filepath.Join(t.TempDir(), "transcript.jsonl")}
	if opts.TranscriptPath == "" {
		opts.TranscriptPath = s.transcript
	}
	s.transcript = opts.TranscriptPath
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, opts, invokers...)
	if err != nil {
		t.Fatalf("Register() error = %v", err)
	}
	s.tools = tools
	mux := http.NewServeMux()
	mux.Handle("/", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "clinvoke_runs 0\n") })
	srv := httptest.NewServer(tools.Handler(mux))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		// A session whose token was rotated out cannot be deleted by its
		// client (its DELETE gets 401): the server ends it, as a session
		// timeout would.
		for ss := range server.Sessions() {
			ss.Close()
		}
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v with %d calls in progress", err, tools.Active())
		}
	})
	s.url = srv.URL
	return s
}

// connect connects a go-sdk client sending token ("" for none), closed at
// cleanup.
func (s *accessServer) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := s.dial(token)
	if err != nil {
		t.Fatalf("connecting with token %.8q: %v", token, err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close() error = %v", err)
		}
	})
	return cs
}

func (s *accessServer) dial(token string) (*mcp.ClientSession, error) {
	hc := http.DefaultClient
	if token != "" {
		hc = withToken(token)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1}, nil)
}

// rawRequest is one HTTP request of the tests.
type rawRequest struct {
	method, path, body string
	header             map[string]string
}

// do sends r to the server and returns the response, its body read.
func (s *accessServer) do(t *testing.T, r rawRequest) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, s.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// endpoints returns a request to each endpoint of a server: in a session
// sid (stateful) or without (stateless).
func endpoints(sid, workdir string) map[string]rawRequest {
	post := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	inSession := func(h map[string]string) map[string]string {
		m := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
		for k, v := range h {
			m[k] = v
		}
		return m
	}
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"prompt":"let me in","workdir":%q}}}`, workdir)
	e := map[string]rawRequest{
		"POST tools/call": {method: "POST", path: "/", body: call, header: post},
		"GET /metrics":    {method: "GET", path: "/metrics"},
	}
	if sid != "" {
		e["POST tools/call"] = rawRequest{method: "POST", path: "/", body: call, header: inSession(post)}
		e["POST initialize"] = rawRequest{method: "POST", path: "/", header: post,
			body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`}
		e["GET event stream"] = rawRequest{method: "GET", path: "/", header: inSession(map[string]string{"Accept": "text/event-stream"})}
		e["DELETE session"] = rawRequest{method: "DELETE", path: "/", header: inSession(nil)}
	}
	return e
}

// rotate replaces the token file at path with text, as an operator should:
// a new file renamed over the old one.
func rotate(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPAccessRefusesWithoutTheRightToken: no token, a wrong one, one
// rotated out of the file, and one in the URL (with the right header or
// without) get 401 with a WWW-Authenticate challenge on every endpoint,
// stateful and stateless, and start nothing; the right token, and the one
// rotated in, are served, with the token's name as the identity.
func TestHTTPAccessRefusesWithoutTheRightToken(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tokens")
			rotate(t, file, "# clients\nalice:"+aliceToken+"\nold:"+oldToken+"\n")
			tokens, err := mcpadapter.LoadTokens(file)
			if err != nil {
				t.Fatal(err)
			}
			inv := answer("echo")
			root := t.TempDir()
			s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}}, stateless, inv)

			// A session opened with the token that is rotated out next.
			var sid string
			if !stateless {
				sid = s.connect(t, oldToken).ID()
			}
			rotate(t, file, "alice:"+aliceToken+"\nnew:"+newToken+"\n")

			creds := map[string]func(map[string]string) (string, map[string]string){
				"no token": func(h map[string]string) (string, map[string]string) { return "", h },
				"wrong token": func(h map[string]string) (string, map[string]string) {
					return "", with(h, "Authorization", "Bearer "+strings.Repeat("x", 40))
				},
				"not bearer": func(h map[string]string) (string, map[string]string) {
					return "", with(h, "Authorization", "Basic "+aliceToken)
				},
				"rotated out": func(h map[string]string) (string, map[string]string) {
					return "", with(h, "Authorization", "Bearer "+oldToken)
				},
				"query only": func(h map[string]string) (string, map[string]string) { return "?access_token=" + aliceToken, h },
				"query and header": func(h map[string]string) (string, map[string]string) {
					return "?access_token=" + aliceToken, with(h, "Authorization", "Bearer "+aliceToken)
				},
				"query named token": func(h map[string]string) (string, map[string]string) {
					return "?token=" + aliceToken, with(h, "Authorization", "Bearer "+aliceToken)
				},
			}
			for ename, e := range endpoints(sid, root) {
				for cname, cred := range creds {
					query, h := cred(e.header)
					r := e
					r.path += query
					r.header = h
					resp, body := s.do(t, r)
					challenge := resp.Header.Get("WWW-Authenticate")
					if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") {
						t.Errorf("%s, %s: %s %q, WWW-Authenticate %q; want 401 with a Bearer challenge", ename, cname, resp.Status, body, challenge)
					}
					if strings.HasPrefix(cname, "query") && !strings.Contains(body, "Authorization header") {
						t.Errorf("%s, %s: body %q, want it to say where a token goes", ename, cname, body)
					}
				}
			}
			if n := inv.calls.Load(); n != 0 {
				t.Errorf("the invoker ran %d times for refused requests, want 0", n)
			}
			if _, err := os.Stat(s.transcript); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("transcript after refused requests: %v, want none written", err)
			}

			// The right token, and the token rotated in, are served.
			for _, tc := range []struct{ token, identity string }{{aliceToken, "alice"}, {newToken, "new"}} {
				cs := s.connect(t, tc.token)
				var out mcpadapter.Output
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args("hello "+tc.identity, root)})
				if err != nil || res.IsError {
					t.Fatalf("token of %s: CallTool() = %+v, %v; want the answer", tc.identity, res, err)
				}
				decode(t, res, &out)
				if out.Text != "echo: hello "+tc.identity {
					t.Errorf("token of %s: answer %q", tc.identity, out.Text)
				}
				e := transcriptLines(t, s.transcript)
				if last := e[len(e)-1]; last.Identity != tc.identity || last.Prompt != "hello "+tc.identity {
					t.Errorf("transcript entry %+v, want identity %q", last, tc.identity)
				}
			}
			resp, body := s.do(t, rawRequest{method: "GET", path: "/metrics", header: map[string]string{"Authorization": "Bearer " + aliceToken}})
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, "clinvoke_runs") {
				t.Errorf("GET /metrics with the token: %s %q, want the metrics", resp.Status, body)
			}
		})
	}
}

// transcriptLines returns the entries of the transcript at path.
func transcriptLines(t *testing.T, path string) []mcpadapter.TranscriptEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entries []mcpadapter.TranscriptEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e mcpadapter.TranscriptEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		entries = append(entries, e)
	}
	return entries
}

func with(h map[string]string, k, v string) map[string]string {
	m := map[string]string{k: v}
	for hk, hv := range h {
		m[hk] = hv
	}
	return m
}

// TestHTTPAccessOAuth: the resource server of the MCP authorization
// specification. A 401 names the protected resource metadata, which is
// served to anyone; a token the verifier accepts is served with its
// subject as the identity, one without the required scope gets 403.
func TestHTTPAccessOAuth(t *testing.T) {
	verifier := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		switch token {
		case oauthGood:
			return &auth.TokenInfo{UserID: "carol@example.com", Scopes: []string{"agents"}, Expiration: time.Now().Add(time.Hour)}, nil
		case oauthNarrow:
			return &auth.TokenInfo{UserID: "dave@example.com", Scopes: []string{"read"}, Expiration: time.Now().Add(time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	inv := answer("echo")
	root := t.TempDir()
	const resource = "https://mcp.example.com/mcp"
	s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{
		Tokens:   tokens,
		Verifier: verifier,
		ResourceMetadata: &oauthex.ProtectedResourceMetadata{
			Resource:             resource,
			AuthorizationServers: []string{"https://auth.example.com"},
			ScopesSupported:      []string{"agents"},
		},
		Scopes: []string{"agents"},
	}}, false, inv)

	for ename, e := range endpoints("", root) {
		resp, body := s.do(t, e)
		want := `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
			t.Errorf("%s without a token: %s %q, WWW-Authenticate %q; want 401 naming %s", ename, resp.Status, body, resp.Header.Get("WWW-Authenticate"), want)
		}
	}
	resp, body := s.do(t, rawRequest{method: "GET", path: "/.well-known/oauth-protected-resource/mcp", header: map[string]string{"Origin": "https://elsewhere.example.com"}})
	var meta oauthex.ProtectedResourceMetadata
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &meta) != nil || meta.Resource != resource || len(meta.AuthorizationServers) != 1 {
		t.Errorf("GET the metadata: %s %q, want the metadata of %s", resp.Status, body, resource)
	}
	resp, body = s.do(t, rawRequest{method: "POST", path: "/", header: map[string]string{"Authorization": "Bearer " + oauthNarrow, "Content-Type": "application/json"}, body: "{}"})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "scope") {
		t.Errorf("a token without the scope: %s %q, want 403 insufficient scope", resp.Status, body)
	}
	if n := inv.calls.Load(); n != 0 {
		t.Errorf("the invoker ran %d times for refused requests, want 0", n)
	}

	for _, tc := range []struct{ token, identity string }{{oauthGood, "carol@example.com"}, {aliceToken, "alice"}} {
		cs := s.connect(t, tc.token)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args("hi", root)})
		if err != nil || res.IsError {
			t.Fatalf("%s: CallTool() = %+v, %v; want the answer", tc.identity, res, err)
		}
		e := transcriptLines(t, s.transcript)
		if last := e[len(e)-1]; last.Identity != tc.identity {
			t.Errorf("transcript identity %q, want %q", last.Identity, tc.identity)
		}
	}
}

// TestHTTPAccessOrigin: a browser page of a foreign origin is refused even
// with the right token; loopback origins and the allowed ones pass, with
// the CORS headers a page needs.
func TestHTTPAccessOrigin(t *testing.T) {
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	inv := answer("echo")
	s := newAccessServer(t, &mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens, AllowedOrigins: []string{"https://app.example.com"}}}, true, inv)
	call := endpoints("", t.TempDir())["POST tools/call"]
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"http://127.0.0.1:3000", http.StatusOK},
		{"https://[::1]", http.StatusOK},
		{"https://app.example.com", http.StatusOK},
		{"https://app.example.com:443", http.StatusOK},
		{"https://evil.example.com", http.StatusForbidden},
		{"http://app.example.com", http.StatusForbidden},
		{"http://localhost.evil.example.com", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		r := call
		r.header = with(with(call.header, "Authorization", "Bearer "+aliceToken), "Origin", tc.origin)
		if tc.origin == "" {
			delete(r.header, "Origin")
		}
		resp, body := s.do(t, r)
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %q: %s %.200q, want %d", tc.origin, resp.Status, body, tc.want)
		}
		if tc.want == http.StatusOK && tc.origin != "" && resp.Header.Get("Access-Control-Allow-Origin") != tc.origin {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q, want the origin", tc.origin, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if n := inv.calls.Load(); n != 6 {
		t.Errorf("the invoker ran %d times, want 6: once per allowed origin", n)
	}
	resp, _ := s.do(t, rawRequest{method: "OPTIONS", path: "/", header: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}})
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %s %v, want 204 allowing Authorization", resp.Status, resp.Header)
	}
	resp, _ = s.do(t, rawRequest{method: "OPTIONS", path: "/", header: map[string]string{"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("preflight of a foreign origin: %s, want 403", resp.Status)
	}
}

// TestHTTPAccessNetworkNeedsAuth: without authentication, a request that
// arrives on an address other than loopback is refused, unless
// InsecureNoAuth says anyone may come in.
func TestHTTPAccessNetworkNeedsAuth(t *testing.T) {
	for _, tc := range []struct {
		name     string
		access   mcpadapter.HTTPAccess
		local    net.Addr
		wantCode int
	}{
		{"no auth, loopback", mcpadapter.HTTPAccess{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8700}, http.StatusOK},
		{"no auth, ::1", mcpadapter.HTTPAccess{}, &net.TCPAddr{IP: net.IPv6loopback, Port: 8700}, http.StatusOK},
		{"no auth, unix socket", mcpadapter.HTTPAccess{}, &net.UnixAddr{Name: "/run/mcp.sock", Net: "unix"}, http.StatusOK},
		{"no auth, network", mcpadapter.HTTPAccess{}, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 8700}, http.StatusForbidden},
		{"no auth, no address", mcpadapter.HTTPAccess{}, nil, http.StatusForbidden},
		{"insecure, network", mcpadapter.HTTPAccess{InsecureNoAuth: true}, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 8700}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0.0.1"}, nil)
			tools, err := mcpadapter.Register(server, &mcpadapter.Options{HTTPAccess: tc.access}, answer("echo"))
			if err != nil {
				t.Fatal(err)
			}
			h := tools.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") }))
			req := httptest.NewRequest("GET", "/metrics", nil)
			if tc.local != nil {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tc.local))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Errorf("status %d %q, want %d", rec.Code, rec.Body.String(), tc.wantCode)
			}
			if tc.wantCode == http.StatusForbidden && !strings.Contains(rec.Body.String(), "no authentication configured") {
				t.Errorf("body %q, want it to say why", rec.Body.String())
			}
		})
	}
}

// TestHTTPAccessOptionsChecked: Register refuses an HTTPAccess it cannot
// serve, naming the field.
func TestHTTPAccessOptionsChecked(t *testing.T) {
	verifier := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return nil, auth.ErrInvalidToken
	}
	for _, tc := range []struct {
		name string
		opts mcpadapter.Options
		want string
	}{
		{"verifier without metadata", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Verifier: verifier}}, "Verifier needs ResourceMetadata"},
		{"relative resource", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Verifier: verifier,
			ResourceMetadata: &oauthex.ProtectedResourceMetadata{Resource: "/mcp", AuthorizationServers: []string{"https://a"}}}}, "ResourceMetadata.Resource"},
		{"no issuer", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{Verifier: verifier,
			ResourceMetadata: &oauthex.ProtectedResourceMetadata{Resource: "https://m/mcp"}}}, "AuthorizationServers"},
		{"metadata without verifier", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{
			ResourceMetadata: &oauthex.ProtectedResourceMetadata{Resource: "https://m/mcp"}}}, "without Verifier"},
		{"bad origin", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{AllowedOrigins: []string{"app.example.com"}}}, "AllowedOrigins"},
		{"origin with a path", mcpadapter.Options{HTTPAccess: mcpadapter.HTTPAccess{AllowedOrigins: []string{"https://app.example.com/x"}}}, "want an origin"},
		{"negative per identity", mcpadapter.Options{MaxConcurrentPerIdentity: -1}, "MaxConcurrentPerIdentity"},
	} {
		_, err := mcpadapter.Register(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0.0.1"}, nil), &tc.opts, answer("echo"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register() error = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
