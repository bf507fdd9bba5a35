package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/acp"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
)

// Gemini CLI through its ACP mode: the agent's command line, its session
// modes for the permission levels, and where to install it. The first
// event of a session is the agent's answer to initialize, which says what
// the agent can do.
//
// A scripted stand-in for Gemini CLI answers here (invokertest.Agent); in
// a program, acp.New(gemini) takes the place of acp.New(gemini,
// stand.Options()).
func Example() {
	gemini := acp.Agent{
		Name:    "gemini",
		Command: []string{"gemini", "--acp"},
		// Only Unlimited gets a mode that asks less: at WorkspaceWrite
		// Gemini asks before each edit, and the session judges its paths.
		Modes:       map[invoker.Permission]string{invoker.Unlimited: "yolo"},
		InstallHint: "npm install -g @google/gemini-cli",
	}
	stand := invokertest.Agent{CLI: "gemini", SessionID: "s-1", Tool: true, Answer: "It prints hello.", Chunks: 2}
	inv := acp.New(gemini, stand.Options())

	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:     "What does `echo hello` print?",
		Workdir:    os.TempDir(),
		Permission: invoker.Unlimited,
		OnEvent: func(ev invoker.Event) {
			switch ev.Kind {
			case invoker.KindRaw:
				var init struct {
					Result struct {
						ProtocolVersion   int `json:"protocolVersion"`
						AgentCapabilities struct {
							LoadSession bool `json:"loadSession"`
						} `json:"agentCapabilities"`
					} `json:"result"`
				}
				if json.Unmarshal(ev.Raw, &init) == nil && init.Result.ProtocolVersion > 0 {
					fmt.Println(ev.SessionID, "protocol", init.Result.ProtocolVersion, "loadSession", init.Result.AgentCapabilities.LoadSession)
				}
			case invoker.KindToolCall, invoker.KindToolResult:
				fmt.Println(ev.SessionID, ev.Kind, ev.Tool.Name)
			case invoker.KindMessage:
				fmt.Printf("%s %s %q\n", ev.SessionID, ev.Kind, ev.Text)
			default:
				fmt.Println(ev.SessionID, ev.Kind)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("answer %q\n", res.Text)
	// Output:
	// s-1 protocol 1 loadSession true
	// s-1 session
	// s-1 tool_call execute
	// s-1 tool_result execute
	// s-1 message "It prints hello."
	// s-1 usage
	// s-1 done
	// answer "It prints hello."
}
