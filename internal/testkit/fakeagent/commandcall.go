package fakeagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
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
	Relay    string         `json:"relay,omitempty"`
}

// commandCall runs a command, in a session of its own, that calls tool
// of srv with args (through HTTP_PROXY if viaProxy, through the relay
// at relay if not empty), and returns its outcome: the tool's text, or
// OutcomeToolFailed and the error.
func commandCall(ctx context.Context, srv mcpServer, tool string, args map[string]any, viaProxy bool, relay string) string {
	exe, err := os.Executable()
	if err != nil {
		return OutcomeToolFailed + ": " + err.Error()
	}
	b, _ := json.Marshal(commandCallArgs{Server: srv, Tool: tool, Args: args, ViaProxy: viaProxy, Relay: relay})
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
	if a.ViaProxy || a.Relay != "" {
		u, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || u.Host == "" {
			fmt.Fprintf(os.Stderr, "no proxy in HTTP_PROXY (%v)\n", err)
			return 1
		}
		// Go's environment proxy never takes a loopback URL: name it.
		http.DefaultTransport = &http.Transport{Proxy: http.ProxyURL(u)}
		if a.Relay != "" {
			http.DefaultTransport = &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return dialRelay(ctx, u.Host, a.Relay, addr)
			}}
		}
	}
	var c mcpClients
	defer c.close()
	res, err := c.call(context.Background(), a.Server, a.Tool, a.Args)
	fmt.Println(strings.ReplaceAll(res.outcome(err), "\n", " "))
	return 0
}

// dialRelay opens a tunnel through the proxy at proxy to the relay at
// relay, and asks the relay for target on it.
func dialRelay(ctx context.Context, proxy, relay, target string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", relay, relay)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("the proxy answered %s to CONNECT %s", res.Status, relay)
	}
	if err == nil && br.Buffered() != 0 {
		err = fmt.Errorf("the proxy sent bytes past its answer to CONNECT %s", relay)
	}
	if err == nil {
		_, err = fmt.Fprintf(c, "%s\n", target)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
