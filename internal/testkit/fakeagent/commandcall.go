package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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
	Server   mcpServer      `json:"server"`
	Tool     string         `json:"tool"`
	Args     map[string]any `json:"args"`
	ViaProxy bool           `json:"via_proxy,omitempty"`
}

// commandCall runs a command, in a session of its own, that calls tool
// of srv with args (through HTTP_PROXY if viaProxy), and returns its
// outcome: the tool's text, or OutcomeToolFailed and the error.
func commandCall(ctx context.Context, srv mcpServer, tool string, args map[string]any, viaProxy bool) string {
	exe, err := os.Executable()
	if err != nil {
		return OutcomeToolFailed + ": " + err.Error()
	}
	b, _ := json.Marshal(commandCallArgs{Server: srv, Tool: tool, Args: args, ViaProxy: viaProxy})
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
	if a.ViaProxy {
		u, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || u.Host == "" {
			fmt.Fprintf(os.Stderr, "no proxy in HTTP_PROXY (%v)\n", err)
			return 1
		}
		// Go's environment proxy never takes a loopback URL: name it.
		http.DefaultTransport = &http.Transport{Proxy: http.ProxyURL(u)}
	}
	var c mcpClients
	defer c.close()
	res, err := c.call(context.Background(), a.Server, a.Tool, a.Args)
	fmt.Println(strings.ReplaceAll(res.outcome(err), "\n", " "))
	return 0
}
