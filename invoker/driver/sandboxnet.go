package driver

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/invoker"
)

// The network part of the sandbox (invoker.Sandbox.Network): a network
// namespace per run (a session's lives as long as the session), entered
// by the thread that forks the CLI, whose only ways out are internal/
// egress's proxy and the forwarders of the loopback endpoints the run
// must reach; every attempt recorded, a denied one a warning event.

// netNone is the Network rule that allows only what the run must reach.
const netNone = "none"

// sandboxNetHeld is the part Result.Sandbox and Capabilities.Sandbox add
// when the network rules hold.
const sandboxNetHeld = "network"

// The routes into a run's network namespace (internal/egress).
const (
	netEnter = "enter" // egress.Net.Enter on the forking thread: root
	netWrap  = "wrap"  // egress.Net.Wrap: unprivileged user namespaces
)

// netProbe says once how this process can give a run a network
// namespace: by Enter (CAP_SYS_ADMIN), else by Wrap (unprivileged user
// namespaces), else neither and why (the Wrap route's reason for a user,
// Enter's for root).
var netProbe = sync.OnceValues(func() (string, error) {
	err := egress.Probe()
	if err == nil {
		return netEnter, nil
	}
	werr := egress.ProbeWrap()
	if werr == nil {
		return netWrap, nil
	}
	if os.Geteuid() != 0 {
		err = werr
	}
	return "", err
})

// netWanted reports whether sb asks for a network ceiling.
func netWanted(sb invoker.Sandbox) bool { return len(sb.Network) > 0 }

