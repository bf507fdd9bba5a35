package mcpadapter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
)

// ParallelSuffix is appended to an invoker's name to name its parallel
// tool.
const ParallelSuffix = "_parallel"

// Register adds two tools per invoker to s: one named Invoker.Name() that
// runs one agent turn, and one named Invoker.Name()+ParallelSuffix that
// runs many independent turns at once. opts may be nil.
//
// The invokers share one concurrency limit, one set of allowed roots and
// one transcript: call Register once with all of them. The returned
// [Tools] owns the lifetime of the calls: a server that stops calls
// [Tools.Shutdown], and one that serves streamable HTTP wraps the SDK's
// handler with [Tools.Handler].
//
// Register returns an error, and adds nothing, when s is nil, no invoker
// is given, two invokers have the same name, a name is not a valid tool
// name, or opts is invalid (an unknown permission, a root that is not an
// existing absolute directory, an MCP server without a usable name) or
// asks for what an invoker's CLI cannot take (Options.Approve, a server
// of Options.MCPServers). A tool already on s with the same name is
// replaced.
func Register(s *mcp.Server, opts *Options, invokers ...invoker.Invoker) (*Tools, error) {
	if s == nil {
		return nil, errors.New("mcpadapter: Register: nil *mcp.Server")
	}
	if len(invokers) == 0 {
		return nil, errors.New("mcpadapter: Register: no invokers")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("mcpadapter: Register: %w", err)
	}
	sh := newShared(cfg)
	sh.server = s
	var tools []*tool
	seen := map[string]bool{}
	for _, inv := range invokers {
		if inv == nil {
			return nil, errors.New("mcpadapter: Register: nil invoker")
		}
		name := inv.Name()
		if err := checkToolName(name + ParallelSuffix); err != nil {
			return nil, fmt.Errorf("mcpadapter: Register: invoker name %q: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("mcpadapter: Register: two invokers named %q", name)
		}
		if err := cfg.checkTakes(inv); err != nil {
			return nil, fmt.Errorf("mcpadapter: Register: %w", err)
		}
		seen[name] = true
		t := &tool{shared: sh, inv: inv, name: name, f: featuresOf(inv)}
		t.single = &mcp.Tool{
			Name:        name,
			Title:       titleOf(name),
			Description: t.description(),
			InputSchema: inputSchema(cfg, t.f, name),
			Annotations: annotations(cfg, titleOf(name)),
		}
		t.parallel = &mcp.Tool{
			Name:        name + ParallelSuffix,
			Title:       titleOf(name) + " (parallel)",
			Description: t.parallelDescription(),
			InputSchema: parallelInputSchema(cfg, t.f, name),
			Annotations: annotations(cfg, titleOf(name)+" (parallel)"),
		}
		// mcp.AddTool panics on a schema it cannot resolve; check first,
		// so that Register fails whole instead of halfway.
		for _, mt := range []*mcp.Tool{t.single, t.parallel} {
			if _, err := mt.InputSchema.(*jsonschema.Schema).Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
				return nil, fmt.Errorf("mcpadapter: Register: tool %q: input schema: %w", mt.Name, err)
			}
		}
		tools = append(tools, t)
	}
	sh.warm = newWarmPool(sh)
	for _, t := range tools {
		mcp.AddTool(s, t.single, t.handle)
		mcp.AddTool(s, t.parallel, t.handleParallel)
	}
	if !cfg.tasks.Disabled {
		if err := newTaskEngine(sh, cfg.tasks, tools).register(s); err != nil {
			return nil, fmt.Errorf("mcpadapter: Register: tasks: %w", err)
		}
	}
	return &Tools{sh: sh}, nil
}

// A tool serves the two MCP tools of one invoker.
type tool struct {
	*shared
	inv      invoker.Invoker
	name     string
	f        features
	single   *mcp.Tool
	parallel *mcp.Tool
}

// checkToolName applies the MCP tool-name rule: 1 to 128 characters among
// ASCII letters, digits, '_', '-' and '.'.
func checkToolName(name string) error {
	if name == "" || len(name) > 128 {
		return errors.New("a tool name must have 1 to 128 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("character %q is not allowed in a tool name", r)
		}
	}
	return nil
}

func titleOf(name string) string {
	switch name {
	case "codex":
		return "OpenAI Codex CLI"
	case "gemini":
		return "Google Gemini CLI"
	case "claude":
		return "Claude Code"
	}
	return name
}

func annotations(c *config, title string) *mcp.ToolAnnotations {
	readOnly := c.maxPerm.Rank() == invoker.ReadOnly.Rank()
	return &mcp.ToolAnnotations{
		Title: title,
		// The agent reads files and runs commands; it writes only when a
		// permission above read-only is allowed.
		ReadOnlyHint:    readOnly,
		DestructiveHint: jsonschema.Ptr(!readOnly),
		IdempotentHint:  false,
		OpenWorldHint:   jsonschema.Ptr(true), // it talks to a model API and may use the network
	}
}

func (t *tool) description() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Delegate a task to the %s coding agent (%s), which works in a directory of this machine: "+
		"it reads code, runs commands and, with a write permission, edits files, then answers. "+
		"One call is one agent turn and may take several minutes.\n\n", t.name, titleOf(t.name))
	b.WriteString("Result: structured content with text (the agent's final answer), session_id, exit_code, duration_ms and usage. " +
		"To continue the same conversation, call again with session_id and the same workdir.\n\n")
	b.WriteString("A failed or cancelled run is returned as an error result that still holds the partial text and the session_id, " +
		"so the session can be resumed. A refused call (bad workdir, permission above the limit) starts nothing.\n\n")
	t.describeLimits(&b)
	return b.String()
}

func (t *tool) parallelDescription() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run several independent tasks with the %s coding agent (%s) at the same time, each in its own session. "+
		"Use it for work that splits into parts that do not depend on each other "+
		"(review several packages, try alternatives); use %s for a single task.\n\n", t.name, titleOf(t.name), t.name)
	b.WriteString("Each task gives a prompt and may override the call's workdir, permission, model and session_id. " +
		"Result: structured content with results (one per task, in order: status, text, session_id, exit_code, duration_ms, usage, error) " +
		"and counts of completed, failed and cancelled tasks. A failed task does not stop the others unless fail_fast is true. " +
		"The call is an error result only if no task completed.\n\n")
	t.describeLimits(&b)
	return b.String()
}

func (t *tool) describeLimits(b *strings.Builder) {
	var perms []string
	for _, p := range t.cfg.allowedPermissions() {
		perms = append(perms, string(p))
	}
	fmt.Fprintf(b, "Permissions allowed: %s (default %s).", strings.Join(perms, ", "), t.cfg.defaultPerm)
	if len(t.cfg.roots) > 0 {
		fmt.Fprintf(b, " Workdirs must lie under: %s.", strings.Join(t.cfg.roots, ", "))
	}
	if t.cfg.maxConcurrent < 1<<31 {
		fmt.Fprintf(b, " At most %d runs execute at once on this server; further calls wait for a free slot.", t.cfg.maxConcurrent)
	}
}
