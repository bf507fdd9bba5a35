package gemini

import (
	"fmt"
	"os"
	"strings"

	"github.com/clinvoke/clinvoke/internal/workspace"
)

// A one-shot turn at WorkspaceWrite runs Gemini's approval mode auto_edit,
// in which Gemini writes with write_file and replace, without asking, every
// file its own check allows: a path inside the working directory, or its
// global memory ~/.gemini/GEMINI.md and its project directory under
// ~/.gemini/tmp, though in auto_edit a safety checker of Gemini's own
// (allowed-path) refuses what lies outside the working directory (measured
// with 0.61.0, which has no save_memory tool). Inside it, Gemini protects
// .git, .env and node_modules only: the model could write the agent CLIs'
// configuration there (.gemini/settings.json, whose hooks and MCP server
// commands a later Gemini run in the folder obeys, Claude Code's
// .claude/settings.json, a .mcp.json, ...), and, when the working
// directory holds the home directory, Gemini's memory, which every later
// session of the user reads.
//
// So such a turn also gets rules for Gemini's policy engine, as an admin
// policy (--admin-policy, the highest of its tiers, above the user's and
// the project's rules), denying write_file and replace whose file_path has
// one of the configuration names of internal/workspace as a component, in
// any case, or holds a double quote (which could hide a component from the
// rules' pattern). The model reads the rule's message as the tool's error,
// and the turn goes on. Gemini ignores --admin-policy where its system
// policy directory holds policies of an administrator, whose rules then
// stand alone. The rules read the path as named: a symbolic link already
// in the working directory that leads into such a directory is not seen
// (the model cannot make one at this level: auto_edit runs no shell).

// policyMessage is what the model reads of a denied write.
const policyMessage = "clinvoke: this file holds an agent CLI's configuration or memory; the permission level workspace-write does not let the agent change it"

// configPatterns returns the argsPattern of the rules (JavaScript regular
// expressions over Gemini's stable stringification of the call's
// arguments, in which each top-level key and value is framed by NUL
// characters): a file_path with a configuration name as a component, and
// a file_path holding a double quote. Neither nests a quantifier, which
// Gemini refuses as unsafe.
func configPatterns() []string {
	var names []string
	for _, n := range workspace.ConfigNames() {
		var b strings.Builder
		for _, r := range n {
			switch {
			case r >= 'a' && r <= 'z':
				fmt.Fprintf(&b, "[%c%c]", r-'a'+'A', r)
			case r == '.':
				b.WriteString("[.]")
			default:
				b.WriteRune(r)
			}
		}
		names = append(names, b.String())
	}
	const path = `\x00"file_path":"`
	return []string{
		path + `(?:|[^"]*[/\\])(?:` + strings.Join(names, "|") + `)[/\\"]`,
		path + `[^"]*\\"`,
	}
}

// policyTOML returns the admin policy of a one-shot turn at WorkspaceWrite.
func policyTOML() string {
	var b strings.Builder
	b.WriteString("# Written by clinvoke for one run of gemini at the permission level workspace-write.\n")
	for _, p := range configPatterns() {
		fmt.Fprintf(&b, "\n[[rule]]\ntoolName = [\"write_file\", \"replace\"]\nargsPattern = '%s'\ndecision = \"deny\"\npriority = 999\ndenyMessage = %q\n", p, policyMessage)
	}
	return b.String()
}

// writePolicy writes the admin policy to a file of its own, readable by its
// owner only, and returns its path; the caller removes it after the run.
func writePolicy() (string, error) {
	f, err := os.CreateTemp("", "clinvoke-gemini-policy-*.toml")
	if err != nil {
		return "", fmt.Errorf("gemini: cannot write the policy of a workspace-write turn: %w", err)
	}
	_, werr := f.WriteString(policyTOML())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && strings.Contains(f.Name(), ",") {
		// Gemini splits --admin-policy's value at commas.
		werr = fmt.Errorf("its path %s holds a comma, which gemini reads as a list; set TMPDIR to a directory without one", f.Name())
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("gemini: cannot write the policy of a workspace-write turn: %w", werr)
	}
	return f.Name(), nil
}
