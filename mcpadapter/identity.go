package mcpadapter

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Who made a call: its identity is the UserID of the TokenInfo that the
// bearer-token middleware put in its HTTP request (HTTPAccess, or a
// server's own auth.RequireBearerToken), which the SDK hands to the tool
// handler in mcp.RequestExtra.TokenInfo. Calls over stdio, and over HTTP
// without authentication, have none ("").

// Calls returns the calls in progress, oldest first: those whose handler
// has begun and not yet returned (a call waiting for a slot of
// Options.MaxConcurrent counts).
func (t *Tools) Calls() []Call {
	cs := t.sh.calls
	cs.mu.Lock()
	out := make([]Call, 0, len(cs.all))
	for c := range cs.all {
		out = append(out, c.info)
	}
	cs.mu.Unlock()
	slices.SortFunc(out, func(a, b Call) int { return a.Start.Compare(b.Start) })
	return out
}

// Cancel cancels the calls in progress of identity, with [ErrRevoked] as
// the cause, and returns how many it cancelled. Their runs are stopped as
// a client's cancel stops them (their trees killed), and each call is
// answered with an isError result of status "cancelled" that keeps the
// partial text and the session id. Cancel("") cancels the calls that have
// no identity. It does not wait for the runs to end: [Tools.Wait] does.
//
// Cancel is how a server that withdraws a client's access stops what the
// client started. HTTPAccess.Tokens stops in the same way the calls of a
// token removed from its set, and only those: the calls made with the
// name's other tokens go on. New calls of the identity are not refused:
// that is the authentication's part.
func (t *Tools) Cancel(identity string) int {
	return t.sh.calls.cancelIdentity(identity, ErrRevoked)
}

// identityOf returns the identity of a call: the UserID of the TokenInfo
// of its HTTP request.
func identityOf(req *mcp.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return ""
	}
	return req.Extra.TokenInfo.UserID
}

// requestIdentity returns the identity of an HTTP request that passed the
// bearer-token middleware.
func requestIdentity(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

type identityKey struct{}

// withIdentity returns ctx carrying the identity of its call, for the
// records of its runs.
func withIdentity(ctx context.Context, identity string) context.Context {
	if identity == "" {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, identity)
}

// identityFrom returns the identity that ctx carries, or "".
func identityFrom(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

// logAttrs returns attrs with the identity of ctx's call, if it has one.
func logAttrs(ctx context.Context, attrs ...any) []any {
	if id := identityFrom(ctx); id != "" {
		attrs = append(attrs, "identity", id)
	}
	return attrs
}

// cancelIdentity cancels the calls of identity with cause.
func (cs *callSet) cancelIdentity(identity string, cause error) int {
	cs.mu.Lock()
	var calls []*trackedCall
	for c := range cs.all {
		if c.info.Identity == identity {
			calls = append(calls, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range calls {
		c.cancel(cause)
	}
	return len(calls)
}

// sessionKey is the key under which Tools.Handler finds the calls of a
// session made by one identity: a DELETE of the session by another
// identity (which the SDK refuses) must not cancel them.
func sessionKey(sid, identity string) string {
	var b strings.Builder
	b.WriteString("session ")
	b.WriteString(sid)
	b.WriteString(" of ")
	b.WriteString(identity)
	return b.String()
}
