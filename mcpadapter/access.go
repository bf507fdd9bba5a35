package mcpadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// HTTPAccess says who may reach the tools over streamable HTTP: what
// [Tools.Handler] checks before a request reaches the SDK's handler, for
// every method (the POSTs that carry calls, the GET of the event stream,
// the DELETE that ends a session) and every path of the handler it wraps
// (a /metrics served beside the MCP endpoint included). The zero value
// authenticates nobody and so serves only requests that arrive on a
// loopback address, from no browser page but those of loopback origins.
//
// A request is refused, before anything is read of its body:
//   - with 401 when its URL carries a token (an access_token or token
//     query parameter: URLs end up in logs and proxies' records; OAuth 2.1
//     forbids it), whatever its header says;
//   - with 403 when it carries an Origin header (a browser page) that is
//     neither a loopback origin nor one of AllowedOrigins (the protected
//     resource metadata excepted: it is public);
//   - with 401 when authentication is configured (Tokens or Verifier) and
//     its Authorization header holds no bearer token that one of them
//     accepts; the WWW-Authenticate header says so (RFC 6750), and names
//     the protected resource metadata when there is some;
//   - with 403 when no authentication is configured, InsecureNoAuth is
//     false, and it arrived on an address other than loopback (or a Unix
//     socket): a server reachable from the network must say who may use
//     it, or say explicitly that anyone may.
//
// The identity of an authenticated request (the token's name, or the
// UserID of the TokenInfo that Verifier returned) reaches the tools
// through the request (mcp.RequestExtra.TokenInfo). A call's identity is
// written in its transcript lines, its log records and its span
// (enduser.id), limits the runs it may have at once
// (Options.MaxConcurrentPerIdentity), and is what [Tools.Calls] lists and
// [Tools.Cancel] stops. The SDK binds an MCP session to the identity that
// opened it: another identity's requests for it get 403. An agent's
// session belongs to the identity that ran it: another identity's call
// naming its session_id, to continue or fork it, is refused before
// anything starts. The owners of the last 100,000 sessions are kept in
// memory; a session the server did not run (or ran before a restart) is
// guarded by its id alone.
//
// A server that authenticates with a middleware of its own instead
// (auth.RequireBearerToken around Tools.Handler, with a verifier that sets
// TokenInfo.UserID) gets the same identities; it then sets InsecureNoAuth,
// since HTTPAccess cannot see that middleware.
type HTTPAccess struct {
	// Tokens, if not nil, is the set of named bearer tokens accepted (see
	// [Tokens]): a request carrying one has the token's name as identity.
	// A token removed from the set stops the calls in flight that it
	// authorized, with ErrRevoked as the cause, at the next request the
	// server gets; those of the name's other tokens go on, so a token
	// replaced under the same name stops the calls of the old one.
	Tokens *Tokens

	// Verifier, if not nil, verifies the OAuth 2.1 access tokens of the MCP
	// authorization specification, for which this server is the resource
	// server: it must return the token's TokenInfo, with UserID set to who
	// the token stands for (its subject) and an Expiration, or an error
	// matching auth.ErrInvalidToken. It must also check that the token was
	// issued for this server (its audience is ResourceMetadata.Resource:
	// RFC 8707), which the specification requires and this package cannot
	// do for it. A TokenInfo without UserID is a server error (500).
	// When Tokens is set too, a token is first looked up among Tokens.
	Verifier auth.TokenVerifier

	// ResourceMetadata is this server's protected resource metadata (RFC
	// 9728), required with Verifier: Resource is the server's URL as its
	// clients reach it (such as "https://mcp.example.com/mcp"), and
	// AuthorizationServers the issuers of the tokens. Tools.Handler
	// serves it, to anyone, at /.well-known/oauth-protected-resource
	// followed by the path of Resource (on the host of Resource), and
	// every 401 names that URL in its WWW-Authenticate header, which is how
	// MCP clients find where to get a token.
	ResourceMetadata *oauthex.ProtectedResourceMetadata

	// Scopes are the scopes an OAuth access token must all have; a token
	// missing one gets 403 (insufficient scope). A named token of Tokens
	// has every scope.
	Scopes []string

	// AllowedOrigins are the origins (such as "https://app.example.com")
	// whose browser pages may use the server, besides loopback origins
	// (http or https on localhost, 127.0.0.0/8 or [::1], any port), which
	// are always allowed. "*" allows every origin. A request without an
	// Origin header (every client that is not a browser) passes. An
	// allowed origin gets the CORS headers a page needs, preflight
	// included.
	AllowedOrigins []string

	// InsecureNoAuth, when no authentication is configured, serves
	// requests arriving on any address: anyone who can reach the server
	// runs agents on this machine with the permissions the tools allow.
	// Only for a server behind something that authenticates (a proxy, a
	// private network you trust, a middleware of your own).
	InsecureNoAuth bool
}

