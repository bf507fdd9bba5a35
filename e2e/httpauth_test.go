//go:build e2e

package e2e

// examples/mcpserver on the network, driven by a go-sdk client: with a
// bearer token of -auth-tokens, and with an OAuth access token checked at
// a token introspection endpoint (-oauth-introspect). A client without
// the token, or with another, does not get in, and starts nothing.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// bearerTransport sends a bearer token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestGoClientWithToken(t *testing.T) {
	bins := t.TempDir()
	server := goBuild(t, bins, "mcpserver", "./examples/mcpserver")
	fake := goBuild(t, bins, "fakecodex", "./examples/demo")

	const (
		goToken    = "go-0123456789abcdef0123456789abcdef"
		oauthToken = "opaque-access-token-of-the-authorization-server"
	)
	// The authorization server's introspection endpoint: one active
	// token, issued for the server's URL as its clients know it.
	const resource = "http://mcp.example.com/mcp"
	introspect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.FormValue("token") != oauthToken {
			w.Write([]byte(`{"active":false}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "erin@example.com", "aud": resource,
			"scope": "agents", "exp": time.Now().Add(time.Hour).Unix()})
	}))
	defer introspect.Close()

	for _, tc := range []struct {
		name, token, identity string
		flags                 []string
	}{
		{"bearer", goToken, "go-client", []string{"-auth-tokens", tokenFile(t, "go-client:"+goToken)}},
		{"oauth", oauthToken, "erin@example.com", []string{"-oauth-introspect", introspect.URL,
			"-oauth-issuer", "https://auth.example.com", "-oauth-resource", resource, "-oauth-scope", "agents"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
			s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, Grandchild: true, Answer: "done", Tag: fakeagent.NewTag()}
			srv := exec.Command(server, append([]string{"-cli", "codex", "-codex-bin", fake, "-root", root, "-transcript", transcript,
				"-http", "127.0.0.1:0"}, tc.flags...)...)
			srv.Env = append(os.Environ(), s.Env()...)
			url := startLogged(t, srv)

			connect := func(token string) (*mcp.ClientSession, error) {
				client := mcp.NewClient(&mcp.Implementation{Name: "go-client", Version: "v0.0.1"}, nil)
				return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
					HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
			}
			for _, bad := range []string{"", strings.Repeat("x", 40)} {
				if cs, err := connect(bad); err == nil {
					cs.Close()
					t.Errorf("Connect() with token %q succeeded, want it refused", bad)
				} else if !strings.Contains(err.Error(), "Unauthorized") {
					t.Errorf("Connect() with token %q: %v, want it refused as Unauthorized (401)", bad, err)
				}
			}
			if tc.name == "oauth" {
				// An MCP client finds the authorization server from the
				// 401's challenge and the metadata it names.
				resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				const meta = "/.well-known/oauth-protected-resource/mcp"
				if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, `resource_metadata="http://mcp.example.com`+meta+`"`) {
					t.Errorf("WWW-Authenticate %q, want the resource metadata's URL", got)
				}
				resp, err = http.Get(url + meta)
				if err != nil {
					t.Fatal(err)
				}
				var m struct {
					Resource             string   `json:"resource"`
					AuthorizationServers []string `json:"authorization_servers"`
				}
				json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
				if m.Resource != resource || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != "https://auth.example.com" {
					t.Errorf("protected resource metadata %+v, want the resource and its issuer", m)
				}
			}
			if _, err := os.Stat(transcript); !os.IsNotExist(err) {
				t.Errorf("transcript after refused clients: %v, want none", err)
			}

			cs, err := connect(tc.token)
			if err != nil {
				t.Fatalf("Connect() with the token: %v", err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: map[string]any{"prompt": "hello", "workdir": root}})
			if err != nil || res.IsError {
				t.Fatalf("CallTool() = %+v, %v; want the answer", res, err)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("ClientSession.Close() error = %v", err)
			}
			waitRunsEnded(t, transcript)
			if e := finalEntry(t, transcript, "hello"); e.Status != mcpadapter.StatusCompleted || e.Text != "done" || e.Identity != tc.identity {
				t.Errorf("transcript entry %+v, want the completed run of %s", e, tc.identity)
			}
			srv.Process.Signal(os.Interrupt)
			srv.Wait()
			if !srv.ProcessState.Success() {
				t.Errorf("server exit: %v, want success", srv.ProcessState)
			}
			noSurvivorsBut(t, s.Tag)
		})
	}
}
