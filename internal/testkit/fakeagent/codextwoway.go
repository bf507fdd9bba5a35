package fakeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// codexTwoWay is the state of the app-server's two-way control: the
// approval policy, the configuration (-c options and thread/start's
// config) its MCP servers come from, and what the session allowed.
type codexTwoWay struct {
	mu      sync.Mutex
	policy  string         // approval policy ("never", "untrusted", ...; "granular")
	config  map[string]any // the configuration tree of the -c options and thread/start's config
	allowed map[string]bool
	clients mcpClients
	replies pendingReplies
}

// newCodexTwoWay reads the -c options of the fake's arguments.
func newCodexTwoWay(args []string) *codexTwoWay {
	c := &codexTwoWay{config: map[string]any{}, allowed: map[string]bool{}, policy: "on-request"}
	for _, kvs := range flagValues(args, "-c", "--config") {
		k, v, ok := strings.Cut(kvs, "=")
		if !ok {
			continue
		}
		val, err := parseTOMLValue(strings.TrimSpace(v))
		if err != nil {
			val = v // as Codex takes a value that is not TOML: a string
		}
		setPath(c.config, strings.TrimSpace(k), val)
	}
	if p, ok := c.config["approval_policy"].(string); ok {
		c.policy = p
	}
	return c
}

// setPath sets the dotted path key of tree to v.
func setPath(tree map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := tree[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			tree[p] = sub
		}
		tree = sub
	}
	tree[parts[len(parts)-1]] = v
}

// threadConfig applies thread/start's params: its approval policy and
// its config overrides (dotted keys, JSON values).
func (c *codexTwoWay) threadConfig(policy json.RawMessage, config map[string]json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, raw := range config {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			setPath(c.config, k, v)
		}
	}
	c.setPolicy(policy)
}

// setPolicy sets the approval policy from a JSON value, if one is given.
func (c *codexTwoWay) setPolicy(policy json.RawMessage) {
	var s string
	switch {
	case len(policy) == 0 || string(policy) == "null":
	case json.Unmarshal(policy, &s) == nil:
		c.policy = s
	default:
		c.policy = "granular"
	}
}

