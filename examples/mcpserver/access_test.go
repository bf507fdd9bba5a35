package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

const testToken = "0123456789abcdef0123456789abcdef"

// TestAccessFlags: the access flags are checked against each other and
// against the addresses the server listens on; a bind beyond loopback
// without authentication fails, naming the flags that fix it.
func TestAccessFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("alice:"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(broken, []byte("alice:"+testToken+"\nbob:short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_TOKEN", testToken)
	t.Setenv("ROTATING_TOKENS", "alice:"+testToken+"\nalice:"+strings.Repeat("n", 32))
	t.Setenv("MCP_TOKENS", "ci:"+testToken+"\nbob:"+strings.Repeat("b", 32))
	t.Setenv("EMPTY_TOKEN", "")
	t.Setenv("SHORT_TOKEN", "abc")
	for _, tc := range []struct {
		name      string
		flags     accessFlags
		listeners []string
		err       []string // substrings of the error; none for success
		names     string   // the token names, comma-separated
	}{
		{"loopback without auth", accessFlags{}, []string{"127.0.0.1:8700"}, nil, ""},
		{"localhost without auth", accessFlags{}, []string{"localhost:8700"}, nil, ""},
		{"::1 without auth", accessFlags{}, []string{"[::1]:8700"}, nil, ""},
		{"every interface without auth", accessFlags{}, []string{"0.0.0.0:8700"}, []string{"0.0.0.0:8700 listens beyond this machine", "-auth-tokens FILE", "-insecure-no-auth"}, ""},
		{"empty host without auth", accessFlags{}, []string{":8700"}, []string{"listens beyond this machine", "-insecure-no-auth"}, ""},
		{"[::] without auth", accessFlags{}, []string{"[::]:8700"}, []string{"listens beyond this machine"}, ""},
		{"LAN address without auth", accessFlags{}, []string{"192.0.2.10:8700"}, []string{"listens beyond this machine"}, ""},
		{"metrics beyond loopback", accessFlags{}, []string{"127.0.0.1:8700", "0.0.0.0:9464"}, []string{"0.0.0.0:9464 listens beyond this machine"}, ""},
		{"every interface, insecure", accessFlags{insecureNoAuth: true}, []string{"0.0.0.0:8700"}, nil, ""},
		{"every interface, tokens", accessFlags{tokensFile: file}, []string{"0.0.0.0:8700"}, nil, "alice"},
		{"env token", accessFlags{tokenEnv: "MCP_TOKEN"}, []string{"0.0.0.0:8700"}, nil, "MCP_TOKEN"},
		{"env token lines", accessFlags{tokenEnv: "MCP_TOKENS"}, []string{"0.0.0.0:8700"}, nil, "bob,ci"},
		{"env unset", accessFlags{tokenEnv: "NO_SUCH_TOKEN_VAR"}, []string{"0.0.0.0:8700"}, []string{"-auth-token-env NO_SUCH_TOKEN_VAR", "not set"}, ""},
		{"env empty", accessFlags{tokenEnv: "EMPTY_TOKEN"}, []string{"0.0.0.0:8700"}, []string{"not set"}, ""},
		{"env short", accessFlags{tokenEnv: "SHORT_TOKEN"}, []string{"0.0.0.0:8700"}, []string{"-auth-token-env SHORT_TOKEN", "too short"}, ""},
		{"two tokens of one name", accessFlags{tokenEnv: "ROTATING_TOKENS"}, []string{"0.0.0.0:8700"}, nil, "alice"},
		{"broken file at start", accessFlags{tokensFile: broken}, []string{"127.0.0.1:8700"}, []string{"-auth-tokens", "broken:2", "too short"}, ""},
		{"missing file", accessFlags{tokensFile: file + ".missing"}, []string{"127.0.0.1:8700"}, []string{"-auth-tokens", "no such file"}, ""},
		{"file and env", accessFlags{tokensFile: file, tokenEnv: "MCP_TOKEN"}, []string{"127.0.0.1:8700"}, []string{"give one"}, ""},
		{"insecure with tokens", accessFlags{tokensFile: file, insecureNoAuth: true}, []string{"0.0.0.0:8700"}, []string{"drop -insecure-no-auth"}, ""},
		{"tokens over stdio", accessFlags{tokensFile: file}, nil, []string{"-auth-tokens applies to HTTP"}, ""},
		{"insecure over stdio", accessFlags{insecureNoAuth: true}, nil, []string{"-insecure-no-auth applies to HTTP"}, ""},
		{"negative per identity", accessFlags{maxPerIdentity: -1}, []string{"127.0.0.1:8700"}, []string{"-max-per-identity -1"}, ""},
		{"oauth without resource", accessFlags{introspect: "https://auth.example.com/introspect", issuer: "https://auth.example.com"},
			[]string{"0.0.0.0:8700"}, []string{"needs -oauth-resource"}, ""},
		{"oauth", accessFlags{introspect: "https://auth.example.com/introspect", issuer: "https://auth.example.com", resource: "https://mcp.example.com/mcp"},
			[]string{"0.0.0.0:8700"}, nil, ""},
		{"oauth scope without oauth", accessFlags{scopes: []string{"agents"}}, []string{"127.0.0.1:8700"}, []string{"-oauth-scope applies to OAuth"}, ""},
		{"secret without id", accessFlags{introspect: "https://a/i", issuer: "https://a", resource: "https://m", clientSecret: "MCP_TOKEN"},
			[]string{"127.0.0.1:8700"}, []string{"needs -oauth-client-id"}, ""},
	} {
		a, err := tc.flags.httpAccess(context.Background(), tc.listeners, slog.New(slog.DiscardHandler))
		switch {
		case len(tc.err) == 0 && err != nil:
			t.Errorf("%s: httpAccess() error = %v", tc.name, err)
		case len(tc.err) > 0:
			for _, want := range tc.err {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: httpAccess() error = %v, want one saying %q", tc.name, err, want)
				}
			}
		case tc.names != "":
			if a.Tokens == nil || strings.Join(a.Tokens.Names(), ",") != tc.names {
				t.Errorf("%s: tokens %v, want %s", tc.name, a.Tokens, tc.names)
			}
		}
	}
}

