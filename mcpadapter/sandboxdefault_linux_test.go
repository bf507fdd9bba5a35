//go:build linux

package mcpadapter_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestExampleServerDefaultSandbox: examples/mcpserver started with its
// default flags (no -sandbox: "available") runs a tool call inside the
// kernel's sandbox where the host holds one, and the call's structured
// result says what held it (sandbox) and which connections the network
// rules saw. Where the host has no Landlock the result says none held it.
func TestExampleServerDefaultSandbox(t *testing.T) {
	bin := buildServer(t)
	_, probeErr := sandbox.Probe()
	if probeErr != nil && os.Getenv("CI") == "true" {
		t.Fatalf("CI runs on a kernel with Landlock: %v", probeErr)
	}
	root := t.TempDir()
	s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: "held", Tag: fakeagent.NewTag()}
	cmd := exec.Command(bin, "-cli", "codex", "-codex-bin", os.Args[0], "-root", root,
		"-transcript", filepath.Join(t.TempDir(), "transcript.jsonl"))
	cmd.Env = append(os.Environ(), s.Env()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to examples/mcpserver: %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", root)})
	if err != nil {
		t.Fatalf("CallTool() error = %v", err)
	}
	var out mcpadapter.Output
	decode(t, res, &out)
	t.Logf("sandbox %q, connections %+v", out.Sandbox, out.Connections)
	switch {
	case res.IsError || out.Text != "held":
		t.Errorf("IsError %v, output %+v; want the fake's answer", res.IsError, out)
	case probeErr == nil && !strings.HasPrefix(out.Sandbox, "filesystem"):
		t.Errorf("sandbox %q, want the kernel's (filesystem…) by the server's default", out.Sandbox)
	case probeErr != nil && out.Sandbox != "":
		t.Errorf("sandbox %q on a host without Landlock, want none", out.Sandbox)
	case strings.Contains(out.Sandbox, "network") != (out.Connections != nil) && len(out.Connections) > 0:
		t.Errorf("connections %+v with sandbox %q: the network rules did not hold", out.Connections, out.Sandbox)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	if t.Failed() {
		t.Logf("server stderr:\n%s", stderr.String())
	}
	noSurvivors(t, s.Tag)
}
