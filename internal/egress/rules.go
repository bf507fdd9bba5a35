package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// A Rule allows connections to one host, or to every subdomain of a
// domain, on one port or on any.
//
// Host is a name ("api.openai.com"), an IP address ("192.0.2.7", "::1")
// or "*." followed by a domain ("*.googleapis.com"), which matches every
// name below the domain at any depth but not the domain itself: allow
// both to reach both. Names compare without regard to case or a final
// dot. Port 0 means any port.
type Rule struct {
	Host string
	Port int
}

// String returns the rule as ParseRule reads it: "host", "host:port",
// "[::1]:443".
func (r Rule) String() string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// ParseRule reads a rule written as "host", "host:port", "*.domain",
// "*.domain:port", an IP address, or "[IPv6]:port". It returns a
// *RuleError when the text is none of these.
func ParseRule(s string) (Rule, error) {
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, &RuleError{Rule: s, Problem: "the port is not a number from 1 to 65535"}
		}
		host, port = h, n
	} else if strings.Count(s, ":") == 1 {
		return Rule{}, &RuleError{Rule: s, Problem: "the port is missing or malformed"}
	}
	r := Rule{Host: host, Port: port}
	if err := r.validate(); err != nil {
		err.Rule = s
		return Rule{}, err
	}
	r.Host = canonHost(r.Host)
	return r, nil
}

// validate reports what is wrong with the rule's host and port.
func (r Rule) validate() *RuleError {
	if r.Port < 0 || r.Port > 65535 {
		return &RuleError{Rule: r.String(), Problem: "the port is not a number from 0 (any) to 65535"}
	}
	h := strings.TrimSuffix(r.Host, ".")
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || strings.Contains(name, "*") {
		return &RuleError{Rule: r.String(), Problem: `a wildcard is allowed only as a leading "*." before a domain`}
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return &RuleError{Rule: r.String(), Problem: "the host is neither a DNS name nor an IP address"}
		}
	}
	return nil
}

// canonHost lowers a name and drops its final dot; an IP address becomes
// its canonical text (no zone, IPv4-mapped IPv6 unmapped).
func canonHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return h
}

// matches reports whether the rule allows host (canonical) and port.
func (r Rule) matches(host string, port int) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	if d, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+d)
	}
	return host == r.Host
}

// literal reports whether the rule names an IP address, which allows
// that address even where the proxy refuses addresses of its kind by
// default (loopback, link-local).
func (r Rule) literal() bool {
	_, err := netip.ParseAddr(r.Host)
	return err == nil
}

// RuleError is returned for a rule that cannot be read.
type RuleError struct {
	Rule    string
	Problem string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("egress: rule %q: %s; write host, host:port, *.domain or [IPv6]:port", e.Rule, e.Problem)
}
