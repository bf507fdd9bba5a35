package mcphost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawServer returns a server with one raw tool per name, each with schema.
func rawServer(schema any, names ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	for _, name := range names {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	return s
}

func TestValidate(t *testing.T) {
	object := map[string]any{"type": "object"}
	tests := []struct {
		name     string
		servers  map[string]*mcp.Server
		want     error  // nil for a valid configuration
		contains string // in the message
	}{
		{name: "valid", servers: map[string]*mcp.Server{"a_b-1": rawServer(object, "x", "y.z")}},
		{name: "empty name", servers: map[string]*mcp.Server{"": rawServer(object, "x")}, want: ErrBadName},
		{name: "space in name", servers: map[string]*mcp.Server{"my server": rawServer(object, "x")}, want: ErrBadName, contains: `' '`},
		{name: "slash in name", servers: map[string]*mcp.Server{"a/b": rawServer(object, "x")}, want: ErrBadName},
		{name: "dot in name", servers: map[string]*mcp.Server{"a.b": rawServer(object, "x")}, want: ErrBadName},
		{name: "double underscore in name", servers: map[string]*mcp.Server{"a__b": rawServer(object, "x")}, want: ErrBadName, contains: "mcp__<server>__<tool>"},
		{name: "nil server", servers: map[string]*mcp.Server{"a": nil}, want: ErrNilServer},
		{name: "unknown type in property", servers: map[string]*mcp.Server{"a": rawServer(map[string]any{
			"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integr"}}}, "x")}, want: ErrBadSchema, contains: `tool "x"`},
		{name: "pattern that does not compile", servers: map[string]*mcp.Server{"a": rawServer(map[string]any{
			"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string", "pattern": "("}}}, "x")}, want: ErrBadSchema},
		{name: "dangling ref", servers: map[string]*mcp.Server{"a": rawServer(map[string]any{
			"type": "object", "properties": map[string]any{"s": map[string]any{"$ref": "#/$defs/missing"}}}, "x")}, want: ErrBadSchema},
		{name: "clash after sanitizing", servers: map[string]*mcp.Server{"a": rawServer(object, "get.user", "get_user")}, want: ErrToolClash, contains: "Claude Code and Codex"},
		{name: "clash across servers in Gemini CLI", servers: map[string]*mcp.Server{
			"a": rawServer(object, "b_c"), "a_b": rawServer(object, "c")}, want: ErrToolClash, contains: `"mcp_a_b_c"`},
		{name: "clash across servers in Claude Code", servers: map[string]*mcp.Server{
			"a": rawServer(object, "_b"), "a_": rawServer(object, "b")}, want: ErrToolClash, contains: `"mcp__a___b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(t.Context(), tt.servers)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("validate() error = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("validate() error = %v, want %v", err, tt.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Fix == "" {
				t.Errorf("validate() error = %v, want a *ConfigError with a fix", err)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("validate() error = %q, want it to contain %q", err, tt.contains)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	object := map[string]any{"type": "object"}
	err := validate(t.Context(), map[string]*mcp.Server{
		"bad name": rawServer(object, "x"),
		"ok":       rawServer(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "nope"}}}, "x"),
	})
	if !errors.Is(err, ErrBadName) || !errors.Is(err, ErrBadSchema) {
		t.Errorf("validate() error = %v, want both ErrBadName and ErrBadSchema", err)
	}
}

func TestInstrumentOnce(t *testing.T) {
	// Hosting a server again must not stack another middleware on it: a
	// panic is recovered once, whatever the number of runs.
	ts := newTestServer(t, false)
	for range 3 {
		b, err := NewBridge(t.Context(), map[string]*mcp.Server{"tools": ts.Server}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	b := newTestBridge(t, map[string]*mcp.Server{"tools": ts.Server})
	handshake(t, b, "tools")
	// The reply to a ping means the initialized notification before it has
	// been handled too.
	handle(t, b, "tools", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	before := b.calls.next
	handle(t, b, "tools", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if n := b.calls.next - before; n != 1 {
		t.Errorf("tools/list went through the host middleware %d times, want 1", n)
	}
}
