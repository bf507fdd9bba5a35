package mcphost

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall measures one call of the "echo" tool, round trip,
// through the HTTP host and through the bridge, with a go-sdk client over an
// in-memory transport as the baseline.
func BenchmarkToolCall(b *testing.B) {
	newServer := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Text: in.Text}, nil
		})
		return s
	}
	// Each client gets params of its own: a go-sdk client writes the
	// protocol version it negotiated into the params' _meta.
	newParams := func() *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	}

	b.Run("direct", func(b *testing.B) {
		cs := connectDirect(b, newServer())
		params := newParams()
		for b.Loop() {
			if _, err := cs.CallTool(b.Context(), params); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("bridge", func(b *testing.B) {
		br, err := NewBridge(b.Context(), map[string]*mcp.Server{"bench": newServer()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer br.Close()
		if _, err := br.Handle(b.Context(), "bench", []byte(initializeMsg)); err != nil {
			b.Fatal(err)
		}
		if _, err := br.Handle(b.Context(), "bench", []byte(initializedMsg)); err != nil {
			b.Fatal(err)
		}
		id := 0
		for b.Loop() {
			id++
			msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, id)
			if _, err := br.Handle(b.Context(), "bench", msg); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("http", func(b *testing.B) {
		h, err := Serve(b.Context(), map[string]*mcp.Server{"bench": newServer()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		tr := &mcp.StreamableClientTransport{Endpoint: h.URL("bench"), MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headerTransport{base: base, header: h.Header()}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(b.Context(), tr, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := newParams()
		for b.Loop() {
			if _, err := cs.CallTool(b.Context(), params); err != nil {
				b.Fatal(err)
			}
		}
	})
}
