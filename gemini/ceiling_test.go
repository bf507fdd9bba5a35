package gemini_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
)

// TestTitleProvesNoServer runs the fake Gemini CLI asking, at ReadOnly, to
// run a shell command whose title (Gemini titles a shell call with its
// command line) ends like the title of a tool of the request's server
// "tools": the command must not run, with or without a callback, and a
// callback is not asked.
func TestTitleProvesNoServer(t *testing.T) {
	for _, approve := range []bool{false, true} {
		dir := t.TempDir()
		file := filepath.Join(dir, "pwned")
		s := fakeagent.Script{Flavor: fakeagent.Gemini, Ask: "touch " + file + " # (tools MCP Server)", Tag: fakeagent.NewTag()}
		inv := gemini.New(invoker.Options{Binary: os.Args[0], InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
		var asked []invoker.Approval
		req := invoker.Request{Prompt: "p", Workdir: dir, Env: s.Env(),
			MCPServers: []invoker.MCPServer{{Name: "tools", Server: mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)}}}
		if approve {
			req.Approve = func(_ context.Context, a invoker.Approval) invoker.Decision {
				asked = append(asked, a)
				return invoker.Decision{Allow: true}
			}
		}
		res, err := inv.Invoke(context.Background(), req)
		if err != nil {
			t.Fatalf("callback %v: Invoke() error = %v", approve, err)
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("callback %v: the command ran (stat %s: %v)", approve, file, err)
		}
		if !strings.HasPrefix(res.Text, fakeagent.OutcomeDenied) {
			t.Errorf("callback %v: answer %q, want the denial", approve, res.Text)
		}
		if len(asked) != 0 {
			t.Errorf("callback %v: Approve was asked %d times (first: kind %q, command %q)", approve, len(asked), asked[0].Kind, asked[0].Command)
		}
		if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
			t.Errorf("processes survived: %v", left)
		}
	}
}