// parseNetwork reads Sandbox.Network: "none" alone, or rules. Its errors
// match ErrInvalidRequest.
func parseNetwork(rules []string) ([]egress.Rule, error) {
	if len(rules) == 1 && rules[0] == netNone {
		return nil, nil
	}
	out := make([]egress.Rule, 0, len(rules))
	for i, s := range rules {
		if s == netNone {
			return nil, invalid("Sandbox.Network[%d] is %q beside other rules: %q alone allows only what the run must reach; drop it to allow the others", i, s, netNone)
		}
		r, err := egress.ParseRule(s)
		if err != nil {
			return nil, invalid("Sandbox.Network[%d]: %v", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkNetwork checks the network part of sb, merged and in a known mode.
func checkNetwork(sb invoker.Sandbox) error {
	if !netWanted(sb) || sb.Mode == sandboxOff {
		return nil // "off" turns the rules off with the rest
	}
	if sb.Mode == "" {
		return invalid("Sandbox.Network is set without Sandbox.Mode: set Mode to %q or %q for the network rules to hold", sandboxAvailable, sandboxRequired)
	}
	if _, err := parseNetwork(sb.Network); err != nil {
		return err
	}
	if sb.Mode == sandboxRequired {
		if _, err := netProbe(); err != nil {
			return &sandboxError{err: netUnavailable(err)}
		}
	}
	return nil
}

// netUnavailable returns the probe's error as the Invoker's user reads
// it: what the network rules need, what failed, and how to get it.
func netUnavailable(err error) error {
	var ns *egress.NamespaceError
	if !errors.As(err, &ns) {
		return fmt.Errorf("the network rules (Sandbox.Network) need a network namespace for the run: %w", err)
	}
	// Wrap is tried after Enter, and is not the Invoker's user's to call.
	missing, _, _ := strings.Cut(ns.Missing, "; without it, start the run with Wrap")
	return fmt.Errorf("the network rules (Sandbox.Network) need a network namespace for the run: %s: %w: %s", ns.Op, ns.Err, missing)
}

// netCapabilities returns what Capabilities adds for the network part:
// the part held, or "" and why not.
func netCapabilities() (string, string) {
	route, err := netProbe()
	if err != nil {
		return "", "no network part: " + netUnavailable(err).Error()
	}
	how := "entered as root"
	if route == netWrap {
		how = "in a user namespace of the run's own"
	}
	return sandboxNetHeld, "a network namespace per run (" + how + "), whose only way out is the library's proxy, holds Sandbox.Network"
}

// modelFact is where one CLI's model endpoint is configured, and its
// default API hosts.
type modelFact struct {
	env      string   // the variable holding its base URL
	config   string   // a configuration file below its home (homeVar's, else the home directory's)
	homeVar  string   // the variable naming the directory config is in
	key      string   // the key of a base URL in config
	defaults []string // the hosts it calls when nothing is configured
}

// modelFacts are the model endpoints of the CLIs, one place for every
// reader (docs/cli-facts.md, docs/acp-agents.md): the three backends and
// the ACP agents under the names internal/sandbox gives them. The
// defaults are the API hosts and their sign-in hosts; a CLI configured
// another way (Vertex AI, Bedrock, another provider) needs its hosts in
// Sandbox.Network.
var modelFacts = map[string]modelFact{
	"codex":           {config: "config.toml", homeVar: "CODEX_HOME", key: "base_url", defaults: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}},
	"codex-acp":       {config: "config.toml", homeVar: "CODEX_HOME", key: "base_url", defaults: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}},
	"gemini":          {env: "GOOGLE_GEMINI_BASE_URL", defaults: []string{"generativelanguage.googleapis.com:443", "cloudcode-pa.googleapis.com:443", "oauth2.googleapis.com:443"}},
	"claude":          {env: "ANTHROPIC_BASE_URL", defaults: []string{"api.anthropic.com:443", "console.anthropic.com:443"}},
	"claude-code-acp": {env: "ANTHROPIC_BASE_URL", defaults: []string{"api.anthropic.com:443", "console.anthropic.com:443"}},
	"qwen":            {env: "OPENAI_BASE_URL"},
	"opencode":        {config: "opencode/opencode.json", homeVar: "XDG_CONFIG_HOME", key: "baseURL"},
}

// quietFact is a CLI's switch for its traffic besides the model's
// (telemetry, error reports, update checks), and the host that traffic
// goes to.
type quietFact struct {
	env  string // set to 1, it turns that traffic off
	host string // host:port
}

// quietFacts are the CLIs whose own traffic the network rules would
// refuse in every run, each refusal a warning (docs/cli-facts.md): Claude
// Code 2.1.197 sends 6 connections to api.anthropic.com:443 in a one-turn
// run, none with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC set.
var quietFacts = map[string]quietFact{
	"claude":          {env: "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", host: "api.anthropic.com:443"},
	"claude-code-acp": {env: "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", host: "api.anthropic.com:443"},
}

// quietEnv returns what the environment of a run of cli with env adds
// under the network rules of cfg: the CLI's switch for its own traffic,
// set where the rules would refuse that traffic (its model is elsewhere)
// and the run's environment lacks the variable (set, even empty, it is
// the caller's).
func quietEnv(cli string, env []string, cfg *egress.Config) []string {
	f, ok := quietFacts[cli]
	if !ok {
		return nil
	}
	if _, set := envLookup(env, f.env); set {
		return nil // the caller's decision, even empty
	}
	host, port, _ := net.SplitHostPort(f.host)
	p, _ := strconv.Atoi(port)
	if cfg.Allows(host, p) {
		return nil
	}
	return []string{f.env + "=1"}
}

// modelURLs returns the base URLs the run of cli is configured with: its
// variable's, the ones in its configuration file, else none.
func modelURLs(cli string, env []string) (urls []string, defaults []string) {
	f := modelFacts[cli]
	if v := envValue(env, f.env); f.env != "" && v != "" {
		urls = append(urls, v)
	}
	if f.config != "" {
		dir := envValue(env, f.homeVar)
		if dir == "" {
			home := envValue(env, "HOME")
			if home == "" {
				home, _ = os.UserHomeDir()
			}
			dir = filepath.Join(home, map[string]string{"CODEX_HOME": ".codex", "XDG_CONFIG_HOME": ".config"}[f.homeVar])
		}
		if b, err := os.ReadFile(filepath.Join(dir, f.config)); err == nil {
			re := regexp.MustCompile(regexp.QuoteMeta(f.key) + `"?\s*[=:]\s*"([^"]+)"`)
			for _, m := range re.FindAllSubmatch(b, -1) {
				urls = append(urls, string(m[1]))
			}
		}
	}
	return urls, f.defaults
}

// netConfig returns the proxy's configuration of a run of cli with env,
// given mcp and asking for rules: the rules, the model endpoint (its
// configured base URLs, else its default hosts) and the MCP servers given
// by URL, those on the loopback forwarded.
func netConfig(rules []egress.Rule, cli string, env []string, mcp []invoker.MCPServer) *egress.Config {
	cfg := &egress.Config{Allow: slices.Clone(rules)}
	urls, defaults := modelURLs(cli, env)
	if len(urls) == 0 {
		for _, d := range defaults {
			if r, err := egress.ParseRule(d); err == nil {
				cfg.Allow = append(cfg.Allow, r)
			}
		}
	}
	for _, s := range mcp {
		if s.URL != "" {
			urls = append(urls, s.URL)
		}
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "ws": "80"}[u.Scheme]
			if port == "" {
				port = "443"
			}
		}
		hp := net.JoinHostPort(u.Hostname(), port)
		if isLoopbackHost(u.Hostname()) {
			if !slices.Contains(cfg.Loopback, hp) {
				cfg.Loopback = append(cfg.Loopback, hp)
			}
			continue
		}
		if r, err := egress.ParseRule(hp); err == nil {
			cfg.Allow = append(cfg.Allow, r)
		}
	}
	return cfg
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runNet is a run's network sandbox once it holds.
type runNet struct {
	n       *egress.Net
	wrap    bool     // started by Wrap, not Enter
	ruleset *os.File // with wrap, the Landlock ruleset its first stage applies; closed once started
	env     []string // what the run's environment adds besides the proxy's variables (quietEnv)

	denied pending[egress.Attempt] // not yet warned of
	lost   atomic.Int64            // refusals the kernel dropped unread, not yet warned of (egress.Config.OnLost)
	tel    *span                   // the run's span, told of the lost refusals; nil records nothing

	mu sync.Mutex
	// warned holds the protocols and addresses of the refused direct
	// connections and datagrams already warned of: a tool that polls a
	// port (or a resolver that retries) gets one warning per address, not
	// one per attempt (each is still a Connection).
	warned map[string]bool
}

// startNet builds the run's egress.Net for a, which asks for network
// rules, with the run's environment env: nil without one where the host
// has none and the mode is "available".
func (a sandboxAsk) startNet(env []string, log interface {
	Debug(msg string, args ...any)
}) (*runNet, error) {
	if !netWanted(a.sb) {
		return nil, nil
	}
	route, err := netProbe()
	if err != nil {
		if a.sb.Mode == sandboxRequired {
			return nil, &sandboxError{err: netUnavailable(err)}
		}
		log.Debug("no network sandbox on this host", "err", err)
		return nil, nil
	}
	rules, err := parseNetwork(a.sb.Network)
	if err != nil {
		return nil, err
	}
	rn := &runNet{wrap: route == netWrap, tel: a.tel}
	cfg := netConfig(rules, a.cli, env, a.mcp)
	rn.env = quietEnv(a.cli, env, cfg)
	cfg.OnAttempt, cfg.OnLost = rn.onAttempt, rn.onLost
	if g := a.tools; g != nil {
		cfg.Guard, cfg.Guarded, cfg.Dials = g.forwarded, g.addr, &g.dials
	}
	if rn.n, err = egress.New(cfg); err != nil {
		return nil, fmt.Errorf("sandbox: the run's network rules: %w", err)
	}
	return rn, nil
}

// onAttempt queues the warning of at, a recorded attempt, if one is due:
// for a denied one, save a refused direct connection or datagram whose
// protocol and address were warned of already. An address is marked
// warned of only once its warning is queued: one the full queue dropped
// is warned of again at its next refusal.
func (rn *runNet) onAttempt(at egress.Attempt) {
	if at.Allowed || at.Guarded && at.Err == clientGone {
		return // a client that gave up before its check: nothing to warn of
	}
	if at.Method != egress.MethodDirect && at.Method != egress.MethodDirectUDP {
		rn.denied.add(at)
		return
	}
	hp := at.Method + " " + net.JoinHostPort(at.Host, strconv.Itoa(at.Port))
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.warned[hp] || !rn.denied.add(at) {
		return
	}
	if rn.warned == nil {
		rn.warned = make(map[string]bool)
	}
	rn.warned[hp] = true
}

// onLost counts k refusals the kernel dropped unread, for the next
// warnings, and tells the run's telemetry at once.
func (rn *runNet) onLost(k int) {
	rn.lost.Add(int64(k))
	rn.tel.lost(k)
}

// warnings returns a KindWarning event for each attempt denied since the
// last call (the connections that bypassed the proxy and were refused
// included: Flush), naming the host, the port and the rule that would
// allow it through the proxy.
func (rn *runNet) warnings(tool *invoker.Tool) []invoker.Event {
	if rn == nil {
		return nil
	}
	rn.n.Flush()
	return rn.deniedWarnings(tool)
}

// deniedWarnings returns the warnings of what is queued, then one
// counting the refusals the queue dropped and one counting those the
// kernel dropped unread (onLost), where there are any.
func (rn *runNet) deniedWarnings(tool *invoker.Tool) []invoker.Event {
	denied, dropped := rn.denied.take()
	evs := make([]invoker.Event, 0, len(denied))
	for _, at := range denied {
		hp := net.JoinHostPort(at.Host, strconv.Itoa(at.Port))
		text := fmt.Sprintf("the sandbox refused a connection to %s: add %q to Sandbox.Network to allow it (%s)", hp, hp, at.Err)
		switch {
		case at.Guarded:
			text = toolsRefused(hp, at.Err)
		case at.Method == egress.MethodDirect && isLoopbackHost(at.Host):
			text = fmt.Sprintf("the sandbox refused a connection to %s that bypassed its proxy: nothing in the run listens there, and the host's loopback is out of the run's reach (its network namespace has a loopback of its own); add %q to Sandbox.Network to reach the host's server at that address", hp, hp)
		case at.Cast() != "":
			text = fmt.Sprintf("the sandbox refused a UDP datagram to %s, a %s address, as it refuses every datagram: nothing leaves the run's network namespace but TCP connections through the proxy the run's HTTPS_PROXY and HTTP_PROXY name, and no rule lets UDP out; a tool looking for servers or devices on the network that way (DHCP, mDNS, SSDP) finds none", hp, at.Cast())
		case at.Method == egress.MethodDirectUDP:
			text = fmt.Sprintf("the sandbox refused a UDP datagram to %s that bypassed its proxy: only TCP connections through the proxy the run's HTTPS_PROXY and HTTP_PROXY name leave the sandbox, and no rule lets UDP out (DNS, QUIC); a DNS lookup inside fails at once, as the proxy resolves the hosts it is asked for", hp)
		case at.Method == egress.MethodDirect:
			text = fmt.Sprintf("the sandbox refused a connection to %s that bypassed its proxy: only connections through the proxy the run's HTTPS_PROXY and HTTP_PROXY name leave the sandbox; to let one through, send it through the proxy and add %q to Sandbox.Network", hp, hp)
		}
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: text})
	}
	if dropped > 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: fmt.Sprintf("the sandbox refused %d more connections not listed in these warnings (more than %d waited at once): the run's Connections record each", dropped, maxPending)})
	}
	if lost := rn.lost.Swap(0); lost > 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: fmt.Sprintf("%d refusals were lost: the run made %d more connections or datagrams around the sandbox's proxy, refused as the others, that were not recorded (a burst outran the sandbox's reader, or the kernel's rate limits left datagrams unanswered); neither the run's Connections nor these warnings name them", lost, lost)})
	}
	return evs
}

