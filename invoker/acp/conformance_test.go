package acp_test

import (
	"testing"
	"time"

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
		tweak  func(*fakeagent.Script)
		modes  map[invoker.Permission]string
		models bool
	}{
		{name: "Plain"},
		{name: "UnservedRequests", tweak: func(s *fakeagent.Script) { s.ACP.ClientRequest = "fs/read_text_file" }},
		{name: "DeclinedPermission", tweak: func(s *fakeagent.Script) {
			if s.Ask == "" && s.Edit == "" {
				// A request the session declines; with Ask or Edit,
				// the callback would be asked twice.
				s.ACP.Permission = "execute"
			}
		}},
		{name: "StrayLines", tweak: func(s *fakeagent.Script) { s.ACP.Break = "text" }},
		{name: "ModesAndConfigModel", tweak: func(s *fakeagent.Script) {
			s.ACP.Modes = []string{"default", "yolo"}
			s.ACP.ConfigModel = true
		}, modes: map[invoker.Permission]string{invoker.Unlimited: "yolo"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			invokertest.Run(t, func(t *testing.T, f invokertest.Fake) invoker.Invoker {
				// The case's agent, as invokertest's Agent scripts it,
				// speaking ACP as Gemini CLI does: its MCP calls' ids
				// prove their server.
				a, opts := f.Agent(fakeagent.ACP)
				s := fakeagent.Agent(a).Script()
				s.ACP.Models, s.ACP.AgentName = []string{"fake-model"}, "gemini-cli"
				s.Tag = fakeagent.NewTag()
				if v.tweak != nil {
					v.tweak(&s)
				}
				agent := fakeAgent(s)
				agent.Modes = v.modes
				return acp.New(agent, invoker.Options{InterruptGrace: 500 * time.Millisecond, TerminateGrace: 500 * time.Millisecond}, opts)
			})
		})
	}
}
