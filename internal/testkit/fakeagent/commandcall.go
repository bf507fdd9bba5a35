package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// roleCommandCall is a command of the fake (Script.CommandCallsTool)
// that calls an MCP server's tool over HTTP itself.
const roleCommandCall = "command-call"

// envCommandCall holds what the command calls: a commandCallArgs as JSON.
const envCommandCall = "CLINVOKE_FAKEAGENT_COMMAND_CALL"

// commandCallArgs is the call a command makes.
type commandCallArgs struct {
	Server mcpServer      `json:"server"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
}

// commandCall runs a command, in a session of its own, that calls tool
// of srv with args, and returns its outcome: the tool's text, or
// OutcomeToolFailed and the error.
func commandCall(ctx context.Context, srv mcpServer, tool string, args map[string]any) string {
	exe, err := os.Executable()
	if err != nil {
		return OutcomeToolFailed + ": " + err.Error()
	}
	b, _ := json.Marshal(commandCallArgs{Server: srv, Tool: tool, Args: args})
	cmd := helperCommand(exe, roleCommandCall, nil)
	cmd.Env = append(cmd.Env, envCommandCall+"="+string(b))
	cmd.SysProcAttr = newSession()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("%s: %v: %s", OutcomeToolFailed, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String())
}

// runCommandCall is the command's main function: it prints the outcome
// of its call.
func runCommandCall() int {
	var a commandCallArgs
	if err := json.Unmarshal([]byte(os.Getenv(envCommandCall)), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var c mcpClients
	defer c.close()
	res, err := c.call(context.Background(), a.Server, a.Tool, a.Args)
	fmt.Println(strings.ReplaceAll(res.outcome(err), "\n", " "))
	return 0
}
