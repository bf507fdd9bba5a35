package mcpadapter

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceScope is the instrumentation scope of the adapter's tracer.
const traceScope = "github.com/clinvoke/clinvoke/mcpadapter"

// tracer returns Options.TracerProvider's tracer, or the global one's.
func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(traceScope)
}

// w3c reads the W3C Trace Context fields traceparent and tracestate.
var w3c propagation.TraceContext

// metaCarrier reads trace context from an MCP request's _meta, where
// OpenTelemetry's MCP conventions put it, under the keys "traceparent"
// and "tracestate".
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}
func (m metaCarrier) Set(key, value string) { m[key] = value }
func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// remoteParent returns ctx with the client's trace context as the
// parent of what follows: from the request's _meta first, since it names
// the call itself; else from the HTTP request's headers, unless ctx
// already holds a span (a host's HTTP middleware made one from them).
func remoteParent(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil {
		return ctx
	}
	if req.Params != nil && req.Params.Meta != nil {
		if c := w3c.Extract(ctx, metaCarrier(req.Params.Meta)); trace.SpanContextFromContext(c).IsRemote() {
			return c
		}
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if req.Extra != nil && req.Extra.Header != nil {
		return w3c.Extract(ctx, propagation.HeaderCarrier(http.Header(req.Extra.Header)))
	}
	return ctx
}

// startCall starts the span of a tool call, in the client's trace when
// the request carries one (see remoteParent), with the attributes of
// OpenTelemetry's MCP conventions. The returned function ends it with the
// call's status.
func (t *tool) startCall(ctx context.Context, req *mcp.CallToolRequest, toolName string) (context.Context, func(Status, string)) {
	ctx = remoteParent(ctx, req)
	ctx, sp := t.cfg.tracer.Start(ctx, "tools/call "+toolName, trace.WithSpanKind(trace.SpanKindServer))
	if sp.IsRecording() {
		sp.SetAttributes(
			attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", toolName),
			attribute.String("clinvoke.cli", t.name),
		)
		if req != nil && req.Session != nil && req.Session.ID() != "" {
			sp.SetAttributes(attribute.String("mcp.session.id", req.Session.ID()))
		}
		if id := identityFrom(ctx); id != "" {
			sp.SetAttributes(attribute.String("enduser.id", id))
		}
	}
	return ctx, func(st Status, msg string) {
		if sp.IsRecording() {
			sp.SetAttributes(attribute.String("clinvoke.status", string(st)))
			if st != StatusCompleted {
				sp.SetAttributes(attribute.String("error.type", string(st)))
				sp.SetStatus(codes.Error, msg)
			}
		}
		sp.End()
	}
}
