package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// stableStringify renders args as Gemini CLI's policy engine does before
// it matches an argsPattern: keys sorted, each top-level key and value
// framed by NUL characters, JSON as JavaScript writes it.
func stableStringify(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	enc := func(s string) string {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		e.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")
	}
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, "\x00"+enc(k)+":"+enc(args[k])+"\x00")
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

// TestConfigPatterns checks the rules that keep a one-shot turn at
// WorkspaceWrite from writing the agent CLIs' configuration: a file_path
// with a configuration name as a component, in any case, relative or
// absolute, with either separator, is denied; a file_path with a double
// quote is denied; the project's files, names that only contain a
// configuration name, and a content that mentions one are not. Each
// pattern passes Gemini's check of a safe expression.
func TestConfigPatterns(t *testing.T) {
	var res []*regexp.Regexp
	// Gemini CLI 0.61.0's isSafeRegExp: no quantified group that holds a
	// quantifier, at most 2048 characters.
	nested := regexp.MustCompile(`\([^)]*[*+?{].*\)[*+?{]`)
	for _, p := range configPatterns() {
		if nested.MatchString(p) || len(p) > 2048 {
			t.Errorf("pattern %q is one Gemini refuses as unsafe", p)
		}
		res = append(res, regexp.MustCompile(p))
	}
	denied := func(args map[string]string) bool {
		s := stableStringify(args)
		return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) })
	}
	for path, want := range map[string]bool{
		".gemini/settings.json":                  true,
		"/w/.gemini/settings.json":               true,
		"/w/.Gemini/GEMINI.md":                   true,
		"/home/u/.gemini/tmp/p/memory/MEMORY.md": true,
		"./.claude/settings.json":                true,
		"sub/../.codex/config.toml":              true,
		"/w/.agents/skills/x/SKILL.md":           true,
		"/w/sub/.git/hooks/pre-commit":           true,
		"/w/.mcp.json":                           true,
		".claude.json":                           true,
		"/w/.env":                                true,
		".env":                                   true,
		"/w/sub/.ENV":                            true,
		"/w/.env.local":                          false,
		"/w/.envrc":                              false,
		"~/.gemini/GEMINI.md":                    true,
		`C:\w\.gemini\settings.json`:             true,
		`/w/a"b/.gemini/settings.json`:           true,
		"/w/.gemini":                             true,
		"/w/main.go":                             false,
		"GEMINI.md":                              false,
		"/w/docs/gemini.md":                      false,
		"/w/.geminirc":                           false,
		"/w/x.gemini/y":                          false,
		"/w/.mcp.json.bak":                       false,
		`C:\w\main.go`:                           false,
	} {
		if got := denied(map[string]string{"file_path": path, "content": "x"}); got != want {
			t.Errorf("write_file of %q denied = %v, want %v", path, got, want)
		}
		if got := denied(map[string]string{"file_path": path, "old_string": "a", "new_string": "b", "instruction": "i"}); got != want {
			t.Errorf("replace of %q denied = %v, want %v", path, got, want)
		}
	}
	if denied(map[string]string{"file_path": "/w/README.md", "content": `see .gemini/settings.json and "~/.claude"`}) {
		t.Error("a write of the project's README that mentions .gemini/settings.json is denied")
	}
}

// TestWorkspaceWritePolicy checks that a one-shot turn at WorkspaceWrite,
// and only that, gets the admin policy, and that the run's cleanup
// removes its file.
func TestWorkspaceWritePolicy(t *testing.T) {
	for _, p := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited} {
		cmd, err := backend{}.Command(&invoker.Request{Prompt: "p", Workdir: "/w", Permission: p})
		if err != nil {
			t.Fatalf("%s: Command() error = %v", p, err)
		}
		var policy string
		for _, a := range cmd.Args {
			if v, ok := strings.CutPrefix(a, "--admin-policy="); ok {
				policy = v
			}
		}
		if (policy != "") != (p == invoker.WorkspaceWrite) {
			t.Errorf("%s: args %q, want --admin-policy only at workspace-write", p, cmd.Args)
		}
		if policy == "" {
			continue
		}
		b, err := os.ReadFile(policy)
		if err != nil || !strings.Contains(string(b), `decision = "deny"`) || !strings.Contains(string(b), `toolName = ["write_file", "replace"]`) {
			t.Errorf("policy file %s = %q, %v; want the deny rules", policy, b, err)
		}
		if cmd.Cleanup == nil {
			t.Fatalf("no Cleanup to remove %s", policy)
		}
		cmd.Cleanup()
		if _, err := os.Stat(policy); !os.IsNotExist(err) {
			t.Errorf("after Cleanup, stat %s = %v, want it gone", policy, err)
		}
	}
}