// ErrRevoked is the cancellation cause of the runs stopped by
// [Tools.Cancel], and of those of a token removed from HTTPAccess.Tokens.
// It matches context.Canceled.
var ErrRevoked error = &cancelCause{"the server withdrew the access of the call's identity"}

// access is HTTPAccess checked and ready to serve.
type access struct {
	origins  *origins
	tokens   *Tokens
	verifier auth.TokenVerifier
	scopes   []string
	insecure bool
	log      *slog.Logger

	metaPath string       // path of the protected resource metadata; "" for none
	meta     http.Handler // serves it
	metaURL  string       // its URL, for WWW-Authenticate

	// lastTable is the table of tokens the last request saw: a new one
	// from a file read again tells which tokens were removed.
	lastTable atomic.Pointer[tokenTable]
	// revoke stops the calls that a removed token authorized.
	revoke func(token *tokenRef)
}

// compile checks a and returns it ready to serve. Its errors name the
// field at fault.
func (a *HTTPAccess) compile(log *slog.Logger) (*access, error) {
	o, err := parseOrigins(a.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	c := &access{origins: o, tokens: a.Tokens, verifier: a.Verifier, scopes: a.Scopes, insecure: a.InsecureNoAuth, log: log}
	if a.Verifier != nil {
		m := a.ResourceMetadata
		if m == nil || m.Resource == "" {
			return nil, errors.New("Verifier needs ResourceMetadata with Resource, this server's URL, so that clients can find its authorization server")
		}
		u, err := url.Parse(m.Resource)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return nil, fmt.Errorf("ResourceMetadata.Resource %q: want the server's absolute URL, such as https://mcp.example.com/mcp", m.Resource)
		}
		if len(m.AuthorizationServers) == 0 {
			return nil, errors.New("ResourceMetadata.AuthorizationServers is empty: name the issuer of the tokens the Verifier accepts")
		}
		c.metaPath = "/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.EscapedPath(), "/")
		c.metaURL = u.Scheme + "://" + u.Host + c.metaPath
		c.meta = auth.ProtectedResourceMetadataHandler(m)
	} else if a.ResourceMetadata != nil {
		return nil, errors.New("ResourceMetadata without Verifier: give the Verifier of the OAuth access tokens it announces")
	}
	if a.Tokens != nil {
		c.lastTable.Store(a.Tokens.cur.Load())
	}
	return c, nil
}

// authenticates reports whether requests must carry credentials.
func (a *access) authenticates() bool { return a.tokens != nil || a.verifier != nil }

