package mcphost

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/clinvoke/clinvoke/invoker"
)

// CheckServers checks a list of MCP servers, as a request
// (Request.MCPServers) or a server's options (mcpadapter's
// Options.MCPServers) give them, before anything starts: unique, usable
// names, exactly one way to reach each server, and what that way takes
// (a command without NUL bytes and with KEY=VALUE environment entries, an
// http or https URL, headers an HTTP request can carry). field names the
// list in the errors, which name the server and the fix. It is the one
// check of such a list: the engine runs it on every request, mcpadapter on
// its options at Register.
func CheckServers(field string, servers []invoker.MCPServer) error {
	seen := make(map[string]bool, len(servers))
	for i, s := range servers {
		at := fmt.Sprintf("%s[%d] (%q)", field, i, s.Name)
		if err := CheckName(s.Name); err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		if seen[s.Name] {
			return fmt.Errorf("%s: the name is given twice: give each server its own name", at)
		}
		seen[s.Name] = true
		n := 0
		for _, set := range []bool{s.Server != nil, s.Command != "", s.URL != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: set exactly one of Server (tools written in Go), Command (a stdio server) and URL (an HTTP server); %d are set", at, n)
		}
		if s.Command == "" && (len(s.Args) > 0 || len(s.Env) > 0) {
			return fmt.Errorf("%s: Args and Env are for a Command server", at)
		}
		if s.URL == "" && len(s.Headers) > 0 {
			return fmt.Errorf("%s: Headers are for a URL server", at)
		}
		if s.URL != "" {
			// The URL is not quoted back: it may carry a credential.
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: URL is not an http or https URL with a host", at)
			}
		}
		for _, v := range append([]string{s.Command}, s.Args...) {
			if strings.IndexByte(v, 0) >= 0 {
				return fmt.Errorf("%s: Command and Args cannot hold a NUL byte", at)
			}
		}
		for j, kv := range s.Env {
			if problem := EnvProblem(kv); problem != "" {
				return fmt.Errorf("%s: Env[%d] %s", at, j, problem)
			}
		}
		for k, v := range s.Headers {
			if !headerName(k) {
				return fmt.Errorf("%s: header name %q is not an HTTP token", at, k)
			}
			if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
				return fmt.Errorf("%s: the value of header %q holds a control character", at, k)
			}
		}
	}
	return nil
}

// EnvProblem says what keeps the environment entry kv from being a usable
// KEY=VALUE, or returns "" when nothing does. It may name the key, never
// the value, which is often a secret: an entry without '=' is not quoted
// at all, as it may be a value given alone.
func EnvProblem(kv string) string {
	k, v, ok := strings.Cut(kv, "=")
	switch {
	case !ok:
		return "has no '=': write it as KEY=VALUE"
	case k == "":
		return "has an empty key before its '=': write it as KEY=VALUE"
	case strings.IndexByte(k, 0) >= 0:
		return fmt.Sprintf("has a key that holds a NUL byte (%q): an environment entry cannot carry one", strings.ReplaceAll(k, "\x00", ""))
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Sprintf("(%s) has a value that holds a NUL byte: an environment entry cannot carry one", k)
	}
	return ""
}

// headerName reports whether k is an HTTP header name: a token of
// RFC 9110's tchar.
func headerName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r) {
			continue
		}
		return false
	}
	return true
}