// connections returns the recorded attempts from the from-th on, as
// Result.Connections; nil without network rules.
func (rn *runNet) connections(from int) []invoker.Connection {
	if rn == nil {
		return nil
	}
	ats := rn.n.Attempts()
	out := make([]invoker.Connection, 0, max(len(ats)-from, 0))
	for _, at := range ats[min(from, len(ats)):] {
		out = append(out, invoker.Connection{Host: at.Host, Port: at.Port, Allowed: at.Allowed, Sent: at.Sent, Received: at.Received, Err: at.Err})
	}
	return out
}

// Attribute keys of the network rules' records.
const (
	keyNetAllowed = attribute.Key("clinvoke.net.allowed")
	keyNetDenied  = attribute.Key("clinvoke.net.denied")
	keyNetLost    = attribute.Key("clinvoke.net.lost")
)

// lost records k refusals the network rules lost (egress.Config.OnLost):
// the counter clinvoke.net.lost and, on the span, clinvoke.net.lost, the
// run's count so far, beside its counts of allowed and denied
// connections.
func (s *span) lost(k int) {
	if s == nil || k <= 0 {
		return
	}
	s.t.res.lost.Add(context.Background(), int64(k), s.t.cliOpt.add...)
	total := s.netLost.Add(int64(k))
	if s.rec {
		s.sp.SetAttributes(keyNetLost.Int64(total))
	}
}

