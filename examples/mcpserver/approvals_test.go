package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCheckApprovals(t *testing.T) {
	for _, tc := range []struct {
		policy, fallback string
		err              string // a substring of the error, "" for none
	}{
		{"allow", "deny", ""},
		{"deny", "deny", ""},
		{"elicit", "allow", ""},
		{"ask", "deny", `-approvals "ask": want allow, deny or elicit`},
		{"elicit", "elicit", `-approval-fallback "elicit": want allow or deny`},
		{"elicit", "", `-approval-fallback "": want allow or deny`},
	} {
		err := checkApprovals(tc.policy, tc.fallback)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkApprovals(%q, %q) = %v, want %q", tc.policy, tc.fallback, err, tc.err)
		}
	}
}

// TestLogClient: the server logs whether each client declares elicitation.
func TestLogClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps *mcp.ClientCapabilities
		want string
	}{
		{"none", &mcp.ClientCapabilities{}, "elicitation=none"},
		{"form", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}, "elicitation=form"},
		{"url", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}, "elicitation=url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logged := make(chan struct{})
			h := logClient(slog.New(slog.NewTextHandler(&buf, nil)))
			server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "v0"}, &mcp.ServerOptions{
				InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) { h(ctx, req); close(logged) },
			})
			ct, st := mcp.NewInMemoryTransports()
			ss, err := server.Connect(context.Background(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "v9"}, &mcp.ClientOptions{Capabilities: tc.caps}).
				Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
			if err != nil {
				t.Fatal(err)
			}
			<-logged
			_ = cs.Close()
			_ = ss.Wait()
			for _, s := range []string{`msg="client initialized"`, "client=probe", "client_version=v9", "protocol=2025-06-18", tc.want} {
				if !strings.Contains(buf.String(), s) {
					t.Errorf("log %q does not hold %q", buf.String(), s)
				}
			}
		})
	}
}