// servers returns the MCP servers of the configuration.
func (c *codexTwoWay) servers() []mcpServer {
	c.mu.Lock()
	defer c.mu.Unlock()
	tables, _ := c.config["mcp_servers"].(map[string]any)
	var out []mcpServer
	for name, t := range tables {
		m, ok := t.(map[string]any)
		if !ok {
			continue
		}
		if e, ok := m["enabled"].(bool); ok && !e {
			continue
		}
		s := mcpServer{Name: name, Headers: map[string]string{}}
		s.URL, _ = m["url"].(string)
		s.Command, _ = m["command"].(string)
		s.Approve, _ = m["default_tools_approval_mode"].(string)
		if args, ok := m["args"].([]any); ok {
			for _, a := range args {
				if a, ok := a.(string); ok {
					s.Args = append(s.Args, a)
				}
			}
		}
		if names, ok := m["env_vars"].([]any); ok {
			// Copied from Codex's own environment.
			for _, n := range names {
				if n, ok := n.(string); ok {
					if v, ok := os.LookupEnv(n); ok {
						s.Env = append(s.Env, n+"="+v)
					}
				}
			}
		}
		if env, ok := m["env"].(map[string]any); ok {
			for k, v := range env {
				if v, ok := v.(string); ok {
					s.Env = append(s.Env, k+"="+v)
				}
			}
		}
		if v, ok := m["bearer_token_env_var"].(string); ok && os.Getenv(v) != "" {
			s.Headers["Authorization"] = "Bearer " + os.Getenv(v)
		}
		if h, ok := m["http_headers"].(map[string]any); ok {
			for k, v := range h {
				if v, ok := v.(string); ok {
					s.Headers[k] = v
				}
			}
		}
		if h, ok := m["env_http_headers"].(map[string]any); ok {
			for k, v := range h {
				if v, ok := v.(string); ok && os.Getenv(v) != "" {
					s.Headers[k] = os.Getenv(v)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// request sends a server request and waits for its result, or for ctx. A
// JSON-RPC error comes back as a null result.
func (s *appServer) request(ctx context.Context, method string, params obj) (json.RawMessage, json.RawMessage, error) {
	id := s.two.replies.newID()
	key := strconv.Itoa(id)
	res, err := s.two.replies.request(ctx, key, func() { s.a.emit(obj{{"method", method}, {"id", id}, {"params", params}}) })
	return json.RawMessage(key), res, err
}

// codexActions runs the turn's actions and returns their outcome lines;
// an error means ctx (an interrupt) or a decision of cancel ended the
// turn.
func (s *appServer) codexActions(ctx context.Context, turn string) (outcomes, error) {
	return s.a.s.actions(ctx, turnActions{
		ask:  func(ctx context.Context, command string) (string, error) { return s.codexAsk(ctx, turn, command) },
		edit: func(ctx context.Context, e fileEdit) (string, error) { return s.codexEdit(ctx, turn, e) },
		call: func(ctx context.Context) (string, error) { return s.codexCallTool(ctx, turn) },
	})
}

// turnParams returns the params of a notification or request of turn:
// its thread and turn, then extra.
func (s *appServer) turnParams(turn string, extra ...kv) obj {
	return append(obj{{"threadId", s.thread}, {"turnId", turn}}, extra...)
}

// asks reports whether the app-server asks before the action key (a
// command line, "file:PATH"): unless the approval policy is never, or the
// session accepted it already.
func (c *codexTwoWay) asks(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policy != "never" && !c.allowed[key]
}

// approval sends the approval request method with params, reports it
// resolved, and returns whether the client's decision lets the action
// key go ahead, remembering an acceptForSession; a decision of cancel is
// errEndTurn.
func (s *appServer) approval(ctx context.Context, method string, params obj, key string) (bool, error) {
	rid, res, err := s.request(ctx, method, params)
	if err != nil {
		return false, err
	}
	s.notify("serverRequest/resolved", obj{{"threadId", s.thread}, {"requestId", rid}})
	var r struct {
		Decision json.RawMessage `json:"decision"`
	}
	json.Unmarshal(res, &r)
	var decision string
	if json.Unmarshal(r.Decision, &decision) != nil && len(r.Decision) > 0 && r.Decision[0] == '{' {
		decision = "accept" // an amendment: accepted, with a rule
	}
	switch decision {
	case "accept":
		return true, nil
	case "acceptForSession":
		s.two.mu.Lock()
		s.two.allowed[key] = true
		s.two.mu.Unlock()
		return true, nil
	case "cancel":
		return false, errEndTurn
	}
	return false, nil // decline, or an answer Codex cannot read
}

// codexAsk asks for approval of command (unless the policy is never, or
// the session accepted it already) and runs it if accepted.
func (s *appServer) codexAsk(ctx context.Context, turn, command string) (string, error) {
	wd, _ := os.Getwd()
	id := "call_" + randHex(6)
	cmd := "/bin/bash -lc '" + command + "'"
	item := func(status string, output, code any) obj {
		return obj{{"type", "commandExecution"}, {"id", id}, {"command", cmd}, {"cwd", wd},
			{"processId", nil}, {"source", "agent"}, {"status", status},
			{"commandActions", []obj{{{"type", "unknown"}, {"command", cmd}}}},
			{"aggregatedOutput", output}, {"exitCode", code}, {"durationMs", nil}}
	}
	if s.two.asks(cmd) {
		ok, err := s.approval(ctx, "item/commandExecution/requestApproval", s.turnParams(turn,
			kv{"itemId", id}, kv{"kind", "command"}, kv{"startedAtMs", time.Now().UnixMilli()},
			kv{"environmentId", nil}, kv{"reason", nil}, kv{"command", cmd}, kv{"cwd", wd},
			kv{"commandActions", []obj{{{"type", "unknown"}, {"command", cmd}}}},
			kv{"proposedExecpolicyAmendment", nil}), cmd)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !ok {
			s.notify("item/started", s.turnParams(turn, kv{"item", item("inProgress", nil, nil)}))
			s.notify("item/completed", s.turnParams(turn, kv{"item", item("declined", nil, nil)}))
			return denied(""), err
		}
	}
	s.notify("item/started", s.turnParams(turn, kv{"item", item("inProgress", nil, nil)}))
	output, code := runShell(ctx, command)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	status := "completed"
	if code != 0 {
		status = "failed"
	}
	s.notify("item/completed", s.turnParams(turn, kv{"item", item(status, output, code)}))
	return OutcomeApproved, nil
}

// codexEdit announces e as a fileChange item, asks for approval of it
// (unless the policy is never, or the session accepted the file already),
// as Codex asks before it applies a patch, and writes the file if
// accepted.
func (s *appServer) codexEdit(ctx context.Context, turn string, e fileEdit) (string, error) {
	id := "call_" + randHex(6)
	kind, diff := "add", e.content
	if e.old != nil {
		kind, diff = "update", replaceDiff(*e.old, e.content)
	}
	item := func(status string) obj {
		return obj{{"type", "fileChange"}, {"id", id},
			{"changes", []obj{{{"path", e.path}, {"kind", obj{{"type", kind}}}, {"diff", diff}}}},
			{"status", status}}
	}
	s.notify("item/started", s.turnParams(turn, kv{"item", item("inProgress")}))
	if key := "file:" + e.path; s.two.asks(key) {
		ok, err := s.approval(ctx, "item/fileChange/requestApproval", s.turnParams(turn,
			kv{"itemId", id}, kv{"startedAtMs", time.Now().UnixMilli()}, kv{"reason", nil}, kv{"grantRoot", nil}), key)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !ok {
			s.notify("item/completed", s.turnParams(turn, kv{"item", item("declined")}))
			return denied(""), err
		}
	}
	line := e.write()
	status := "completed"
	if line != OutcomeEdited {
		status = "failed"
	}
	s.notify("item/completed", s.turnParams(turn, kv{"item", item(status)}))
	return line, nil
}

// replaceDiff is the unified diff of a change that replaces the whole of
// old by new.
func replaceDiff(old, new string) string {
	lines := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	ol, nl := lines(old), lines(new)
	var b strings.Builder
	fmt.Fprintf(&b, "@@ -1,%d +1,%d @@\n", len(ol), len(nl))
	for _, l := range ol {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range nl {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

// codexCallTool calls CallTool's tool as an MCP client of the configured
// server, reporting an mcpToolCall item.
func (s *appServer) codexCallTool(ctx context.Context, turn string) (string, error) {
	server, tool := toolTarget(s.a.s.CallTool)
	args := s.a.s.toolArgs()
	id := "call_" + randHex(6)
	item := func(status string, result, failure any) obj {
		return obj{{"type", "mcpToolCall"}, {"id", id}, {"server", server}, {"tool", tool},
			{"status", status}, {"arguments", args}, {"appContext", nil}, {"mcpAppUi", nil},
			{"pluginId", nil}, {"readOnlyHint", nil}, {"result", result}, {"error", failure}, {"durationMs", nil}}
	}
	tp := func(extra ...kv) obj { return s.turnParams(turn, extra...) }
	s.notify("item/started", tp(kv{"item", item("inProgress", nil, nil)}))
	fail := func(msg string) (string, error) {
		s.notify("item/completed", tp(kv{"item", item("failed", nil, obj{{"message", msg}})}))
		return OutcomeToolFailed + ": " + msg, nil
	}
	srv, ok := findServer(s.two.servers(), server)
	if !ok {
		return fail("unknown MCP server '" + server + "'")
	}
	s.two.mu.Lock()
	never := s.two.policy == "never"
	ask := srv.Approve != "approve" && !s.two.allowed["mcp:"+server+"/"+tool]
	s.two.mu.Unlock()
	switch {
	case ask && never:
		// Measured with codex exec 0.169.0 (docs/cli-facts.md).
		return fail("MCP tool call requires approval, but approval policy is never")
	case ask:
		// Codex asks about an MCP tool call with an elicitation of its
		// own, marked by _meta.codex_approval_kind.
		rid, res, err := s.request(ctx, "mcpServer/elicitation/request", obj{{"threadId", s.thread}, {"turnId", turn},
			{"serverName", server}, {"mode", "form"},
			{"_meta", obj{{"codex_approval_kind", "mcp_tool_call"}, {"persist", []string{"session", "always"}},
				{"tool_name", tool}, {"tool_params", args}}},
			{"message", "Allow the " + server + " MCP server to run tool \"" + tool + "\"?"},
			{"requestedSchema", obj{{"type", "object"}, {"properties", obj{}}}}})
		if err != nil {
			return "", err
		}
		s.notify("serverRequest/resolved", obj{{"threadId", s.thread}, {"requestId", rid}})
		var r struct {
			Action string `json:"action"`
			Meta   struct {
				Persist string `json:"persist"`
			} `json:"_meta"`
		}
		json.Unmarshal(res, &r)
		if r.Action != "accept" {
			s.notify("item/completed", tp(kv{"item", item("failed", nil, obj{{"message", "user rejected MCP tool call"}})}))
			return denied(""), nil
		}
		if r.Meta.Persist == "session" || r.Meta.Persist == "always" {
			s.two.mu.Lock()
			s.two.allowed["mcp:"+server+"/"+tool] = true
			s.two.mu.Unlock()
		}
	}
	res, err := s.two.clients.call(ctx, srv, tool, args)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return fail(err.Error())
	}
	result := obj{{"content", []obj{{{"type", "text"}, {"text", res.text}}}}, {"structuredContent", nil}, {"_meta", nil}}
	status := "completed"
	if res.isError {
		status = "failed"
	}
	s.notify("item/completed", tp(kv{"item", item(status, result, nil)}))
	if s.a.s.CommandCallsTool && srv.URL != "" {
		return res.outcome(nil) + "\ncommand: " + commandCall(ctx, srv, tool, args, s.a.s.CommandViaProxy, s.a.s.CommandRelay), nil
	}
	return res.outcome(nil), nil
}
