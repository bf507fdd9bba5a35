package main

// Who may use the server over HTTP: the flags that fill
// mcpadapter.Options.HTTPAccess, and the check that refuses to listen
// beyond this machine without authentication.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/clinvoke/clinvoke/mcpadapter"
)

// accessFlags are the flags of HTTP access.
type accessFlags struct {
	tokensFile     string
	tokenEnv       string
	introspect     string // RFC 7662 endpoint
	issuer         string
	resource       string
	clientID       string
	clientSecret   string // the name of the variable holding it
	scopes         []string
	origins        []string
	insecureNoAuth bool
	maxPerIdentity int
}

// register defines the flags on fs.
func (a *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.tokensFile, "auth-tokens", "", "with -http: require a bearer token of this file, one NAME:TOKEN a line (NAME is the identity of the calls made with it); the file is read again when it changes")
	fs.StringVar(&a.tokenEnv, "auth-token-env", "", "with -http: require the bearer token in this environment variable (TOKEN, named by the variable, or NAME:TOKEN lines)")
	fs.StringVar(&a.introspect, "oauth-introspect", "", "with -http: accept OAuth access tokens that this token introspection endpoint (RFC 7662) says are active and issued for -oauth-resource")
	fs.StringVar(&a.issuer, "oauth-issuer", "", "with -oauth-introspect: the authorization server that issues the tokens (its issuer URL), announced to clients in the protected resource metadata")
	fs.StringVar(&a.resource, "oauth-resource", "", "with -oauth-introspect: this server's URL as clients reach it (such as https://mcp.example.com/mcp): the audience the tokens must have")
	fs.StringVar(&a.clientID, "oauth-client-id", "", "with -oauth-introspect: the client id this server authenticates with to the introspection endpoint")
	fs.StringVar(&a.clientSecret, "oauth-client-secret-env", "", "with -oauth-client-id: the environment variable holding this server's client secret")
	fs.Func("oauth-scope", "with -oauth-introspect: a scope every token must have (repeatable)", func(s string) error {
		a.scopes = append(a.scopes, s)
		return nil
	})
	fs.Func("allow-origin", "with -http: a browser origin allowed besides loopback ones, such as https://app.example.com (repeatable; * allows every origin)", func(s string) error {
		a.origins = append(a.origins, s)
		return nil
	})
	fs.BoolVar(&a.insecureNoAuth, "insecure-no-auth", false, "with -http: serve requests without authentication on any address: anyone who can reach the server runs agents on this machine")
	fs.IntVar(&a.maxPerIdentity, "max-per-identity", 0, "with authentication: runs executing at once for one identity (a token's name, an OAuth subject); further calls of that identity wait. 0: no limit but -max")
}

// authenticates reports whether the flags ask for credentials.
func (a *accessFlags) authenticates() bool {
	return a.tokensFile != "" || a.tokenEnv != "" || a.introspect != ""
}

