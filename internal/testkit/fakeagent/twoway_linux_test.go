package fakeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A twoWayClient drives one session protocol of the fake as its client:
// it opens the session, starts turns, and reads each turn to its end,
// answering the fake's requests with the test's replies.
type twoWayClient struct {
	t     *testing.T
	proto twoWayProto
	r     *agentRun
	pw    *os.File
	dir   string
	// lastTurnID is the id of Codex's turn in progress.
	lastTurnID string
	// lines are the lines of the last turn.
	lines []string
}

// A twoWayProto is what a test needs of one protocol.
type twoWayProto struct {
	flavor string
	args   []string
	open   []string
	turn   func(n int) string
	ends   func(l []byte) bool
	// request returns the kind of request l is ("approval", "mcp" for
	// Claude Code's mcp_message, "" for none) and its id.
	request func(l []byte) (kind string, id json.RawMessage)
	// allow and deny spell the answers to an approval request.
	allow, allowSession, deny func(id json.RawMessage) string
	// text extracts the answer's text from a line, if it holds some.
	text func(l []byte) string
}

func lineHas(l []byte, s string) bool { return strings.Contains(string(l), s) }

func twoWayProtos(mcpArgs map[string][]string, mcpOpen map[string]string) []twoWayProto {
	return []twoWayProto{{
		flavor: Claude,
		args:   append([]string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--permission-prompt-tool", "stdio"}, mcpArgs[Claude]...),
		turn: func(n int) string {
			return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":"turn %d"}}`, n)
		},
		ends: func(l []byte) bool { return lineHas(l, `"type":"result"`) },
		request: func(l []byte) (string, json.RawMessage) {
			var m struct {
				Type      string          `json:"type"`
				RequestID json.RawMessage `json:"request_id"`
				Request   struct {
					Subtype string `json:"subtype"`
				} `json:"request"`
			}
			json.Unmarshal(l, &m)
			switch {
			case m.Type != "control_request":
				return "", nil
			case m.Request.Subtype == "can_use_tool":
				return "approval", m.RequestID
			case m.Request.Subtype == "mcp_message":
				return "mcp", m.RequestID
			}
			return "", nil
		},
		allow: func(id json.RawMessage) string {
			return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) + `,"response":{"behavior":"allow","updatedInput":{"command":"cd @DIR@ && touch changed"}}}}`
		},
		allowSession: func(id json.RawMessage) string {
			return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) + `,"response":{"behavior":"allow","updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Bash"}],"behavior":"allow","destination":"session"}]}}}`
		},
		deny: func(id json.RawMessage) string {
			return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) + `,"response":{"behavior":"deny","message":"not today"}}}`
		},
		text: func(l []byte) string {
			var m struct {
				Type   string `json:"type"`
				Result string `json:"result"`
			}
			json.Unmarshal(l, &m)
			if m.Type == "result" {
				return m.Result
			}
			return ""
		},
	}, {
		flavor: Codex,
		args:   append([]string{"app-server"}, mcpArgs[Codex]...),
		open: []string{
			`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"test","version":"1"}}}`,
			`{"method":"initialized"}`,
			`{"id":2,"method":"thread/start","params":{"approvalPolicy":"untrusted"` + mcpOpen[Codex] + `}}`,
		},
		turn: func(n int) string {
			return fmt.Sprintf(`{"id":%d,"method":"turn/start","params":{"threadId":"t","input":[{"type":"text","text":"turn %d"}]}}`, 10+n, n)
		},
		ends: func(l []byte) bool { return lineHas(l, `"method":"turn/completed"`) },
		request: func(l []byte) (string, json.RawMessage) {
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			json.Unmarshal(l, &m)
			if m.Method == "item/commandExecution/requestApproval" || m.Method == "item/fileChange/requestApproval" {
				return "approval", m.ID
			}
			return "", nil
		},
		allow: func(id json.RawMessage) string { return `{"id":` + string(id) + `,"result":{"decision":"accept"}}` },
		allowSession: func(id json.RawMessage) string {
			return `{"id":` + string(id) + `,"result":{"decision":"acceptForSession"}}`
		},
		deny: func(id json.RawMessage) string { return `{"id":` + string(id) + `,"result":{"decision":"decline"}}` },
		text: func(l []byte) string {
			var m struct {
				Method string `json:"method"`
				Params struct {
					Item struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"item"`
				} `json:"params"`
			}
			json.Unmarshal(l, &m)
			if m.Method == "item/completed" && m.Params.Item.Type == "agentMessage" {
				return m.Params.Item.Text
			}
			return ""
		},
	}, {
		flavor: Gemini,
		args:   []string{"--acp"},
		open: []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[` + mcpOpen[Gemini] + `]}}`,
		},
		turn: func(n int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"turn %d"}]}}`, 10+n, n)
		},
		ends: func(l []byte) bool { return lineHas(l, `"stopReason"`) },
		request: func(l []byte) (string, json.RawMessage) {
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			json.Unmarshal(l, &m)
			if m.Method == "session/request_permission" {
				return "approval", m.ID
			}
			return "", nil
		},
		allow: func(id json.RawMessage) string {
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}`
		},
		allowSession: func(id json.RawMessage) string {
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"outcome":{"outcome":"selected","optionId":"proceed_always"}}}`
		},
		deny: func(id json.RawMessage) string {
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"outcome":{"outcome":"selected","optionId":"cancel"}}}`
		},
		text: func(l []byte) string {
			var m struct {
				Params struct {
					Update struct {
						SessionUpdate string `json:"sessionUpdate"`
						Content       struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"update"`
				} `json:"params"`
			}
			json.Unmarshal(l, &m)
			if m.Params.Update.SessionUpdate == "agent_message_chunk" {
				return m.Params.Update.Content.Text
			}
			return ""
		},
	}}
}

// startTwoWay starts the fake for p with s in a fresh working directory,
// and writes p's opening lines.
func startTwoWay(t *testing.T, p twoWayProto, s Script) *twoWayClient {
	t.Helper()
	s.Flavor = p.flavor
	dir := t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := startIn(t, dir, s, pr, p.args...)
	pr.Close()
	t.Cleanup(func() { pw.Close() })
	c := &twoWayClient{t: t, proto: p, r: r, pw: pw, dir: dir}
	for _, l := range p.open {
		c.write(l)
	}
	return c
}

func (c *twoWayClient) write(l string) {
	c.t.Helper()
	if _, err := c.pw.WriteString(l + "\n"); err != nil {
		c.t.Fatal(err)
	}
}

// turn runs turn n, answering each request with answer (kind, id, line),
// and returns the answer's text and the kinds of the requests seen.
func (c *twoWayClient) turn(n int, answer func(kind string, id json.RawMessage, l []byte) string) (string, []string) {
	c.t.Helper()
	c.write(c.proto.turn(n))
	var text strings.Builder
	var kinds []string
	c.lines = nil
	for {
		l := c.r.next()
		c.lines = append(c.lines, string(l))
		if kind, id := c.proto.request(l); kind != "" {
			kinds = append(kinds, kind)
			if reply := answer(kind, id, l); reply != "" {
				c.write(strings.ReplaceAll(reply, "@DIR@", c.dir))
			}
		}
		var started struct {
			Result struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			} `json:"result"`
		}
		if json.Unmarshal(l, &started) == nil && started.Result.Turn.ID != "" {
			c.lastTurnID = started.Result.Turn.ID
		}
		text.WriteString(c.proto.text(l))
		if c.proto.ends(l) {
			return text.String(), kinds
		}
	}
}

// exists reports whether the working directory holds name.
func (c *twoWayClient) exists(name string) bool {
	_, err := os.Stat(filepath.Join(c.dir, name))
	return err == nil
}

// interrupt returns the line that interrupts the turn in progress.
func (c *twoWayClient) interrupt() string {
	switch c.proto.flavor {
	case Claude:
		return `{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}`
	case Codex:
		return `{"id":99,"method":"turn/interrupt","params":{"threadId":"t","turnId":"` + c.lastTurnID + `"}}`
	}
	return `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`
}

// close ends the fake's input and checks that it exits with status want
// and that none of its processes is left.
func (c *twoWayClient) close(want int) {
	c.t.Helper()
	c.pw.Close()
	c.r.rest()
	if code := c.r.wait(); code != want {
		c.t.Errorf("the fake exited %d at the end of its input, want %d; stderr: %s", code, want, c.r.stderrText())
	}
	if left := Survivors(c.r.s.Tag); len(left) > 0 {
		c.t.Errorf("processes of the fake alive after it exited: %v", left)
	}
}

// TestTwoWayApproval checks, for the three session protocols, that Ask
// asks in the CLI's format before the answer; that a denial leaves the
// command unrun and the answer says so; that an allow runs it (Claude
// Code: the changed input); and that an allow for the session is not
// asked again on the next turn.
func TestTwoWayApproval(t *testing.T) {
	t.Parallel()
	for _, p := range twoWayProtos(nil, nil) {
		t.Run(p.flavor, func(t *testing.T) {
			t.Parallel()
			t.Run("deny", func(t *testing.T) {
				t.Parallel()
				c := startTwoWay(t, p, Script{Ask: "touch ran"})
				text, kinds := c.turn(1, func(kind string, id json.RawMessage, _ []byte) string { return p.deny(id) })
				if len(kinds) != 1 || kinds[0] != "approval" {
					t.Errorf("requests = %v, want one approval", kinds)
				}
				want := "denied"
				if p.flavor == Claude {
					want = "denied: not today"
				}
				if text != want {
					t.Errorf("answer = %q, want %q", text, want)
				}
				if c.exists("ran") {
					t.Error("the denied command ran")
				}
			})
			t.Run("allow", func(t *testing.T) {
				t.Parallel()
				c := startTwoWay(t, p, Script{Ask: "touch ran", Answer: "Done."})
				text, _ := c.turn(1, func(kind string, id json.RawMessage, l []byte) string {
					if !lineHas(l, "touch ran") {
						t.Errorf("the request %s does not name the command", l)
					}
					return p.allow(id)
				})
				if text != "approved\nDone." {
					t.Errorf("answer = %q, want %q", text, "approved\nDone.")
				}
				name := "ran"
				if p.flavor == Claude {
					name = "changed" // the updated input ran instead
				}
				if !c.exists(name) {
					t.Errorf("the allowed command did not create %q", name)
				}
			})
			t.Run("session", func(t *testing.T) {
				t.Parallel()
				c := startTwoWay(t, p, Script{Ask: "touch ran"})
				_, kinds := c.turn(1, func(kind string, id json.RawMessage, _ []byte) string { return p.allowSession(id) })
				if len(kinds) != 1 {
					t.Errorf("turn 1: requests %v, want one", kinds)
				}
				text, kinds := c.turn(2, func(kind string, id json.RawMessage, _ []byte) string { return p.deny(id) })
				if len(kinds) != 0 || text != "approved" {
					t.Errorf("turn 2: requests %v, answer %q; want none and approved", kinds, text)
				}
			})
			t.Run("interrupt", func(t *testing.T) {
				t.Parallel()
				c := startTwoWay(t, p, Script{Ask: "touch ran"})
				text, _ := c.turn(1, func(string, json.RawMessage, []byte) string { return c.interrupt() })
				if text != "" || c.exists("ran") {
					t.Errorf("an interrupted turn answered %q, ran %v; want nothing", text, c.exists("ran"))
				}
				// The session goes on.
				text, _ = c.turn(2, func(kind string, id json.RawMessage, _ []byte) string { return p.allow(id) })
				if !strings.HasPrefix(text, "approved") {
					t.Errorf("turn after the interrupt answered %q, want approved", text)
				}
			})
		})
	}
}

// TestTwoWayCodexNever checks that under approval policy never the
// app-server runs the command without asking.
func TestTwoWayCodexNever(t *testing.T) {
	t.Parallel()
	p := twoWayProtos(nil, nil)[1]
	p.open[2] = `{"id":2,"method":"thread/start","params":{"approvalPolicy":"never"}}`
	c := startTwoWay(t, p, Script{Ask: "touch ran"})
	text, kinds := c.turn(1, func(string, json.RawMessage, []byte) string { return "" })
	if len(kinds) != 0 || text != "approved" || !c.exists("ran") {
		t.Errorf("requests %v, answer %q, ran %v; want none, approved, true", kinds, text, c.exists("ran"))
	}
}

// echoServer returns an MCP server with a tool "echo" that answers
// "echo: " and its text argument, and records the arguments it saw.
func echoServer(seen *sync.Map) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes its text."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		seen.Store(a.Text, true)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	return srv
}

// bearerServer serves srv over streamable HTTP behind a bearer token.
func bearerServer(t *testing.T, srv *mcp.Server, token string) string {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	// After the fake's cleanup, registered later: the fake, killed, does
	// not end its MCP session, so the server's are closed here.
	t.Cleanup(func() {
		ts.Close()
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	return ts.URL + "/mcp/echo"
}

// TestTwoWayToolHTTP checks that each CLI's fake calls a tool of an MCP
// server over streamable HTTP with the headers configured the CLI's way:
// Claude Code's --mcp-config, Codex's thread/start config, ACP's
// session/new mcpServers; and that the answer carries the result.
func TestTwoWayToolHTTP(t *testing.T) {
	t.Parallel()
	var seen sync.Map
	url := bearerServer(t, echoServer(&seen), "secret")
	claudeCfg := `{"mcpServers":{"echo":{"type":"http","url":"` + url + `","headers":{"Authorization":"Bearer secret"}}}}`
	protos := twoWayProtos(
		map[string][]string{Claude: {"--mcp-config", claudeCfg, "--allowedTools", "mcp__echo"}},
		map[string]string{
			Codex:  `,"config":{"mcp_servers.echo.url":"` + url + `","mcp_servers.echo.http_headers":{"Authorization":"Bearer secret"},"mcp_servers.echo.default_tools_approval_mode":"approve"}`,
			Gemini: `{"type":"http","name":"echo","url":"` + url + `","headers":[{"name":"Authorization","value":"Bearer secret"}]}`,
		})
	for _, p := range protos {
		t.Run(p.flavor, func(t *testing.T) {
			t.Parallel()
			arg := "hi from " + p.flavor
			args, _ := json.Marshal(map[string]string{"text": arg})
			c := startTwoWay(t, p, Script{CallTool: "echo/echo", ToolArgs: args})
			text, kinds := c.turn(1, func(kind string, id json.RawMessage, _ []byte) string { return p.allow(id) })
			if text != "echo: "+arg {
				t.Errorf("answer = %q, want the tool's result %q (requests %v)", text, "echo: "+arg, kinds)
			}
			if _, ok := seen.Load(arg); !ok {
				t.Errorf("the tool did not see the argument %q", arg)
			}
		})
	}
}

// TestTwoWayCodexBearerEnv checks that Codex's fake reads the token of
// bearer_token_env_var from its environment, with -c options.
func TestTwoWayCodexBearerEnv(t *testing.T) {
	var seen sync.Map
	url := bearerServer(t, echoServer(&seen), "envsecret")
	t.Setenv("FAKEAGENT_TEST_TOKEN", "envsecret")
	p := twoWayProtos(map[string][]string{Codex: {
		"-c", `mcp_servers.echo.url="` + url + `"`,
		"-c", `mcp_servers.echo={bearer_token_env_var="FAKEAGENT_TEST_TOKEN", default_tools_approval_mode="approve", url="` + url + `"}`,
	}}, nil)[1]
	c := startTwoWay(t, p, Script{CallTool: "echo/echo", ToolArgs: json.RawMessage(`{"text":"env"}`)})
	if text, _ := c.turn(1, func(string, json.RawMessage, []byte) string { return "" }); text != "echo: env" {
		t.Errorf("answer = %q, want %q", text, "echo: env")
	}
}

// TestTwoWayClaudeInband checks that Claude Code's fake speaks MCP to an
// SDK server of --mcp-config over mcp_message control requests
// (two clients at once, each initialize, notifications/initialized and
// tools/list; then tools/list and tools/call, only these on later turns), asks can_use_tool for a tool its flags do not
// allow, and cancels a call an interrupt ends with notifications/cancelled.
func TestTwoWayClaudeInband(t *testing.T) {
	t.Parallel()
	p := twoWayProtos(map[string][]string{Claude: {"--mcp-config", `{"mcpServers":{"go":{"type":"sdk","name":"go"}}}`}}, nil)[0]
	c := startTwoWay(t, p, Script{CallTool: "go/echo", ToolArgs: json.RawMessage(`{"text":"in band"}`)})
	var methods []string
	hold := false // leave tools/call unanswered
	answer := func(kind string, id json.RawMessage, l []byte) string {
		if kind == "approval" {
			if !lineHas(l, `"tool_name":"mcp__go__echo"`) {
				t.Errorf("permission request %s, want one for mcp__go__echo", l)
			}
			return p.allowSession(id)
		}
		var m struct {
			Request struct {
				ServerName string `json:"server_name"`
				Message    struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Arguments map[string]string `json:"arguments"`
					} `json:"params"`
				} `json:"message"`
			} `json:"request"`
		}
		json.Unmarshal(l, &m)
		msg := m.Request.Message
		methods = append(methods, msg.Method)
		if m.Request.ServerName != "go" {
			t.Errorf("mcp_message for server %q, want go", m.Request.ServerName)
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"go","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			if hold {
				return `{"type":"control_request","request_id":"int-1","request":{"subtype":"interrupt"}}`
			}
			result = `{"content":[{"type":"text","text":"echo: ` + msg.Params.Arguments["text"] + `"}]}`
		default:
			result = `{}`
		}
		reply := `{"jsonrpc":"2.0","result":` + result
		if len(msg.ID) > 0 {
			reply += `,"id":` + string(msg.ID)
		}
		return `{"type":"control_response","response":{"subtype":"success","request_id":` + string(id) + `,"response":{"mcp_response":` + reply + `}}}}`
	}
	text, _ := c.turn(1, answer)
	if text != "echo: in band" {
		t.Errorf("turn 1 answer = %q, want %q", text, "echo: in band")
	}
	// Two clients open the server at once, as Claude Code's do.
	if len(methods) != 8 || strings.Join(methods[6:], " ") != "tools/list tools/call" {
		t.Errorf("turn 1 MCP methods = %v, want two clients' handshakes and lists, then tools/list tools/call", methods)
	} else if opening := slices.Sorted(slices.Values(methods[:6])); strings.Join(opening, " ") !=
		"initialize initialize notifications/initialized notifications/initialized tools/list tools/list" {
		t.Errorf("turn 1 opening MCP methods = %v, want two of initialize, notifications/initialized, tools/list", methods[:6])
	}
	methods = nil
	if text, _ = c.turn(2, answer); text != "echo: in band" {
		t.Errorf("turn 2 answer = %q", text)
	}
	if strings.Join(methods, " ") != "tools/list tools/call" {
		t.Errorf("turn 2 MCP methods = %v, want tools/list tools/call", methods)
	}
	methods = nil
	hold = true
	if text, _ = c.turn(3, answer); text != "" {
		t.Errorf("interrupted turn 3 answered %q", text)
	}
	if strings.Join(methods, " ") != "tools/list tools/call notifications/cancelled" {
		t.Errorf("turn 3 MCP methods = %v, want the call cancelled", methods)
	}
}
