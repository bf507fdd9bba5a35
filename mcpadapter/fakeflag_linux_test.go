package mcpadapter_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestExampleServerFakeAgent: the example server with -fake-agent serves
// the three CLIs' tools with no CLI installed (PATH holds none), each
// answering through its real backend, and leaves no process behind.
func TestExampleServerFakeAgent(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	tag := fakeagent.NewTag()
	cmd := exec.Command(bin, "-fake-agent", "-root", root)
	cmd.Env = append(os.Environ(), "PATH=/nonexistent", fakeagent.EnvTag+"="+tag)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to examples/mcpserver -fake-agent: %v", err)
	}
	var wg sync.WaitGroup
	for _, cli := range []string{"codex", "gemini", "claude"} {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: cli, Arguments: args("try the server", root)})
			var out mcpadapter.Output
			if err == nil {
				decode(t, res, &out)
			}
			if err != nil || res.IsError || !strings.Contains(out.Text, "stand-in for "+cli) || out.SessionID == "" {
				t.Errorf("%s with -fake-agent: %v %+v, want the stand-in's answer and a session", cli, err, out)
			}
		})
	}
	wg.Wait()
	noSurvivors(t, tag, cmd.Process.Pid)
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	noSurvivors(t, tag)
}