// httpAccess returns the HTTPAccess the flags ask for, checked. listeners
// are the addresses the server listens on (-http, -metrics).
func (a *accessFlags) httpAccess(ctx context.Context, listeners []string, logger *slog.Logger) (mcpadapter.HTTPAccess, error) {
	var access mcpadapter.HTTPAccess
	if len(listeners) == 0 {
		for name, set := range map[string]bool{"-auth-tokens": a.tokensFile != "", "-auth-token-env": a.tokenEnv != "", "-oauth-introspect": a.introspect != "",
			"-allow-origin": len(a.origins) > 0, "-insecure-no-auth": a.insecureNoAuth} {
			if set {
				return access, fmt.Errorf("%s applies to HTTP: add -http ADDR", name)
			}
		}
	}
	if a.maxPerIdentity < 0 {
		return access, fmt.Errorf("-max-per-identity %d: give a positive number of runs, or 0 for no limit per identity", a.maxPerIdentity)
	}
	if a.insecureNoAuth && a.authenticates() {
		return access, errors.New("-insecure-no-auth with authentication flags: drop -insecure-no-auth, the server authenticates")
	}
	access.AllowedOrigins = a.origins
	access.InsecureNoAuth = a.insecureNoAuth

	switch {
	case a.tokensFile != "" && a.tokenEnv != "":
		return access, errors.New("-auth-tokens and -auth-token-env: give one (write every token in the file)")
	case a.tokensFile != "":
		t, err := mcpadapter.LoadTokens(expandHome(a.tokensFile))
		if err != nil {
			return access, fmt.Errorf("-auth-tokens: %w", err)
		}
		t.Logger = logger
		access.Tokens = t
	case a.tokenEnv != "":
		v, ok := os.LookupEnv(a.tokenEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return access, fmt.Errorf("-auth-token-env %s: the variable is not set: set it to a token, such as $(openssl rand -hex 32)", a.tokenEnv)
		}
		if !strings.Contains(v, ":") {
			v = a.tokenEnv + ":" + v // one token, named by its variable
		}
		t, err := mcpadapter.ParseTokens(v)
		if err != nil {
			return access, fmt.Errorf("-auth-token-env %s: %w", a.tokenEnv, err)
		}
		access.Tokens = t
	}

	if a.introspect != "" {
		v, err := a.introspector()
		if err != nil {
			return access, err
		}
		access.Verifier = v.verify
		access.ResourceMetadata = &oauthex.ProtectedResourceMetadata{
			Resource:               a.resource,
			AuthorizationServers:   []string{a.issuer},
			ScopesSupported:        a.scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "clinvoke agent CLIs",
		}
		access.Scopes = a.scopes
	} else {
		for name, set := range map[string]bool{"-oauth-issuer": a.issuer != "", "-oauth-resource": a.resource != "",
			"-oauth-client-id": a.clientID != "", "-oauth-client-secret-env": a.clientSecret != "", "-oauth-scope": len(a.scopes) > 0} {
			if set {
				return access, fmt.Errorf("%s applies to OAuth: add -oauth-introspect URL", name)
			}
		}
	}

	for _, addr := range listeners {
		local, err := loopbackOnly(ctx, addr)
		if err != nil {
			return access, err
		}
		switch {
		case local || a.authenticates():
		case a.insecureNoAuth:
			logger.Warn("WARNING: -insecure-no-auth: serving without authentication beyond this machine: ANYONE who can reach " + addr +
				" can run agents here, reading and editing files under the roots and running commands; " +
				"require a token with -auth-tokens FILE or -auth-token-env VAR")
		default:
			return access, fmt.Errorf("%s listens beyond this machine and no authentication is configured: "+
				"require a bearer token with -auth-tokens FILE or -auth-token-env VAR (or OAuth with -oauth-introspect URL), "+
				"listen on loopback (127.0.0.1), or pass -insecure-no-auth to serve anyone who can reach it", addr)
		}
	}
	return access, nil
}

// loopbackOnly reports whether a server listening on addr (host:port)
// accepts connections from this machine only: its host is a loopback
// address, or a name whose every address is one. An empty host, 0.0.0.0
// and [::] listen on every interface.
func loopbackOnly(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" {
		return false, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false, fmt.Errorf("address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// authSummary says how clients authenticate, for the log line that says
// where the server listens: the token names, never the tokens.
func authSummary(a mcpadapter.HTTPAccess) string {
	var parts []string
	if a.Tokens != nil {
		parts = append(parts, "bearer tokens "+strings.Join(a.Tokens.Names(), ","))
	}
	if a.Verifier != nil {
		parts = append(parts, "OAuth tokens for "+a.ResourceMetadata.Resource)
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, " or ")
	case a.InsecureNoAuth:
		return "NONE (-insecure-no-auth)"
	}
	return "none: loopback only"
}

// logCalls logs the calls a shutdown is about to cancel, by identity.
func logCalls(logger *slog.Logger, calls []mcpadapter.Call) {
	byIdentity := map[string][]string{}
	var ids []string
	for _, c := range calls {
		if _, ok := byIdentity[c.Identity]; !ok {
			ids = append(ids, c.Identity)
		}
		byIdentity[c.Identity] = append(byIdentity[c.Identity], c.Tool)
	}
	for _, id := range ids {
		logger.Info("cancelling calls", "identity", id, "calls", len(byIdentity[id]), "tools", byIdentity[id])
	}
}
