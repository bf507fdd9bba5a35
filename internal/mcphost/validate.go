package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clinvoke/clinvoke/internal/schematype"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// validate checks servers before anything is started and returns every
// problem found, joined, or nil.
//
// The go-sdk already refuses, when a tool is added, an input schema that is
// missing or whose type is not "object". What it leaves, and a CLI would
// meet later with less explanation, is checked here:
//
//   - a server name outside [A-Za-z0-9_-]+, or with "__" in it: the name is
//     a path segment of the URL, a key of the CLI's configuration (a TOML key
//     for Codex, a JSON key for Gemini CLI and Claude Code), and the server
//     part of the model-visible tool name mcp__<server>__<tool> (Claude Code,
//     Codex), where a "__" inside the server name makes the split ambiguous;
//   - an input schema that does not resolve as a JSON Schema (an unknown
//     type, a pattern that does not compile, a $ref that leads nowhere):
//     the model's API refuses the whole request, so every turn would fail;
//   - two tools the CLI would present under one name once qualified and
//     sanitized (see qualifiers).
//
// Tools are read by listing them over an in-memory session, since a
// *mcp.Server does not expose them otherwise; a tool added after validate
// ran is not checked.
func validate(ctx context.Context, servers map[string]*mcp.Server) error {
	var errs []error
	type ref struct{ server, tool string }
	seen := make(map[string]map[string]ref) // scheme → qualified name → first tool
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if err := CheckName(name); err != nil {
			errs = append(errs, err) // its tools are still checked
		}
		s := servers[name]
		if s == nil {
			errs = append(errs, &ConfigError{Kind: ErrNilServer, Server: name,
				Problem: "the server is nil", Fix: "pass an *mcp.Server made by mcp.NewServer"})
			continue
		}
		tools, err := listTools(ctx, s)
		if err != nil {
			return fmt.Errorf("mcphost: server %q: listing its tools: %w", name, err)
		}
		for _, t := range tools {
			if t.Name == "" {
				errs = append(errs, &ConfigError{Kind: ErrBadName, Server: name,
					Problem: "a tool has an empty name", Fix: "name every tool"})
				continue
			}
			if err := checkSchema(name, t); err != nil {
				errs = append(errs, err)
			}
			for _, q := range qualifiers {
				qn := q.qualify(name, t.Name)
				if seen[q.cli] == nil {
					seen[q.cli] = make(map[string]ref)
				}
				if first, ok := seen[q.cli][qn]; ok {
					errs = append(errs, &ConfigError{Kind: ErrToolClash, Server: name, Tool: t.Name,
						Problem: fmt.Sprintf("%s would name it %q, as it names tool %q of server %q",
							q.cli, qn, first.tool, first.server),
						Fix: "rename one of the tools or servers"})
					continue
				}
				seen[q.cli][qn] = ref{name, t.Name}
			}
		}
	}
	return errors.Join(errs...)
}

// CheckName reports, as a *ConfigError, whether name can be a server's
// name: a URL path segment, a CLI configuration key and the server part of
// a qualified tool name. Serve and NewBridge check it; callers that
// configure other servers under the same rules call it too.
func CheckName(name string) error {
	const fix = "use letters, digits, '_' and '-' only, without \"__\""
	if name == "" {
		return &ConfigError{Kind: ErrBadName, Server: name, Problem: "the name is empty", Fix: fix}
	}
	for _, r := range name {
		if !nameRune(r) {
			return &ConfigError{Kind: ErrBadName, Server: name,
				Problem: fmt.Sprintf("the name contains %q", r), Fix: fix}
		}
	}
	if strings.Contains(name, "__") {
		return &ConfigError{Kind: ErrBadName, Server: name,
			Problem: `the name contains "__", the separator in mcp__<server>__<tool>`, Fix: fix}
	}
	return nil
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// checkSchema reports whether t's input schema is an object schema that
// resolves.
func checkSchema(server string, t *mcp.Tool) error {
	bad := func(problem string, err error) error {
		return &ConfigError{Kind: ErrBadSchema, Server: server, Tool: t.Name, Problem: problem, Err: err,
			Fix: "give the tool a JSON Schema (draft 2020-12) of type \"object\", or let mcp.AddTool infer it"}
	}
	data, err := json.Marshal(t.InputSchema)
	if err != nil {
		return bad("the schema does not encode as JSON", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return bad("the schema is not a JSON Schema", err)
	}
	if s.Type != "object" {
		return bad(fmt.Sprintf("the schema's type is %q, not \"object\"", s.Type), nil)
	}
	if _, err := s.Resolve(nil); err != nil {
		return bad("the schema does not resolve", err)
	}
	// Resolve accepts any string as a type; the model's API does not.
	if typ, ok := schematype.Unknown(data); !ok {
		return bad(fmt.Sprintf("%q is not a JSON Schema type", typ), nil)
	}
	return nil
}

// listTools returns s's tools, read over an in-memory session.
func listTools(ctx context.Context, s *mcp.Server) ([]*mcp.Tool, error) {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcphost-validate", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// A qualifier is how one CLI turns a server and a tool name into the name
// the model sees.
type qualifier struct {
	cli     string
	qualify func(server, tool string) string
}

// qualifiers are the naming schemes of the CLIs clinvoke runs.
//
// Claude Code and Codex present mcp__<server>__<tool>, with characters
// outside [A-Za-z0-9_-] replaced by '_'. Gemini CLI replaces characters
// outside [A-Za-z0-9_.-] by '_' and shortens a name over 63 characters to its
// first 28 and last 32 around "___" (generateValidName in
// packages/core/src/tools/mcp-tool.ts); recent releases qualify as
// mcp_<server>_<tool>, which is what is checked here.
var qualifiers = []qualifier{
	{"Claude Code and Codex", func(server, tool string) string {
		return "mcp__" + server + "__" + sanitize(tool, "_-")
	}},
	{"Gemini CLI", func(server, tool string) string {
		name := sanitize("mcp_"+server+"_"+tool, "_.-")
		if len(name) > 63 {
			name = name[:28] + "___" + name[len(name)-32:]
		}
		return name
	}},
}

// sanitize replaces every character of s that is not an ASCII letter, digit
// or one of keep by '_'.
func sanitize(s, keep string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(keep, r) {
			return r
		}
		return '_'
	}, s)
}
