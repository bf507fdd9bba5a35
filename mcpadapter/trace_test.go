package mcpadapter

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// TestTelemetryRemoteParent: the client's trace context comes from the
// request's _meta first, else from the HTTP headers, else ctx is kept.
func TestTelemetryRemoteParent(t *testing.T) {
	const (
		metaTP   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		headerTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	header := http.Header{}
	header.Set("Traceparent", headerTP)
	tests := []struct {
		name      string
		req       *mcp.CallToolRequest
		wantTrace string
	}{
		{"meta", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{"traceparent": metaTP}}, Extra: &mcp.RequestExtra{Header: header}}, "0af7651916cd43dd8448eb211c80319c"},
		{"header", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: header}}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"bad meta falls back to header", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{"traceparent": 12}}, Extra: &mcp.RequestExtra{Header: header}}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"none", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(remoteParent(context.Background(), tt.req))
			got := ""
			if sc.IsValid() {
				got = sc.TraceID().String()
			}
			if got != tt.wantTrace {
				t.Errorf("remoteParent() trace = %q, want %q", got, tt.wantTrace)
			}
		})
	}
}