// wrap returns next behind the checks of the type's documentation.
func (a *access) wrap(next http.Handler) http.Handler {
	var authed http.Handler
	if a.authenticates() {
		opts := &auth.RequireBearerTokenOptions{ResourceMetadataURL: a.metaURL, Scopes: a.scopes}
		authed = auth.RequireBearerToken(a.verify, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cw, ok := w.(*challengeWriter); ok {
				w = cw.ResponseWriter // the SSE streams flush the server's own writer
			}
			next.ServeHTTP(w, r)
		}))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenInURL(r.URL) {
			a.challenge(w, `error="invalid_request", error_description="a token in the URL is refused"`)
			http.Error(w, "a token in the URL is refused: send it in the Authorization header (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		if a.meta != nil && r.URL.Path == a.metaPath {
			// Public, to every origin, as RFC 9728 has it: clients find
			// where to get a token here.
			a.meta.ServeHTTP(w, r)
			return
		}
		if !a.origins.check(w, r) {
			return
		}
		a.checkRevoked()
		if authed != nil {
			authed.ServeHTTP(&challengeWriter{ResponseWriter: w, a: a, gaveToken: r.Header.Get("Authorization") != ""}, r)
			return
		}
		if !a.insecure && !localRequest(r) {
			http.Error(w, "Forbidden: this server has no authentication configured, so it serves only its own machine (loopback): "+
				"its operator must configure bearer tokens or OAuth, or explicitly allow unauthenticated access", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// verify is the token verifier of the middleware: the named tokens first,
// then the OAuth verifier.
func (a *access) verify(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	if a.tokens != nil {
		info, err := a.tokens.Verify(ctx, token, r)
		if err == nil {
			info.Scopes = a.scopes
			return info, nil
		}
		if a.verifier == nil {
			return nil, err
		}
	}
	info, err := a.verifier(ctx, token, r)
	if err != nil {
		return nil, err
	}
	if info == nil || info.UserID == "" {
		a.log.ErrorContext(ctx, "the OAuth token verifier returned a TokenInfo without UserID; the request is refused (500)")
		return nil, errors.New("server error: the token verifier gave no identity (TokenInfo.UserID)")
	}
	return info, nil
}

// checkRevoked stops the calls of the tokens removed from the set since
// the last request: each call is bound to the token that authorized it.
func (a *access) checkRevoked() {
	if a.tokens == nil || a.revoke == nil {
		return
	}
	a.tokens.refresh()
	cur := a.tokens.cur.Load()
	last := a.lastTable.Swap(cur)
	if last == nil || last == cur {
		return
	}
	for _, ref := range removedTokens(last, cur) {
		a.revoke(ref)
	}
}

// challenge sets the WWW-Authenticate header of a 401, with params after
// the scheme, and the resource metadata's URL when there is one.
func (a *access) challenge(w http.ResponseWriter, params string) {
	v := `Bearer realm="mcp"`
	if params != "" {
		v += ", " + params
	}
	if a.metaURL != "" {
		v += fmt.Sprintf(", resource_metadata=%q", a.metaURL)
	}
	w.Header().Set("WWW-Authenticate", v)
}

// A challengeWriter gives the 401 of auth.RequireBearerToken a
// WWW-Authenticate header when it has none (RFC 6750 asks for one on every
// 401; the middleware adds one only when it has a metadata URL or scopes
// to name).
type challengeWriter struct {
	http.ResponseWriter
	a         *access
	gaveToken bool
}

func (w *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		params := ""
		if w.gaveToken {
			params = `error="invalid_token"`
		}
		w.a.challenge(w.ResponseWriter, params)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *challengeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// tokenInURL reports whether u carries a token in its query: the
// access_token parameter of RFC 6750 §2.3, or a parameter named token.
func tokenInURL(u *url.URL) bool {
	if u.RawQuery == "" {
		return false
	}
	q := u.Query()
	return q.Has("access_token") || q.Has("token")
}

// localRequest reports whether r arrived on a loopback address or a Unix
// socket: from this machine.
func localRequest(r *http.Request) bool {
	switch a := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ok && ip.Unmap().IsLoopback()
	case *net.UnixAddr:
		return true
	case net.Addr:
		host, _, err := net.SplitHostPort(a.String())
		return err == nil && loopbackHost(host)
	}
	return false
}