// connections records a run's or turn's connections under the network
// rules: the counter clinvoke.net.connections by clinvoke.net.allowed,
// the span's counts of allowed and denied ones, and a span event
// clinvoke.net.denied naming each denied destination.
func (s *span) connections(ctx context.Context, cs []invoker.Connection) {
	if len(cs) == 0 {
		return
	}
	var allowed, denied int64
	for _, c := range cs {
		if c.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	// The attribute sets merge: the CLI's, and whether allowed.
	if allowed > 0 {
		s.t.res.conns.Add(ctx, allowed, append(slices.Clip(s.t.cliOpt.add), metric.WithAttributes(keyNetAllowed.Bool(true)))...)
	}
	if denied > 0 {
		s.t.res.conns.Add(ctx, denied, append(slices.Clip(s.t.cliOpt.add), metric.WithAttributes(keyNetAllowed.Bool(false)))...)
	}
	if !s.rec {
		return
	}
	s.sp.SetAttributes(keyNetAllowed.Int64(allowed), keyNetDenied.Int64(denied))
	for _, c := range cs {
		if !c.Allowed {
			s.event("clinvoke.net.denied", attribute.String("server.address", c.Host), attribute.Int("server.port", c.Port))
		}
	}
}

// enterRestrict returns the hook that restricts the thread forking the
// run by Enter's route: the namespace joined first, before the ceiling
// (rules, if not nil) restricts the thread, then the network
// capabilities dropped with those that reach past the ceiling, in one
// call.
func (rn *runNet) enterRestrict(rules *sandbox.Ruleset) func() error {
	return func() error {
		if err := rn.n.Join(); err != nil {
			return err
		}
		if rules != nil {
			return rules.RestrictDropping(egress.NetCaps...)
		}
		// No filesystem ceiling (Unlimited, nothing hidden): a run as
		// root could still leave the namespace (setns, eBPF) with them.
		return sandbox.DropCaps(slices.Concat(sandbox.EscapeCaps, egress.NetCaps)...)
	}
}

// closeRuleset closes the copy of the ruleset given to the first stage.
func (rn *runNet) closeRuleset() {
	if rn.ruleset != nil {
		rn.ruleset.Close()
		rn.ruleset = nil
	}
}