// TestIntrospection: a token is good when the introspection endpoint says
// it is active and issued for this server; its subject is the identity.
// An endpoint that fails is a server error, not a pass.
func TestIntrospection(t *testing.T) {
	const resource = "https://mcp.example.com/mcp"
	responses := map[string]string{
		"good":         `{"active":true,"sub":"carol","aud":"` + resource + `","scope":"agents read","exp":4102444800,"client_id":"ide"}`,
		"good, aud[]":  `{"active":true,"sub":"carol","aud":["other","` + resource + `"],"exp":4102444800}`,
		"client only":  `{"active":true,"client_id":"ci-bot","aud":"` + resource + `","exp":4102444800}`,
		"inactive":     `{"active":false}`,
		"other aud":    `{"active":true,"sub":"carol","aud":"https://other.example.com","exp":4102444800}`,
		"no aud":       `{"active":true,"sub":"carol","exp":4102444800}`,
		"nobody":       `{"active":true,"aud":"` + resource + `","exp":4102444800}`,
		"server error": ``,
	}
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != "mcpserver" || secret != "s3cret" || r.FormValue("token_type_hint") != "access_token" {
			http.Error(w, "unauthorized client", http.StatusUnauthorized)
			return
		}
		body := responses[r.FormValue("token")]
		if body == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	defer endpoint.Close()
	t.Setenv("INTROSPECT_SECRET", "s3cret")
	flags := accessFlags{introspect: endpoint.URL, issuer: "https://auth.example.com", resource: resource,
		clientID: "mcpserver", clientSecret: "INTROSPECT_SECRET"}
	v, err := flags.introspector()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, user string
		invalid     bool // an error matching auth.ErrInvalidToken, else a server error
	}{
		{"good", "carol", false},
		{"good, aud[]", "carol", false},
		{"client only", "client:ci-bot", false},
		{"inactive", "", true},
		{"other aud", "", true},
		{"no aud", "", true},
		{"nobody", "", true},
		{"server error", "", false},
	} {
		info, err := v.verify(context.Background(), tc.token, nil)
		switch {
		case tc.user != "":
			if err != nil || info.UserID != tc.user || info.Expiration.IsZero() {
				t.Errorf("%s: verify() = %+v, %v; want user %s with an expiration", tc.token, info, err, tc.user)
			}
		case tc.invalid && !errors.Is(err, auth.ErrInvalidToken):
			t.Errorf("%s: verify() = %+v, %v; want ErrInvalidToken", tc.token, info, err)
		case !tc.invalid && (err == nil || errors.Is(err, auth.ErrInvalidToken)):
			t.Errorf("%s: verify() = %+v, %v; want a server error", tc.token, info, err)
		}
	}
	info, _ := v.verify(context.Background(), "good", nil)
	if b, _ := json.Marshal(info.Scopes); string(b) != `["agents","read"]` {
		t.Errorf("scopes %s, want agents and read", b)
	}
	v.clientSecret = "wrong"
	if _, err := v.verify(context.Background(), "good", nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with a wrong client secret: %v, want the endpoint's 401 as a server error", err)
	}
}
