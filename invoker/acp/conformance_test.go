package acp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeacp"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// TestConformance runs the invoker contract on acp.New with the fake ACP
// agent, well-behaved and in variants that misbehave in ways a session
// must absorb: requests the client does not serve, requests for
// permission it declines, stray lines that are not JSON, modes and a
// model set through a config option.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name   string
		tweak  func(*fakeacp.Script)
		modes  map[invoker.Permission]string
		models bool
	}{
		{name: "Plain"},
		{name: "UnservedRequests", tweak: func(s *fakeacp.Script) { s.ClientRequest = "fs/read_text_file" }},
		{name: "DeclinedPermission", tweak: func(s *fakeacp.Script) {
			if s.Ask == "" && s.Edit == "" {
				// A request the session declines; with Ask or Edit,
				// the callback would be asked twice.
				s.Permission = "execute"
			}
		}},
		{name: "StrayLines", tweak: func(s *fakeacp.Script) { s.Malformed = "text" }},
		{name: "ModesAndConfigModel", tweak: func(s *fakeacp.Script) {
			s.Modes = []string{"default", "yolo"}
			s.ConfigModel = true
		}, modes: map[invoker.Permission]string{invoker.Unlimited: "yolo"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
				s := fakeacp.Script{
					SessionID: f.SessionID, Answer: f.Answer, Stream: f.Stream,
					Grandchild: f.Grandchild, Escapee: f.Escapee,
					Fail: f.Fail, Stderr: f.Stderr, ExitCode: f.ExitCode,
					HugeLine: f.HugeLine, Tool: f.Tool,
					Models:   []string{"fake-model"},
					Tag:      fakeagent.NewTag(),
					Ask:      f.Ask,
					AskCount: f.AskCount,
					Edit:     f.Edit,
					// The fake speaks as Gemini CLI: its MCP calls' ids
					// prove their server.
					AgentName: "gemini-cli",
				}
				if server, tool, ok := strings.Cut(f.CallTool, "/"); ok {
					s.MCPCall = &fakeacp.MCPCall{Server: server, Tool: tool, Args: f.ToolArgs}
				}
				opts := invoker.Options{InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond}
				if f.AnswerOverLimit {
					opts.MaxLineSize = 64 << 10
					s.AnswerSize = 2 * opts.MaxLineSize
				}
				if v.tweak != nil {
					v.tweak(&s)
				}
				a := fakeAgent(s)
				a.Modes = v.modes
				return acp.New(a, opts)
			})
		})
	}
}
