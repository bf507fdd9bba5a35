package hostconfig

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the host snippets of docs/hosts.md from Snippets(Example)")

// page is the documentation page that shows the snippets.
const page = "../../../docs/hosts.md"

// region matches one marked block of the page: its id and its content.
var region = regexp.MustCompile("(?s)<!-- hostconfig:([a-z-]+) -->\n(.*?)<!-- /hostconfig -->")

// fenced returns a snippet as the page shows it.
func fenced(s Snippet) string { return "```" + s.Lang + "\n" + s.Text + "```\n" }

// TestPage checks that every host snippet appears in docs/hosts.md exactly
// once, as Snippets(Example) renders it, and that the page marks no block
// that has no snippet. With -update it rewrites the marked blocks.
func TestPage(t *testing.T) {
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Snippet{}
	for _, s := range Snippets(Example) {
		want[s.ID] = s
	}
	seen := map[string]int{}
	got := region.ReplaceAllFunc(doc, func(m []byte) []byte {
		sub := region.FindSubmatch(m)
		id, body := string(sub[1]), string(sub[2])
		seen[id]++
		s, ok := want[id]
		switch {
		case !ok:
			t.Errorf("%s marks a block %q that package hostconfig does not render; remove the markers or add the snippet", page, id)
			return m
		case body != fenced(s):
			if !*update {
				t.Errorf("%s: block %q differs from what Snippets(Example) renders; run go generate ./internal/testkit/hostconfig\n got:\n%s\nwant:\n%s", page, id, body, fenced(s))
			}
		}
		return []byte(fmt.Sprintf("<!-- hostconfig:%s -->\n%s<!-- /hostconfig -->", id, fenced(s)))
	})
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s has %d blocks marked <!-- hostconfig:%s -->, want 1 (add the marker pair where the snippet belongs)", page, seen[id], id)
		}
	}
	if *update && !t.Failed() && !bytes.Equal(got, doc) {
		if err := os.WriteFile(page, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the host snippets in %s", page)
	}
}

// TestConfigsParse checks that the JSON configurations are valid JSON
// whatever the values hold, and that the TOML one quotes its strings the
// same way.
func TestConfigsParse(t *testing.T) {
	v := Values{Command: `/opt/my "server"/mcpserver`, Root: `C:\src`, Transcript: "~/t <1>.jsonl"}
	for _, h := range Hosts {
		text := h.Config(v)
		if h.ConfigLang == "json" {
			var cfg struct {
				MCPServers map[string]struct {
					Command string   `json:"command"`
					Args    []string `json:"args"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(text), &cfg); err != nil {
				t.Errorf("%s: Config() is not JSON: %v\n%s", h.Name, err, text)
				continue
			}
			srv := cfg.MCPServers[ServerName]
			if srv.Command != v.Command || strings.Join(srv.Args, "|") != strings.Join(h.Args(v), "|") {
				t.Errorf("%s: Config() decodes to %+v, want command %q and args %q", h.Name, srv, v.Command, h.Args(v))
			}
		}
		for _, s := range []string{quote(v.Command), quote(v.Root), quote(v.Transcript)} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: Config() lacks %s:\n%s", h.Name, s, text)
			}
		}
	}
}

func TestCommandLine(t *testing.T) {
	for _, h := range Hosts {
		line := h.CommandLine()
		if !strings.HasPrefix(line, h.Name+" ") || !strings.Contains(line, "'"+h.Prompt()+"'") {
			t.Errorf("%s: CommandLine() = %q, want the host's name first and the prompt quoted", h.Name, line)
		}
	}
	if got, want := shellQuote("it's"), `'it'\''s'`; got != want {
		t.Errorf("shellQuote(%q) = %s, want %s", "it's", got, want)
	}
}

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ host, cli, name, ns string }{
		{"claude", "codex", "mcp__clinvoke__codex", ""},
		{"codex", "claude", "claude", "mcp__clinvoke"},
		{"gemini", "claude", "mcp_clinvoke_claude", ""},
	} {
		for _, h := range Hosts {
			if h.Name != tc.host {
				continue
			}
			if name, ns := h.ToolName(tc.cli); name != tc.name || ns != tc.ns {
				t.Errorf("%s.ToolName(%q) = %q, %q; want %q, %q", tc.host, tc.cli, name, ns, tc.name, tc.ns)
			}
		}
	}
}
