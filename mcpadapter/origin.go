package mcpadapter

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// The Origin check of HTTPAccess: the MCP transport specification has
// servers of streamable HTTP validate the Origin header of every request,
// against DNS rebinding and pages that post to a local server. Browsers
// send it; other clients (the SDKs, curl, MCP hosts) do not, and pass.

// origins is the allow-list of HTTPAccess.AllowedOrigins, normalised.
type origins struct {
	any   bool            // "*": every origin
	exact map[string]bool // "scheme://host[:port]", lower case, default ports removed
}

// parseOrigins checks and normalises the allowed origins.
func parseOrigins(list []string) (*origins, error) {
	o := &origins{exact: map[string]bool{}}
	for _, s := range list {
		if s == "*" {
			o.any = true
			continue
		}
		n, err := normalOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("AllowedOrigins: %q: %w", s, err)
		}
		o.exact[n] = true
	}
	return o, nil
}

// normalOrigin returns origin as scheme://host[:port], lower case, without
// the scheme's default port, or an error if it is not an http or https
// origin.
func normalOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("want an origin: http or https, a host and an optional port, such as https://app.example.com")
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if h, port, err := net.SplitHostPort(host); err == nil && (scheme == "http" && port == "80" || scheme == "https" && port == "443") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host, nil
}

// allowed reports whether a request with the Origin header origin may
// pass: no Origin (a client that is not a browser), a loopback origin
// (http or https, any port: a page of the browser's own machine), or one
// of the list.
func (o *origins) allowed(origin string) bool {
	if origin == "" || o.any {
		return true
	}
	n, err := normalOrigin(origin)
	if err != nil {
		return false // "null" (a sandboxed frame, a file), or garbage
	}
	if o.exact[n] {
		return true
	}
	u, _ := url.Parse(n)
	return loopbackHost(u.Hostname())
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Unmap().IsLoopback()
}

// corsHeaders are what a browser page of an allowed origin may send and
// read: the transport's headers, the token and the trace context.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version, traceparent, tracestate"
	corsExposeHeaders = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
)

// checkOrigin refuses a request of a foreign origin with 403 and answers
// a CORS preflight of an allowed one. It reports whether the request goes
// on.
func (o *origins) check(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if !o.allowed(origin) {
		http.Error(w, fmt.Sprintf("Forbidden: origin %q is not among this server's allowed origins", origin), http.StatusForbidden)
		return false
	}
	if origin == "" {
		return true
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A preflight carries no credentials and reaches nothing.
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}
