package fakeacp

import (
	"bufio"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

// obj is a JSON object whose keys keep their order.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// rpc is one JSON-RPC message the client writes.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// agent is one run of the fake.
type agent struct {
	s       *Script
	writeMu sync.Mutex

	mu      sync.Mutex
	sid     string
	mode    string
	model   string
	authed  bool
	busy    bool
	intr    chan struct{} // closed by session/cancel
	turns   int
	waiting map[string]chan *rpc // the fake's own requests, by id
	nextID  int
	servers []mcpServer     // session/new's mcpServers
	cwd     string          // session/new's cwd
	always  map[string]bool // MCP servers and tools allowed for the session
}

func run(s *Script) int {
	if s.Stderr != "" {
		os.Stderr.WriteString(s.Stderr)
	}
	if err := startHelpers(s); err != nil {
		fmt.Fprintln(os.Stderr, "fakeacp:", err)
		return 2
	}
	a := &agent{s: s, sid: s.SessionID, waiting: make(map[string]chan *rpc)}
	if a.sid == "" {
		a.sid = "fakeacp-" + randHex(8)
	}
	if len(s.Modes) > 0 {
		a.mode = s.Modes[0]
	}
	if len(s.Models) > 0 {
		a.model = s.Models[0]
	}
	var transcript io.Writer = io.Discard
	if s.Transcript != "" {
		f, err := os.OpenFile(s.Transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeacp:", err)
			return 2
		}
		defer f.Close()
		transcript = f
	}
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			transcript.Write(line)
			var m rpc
			if json.Unmarshal(line, &m) == nil {
				a.handle(&m)
			}
		}
		if err != nil {
			return 0 // end of input: the end of the conversation
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// emit writes one message with one write call.
func (a *agent) emit(m any) {
	b, _ := json.Marshal(m)
	a.writeRaw(b)
}

func (a *agent) writeRaw(b []byte) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func (a *agent) reply(id json.RawMessage, res any) {
	a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"result", res}})
}

func (a *agent) fail(id json.RawMessage, code int, msg string, data any) {
	e := obj{{"code", code}, {"message", msg}}
	if data != nil {
		e = append(e, kv{"data", data})
	}
	a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"error", e}})
}

func (a *agent) update(u obj) {
	a.emit(obj{{"jsonrpc", "2.0"}, {"method", "session/update"}, {"params", obj{{"sessionId", a.sid}, {"update", u}}}})
}

func (a *agent) chunk(kind, text string) {
	a.update(obj{{"sessionUpdate", kind}, {"content", obj{{"type", "text"}, {"text", text}}}})
}

// ask sends a request of the fake's and returns the channel of its answer.
func (a *agent) ask(method string, params any) <-chan *rpc {
	a.mu.Lock()
	a.nextID++
	id := fmt.Sprintf("fake-%d", a.nextID)
	ch := make(chan *rpc, 1)
	a.waiting[id] = ch
	a.mu.Unlock()
	a.emit(obj{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}})
	return ch
}

func (a *agent) handle(m *rpc) {
	s := a.s
	if m.Method == "" {
		var id string
		json.Unmarshal(m.ID, &id)
		a.mu.Lock()
		ch := a.waiting[id]
		delete(a.waiting, id)
		a.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
		ModelID   string `json:"modelId"`
		ConfigID  string `json:"configId"`
		Value     string `json:"value"`
		MethodID  string `json:"methodId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
		MCPServers []mcpServer `json:"mcpServers"`
		Cwd        string      `json:"cwd"`
	}
	json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		if s.SilentInit {
			return
		}
		v := s.ProtocolVersion
		if v == 0 {
			v = 1
		}
		var methods []obj
		for _, am := range s.AuthMethods {
			o := obj{{"id", am.ID}, {"name", "Method " + am.ID}}
			if am.Type != "" {
				var vars []obj
				for _, name := range am.Vars {
					vars = append(vars, obj{{"name", name}})
				}
				o = append(o, kv{"type", am.Type}, kv{"vars", vars})
			}
			methods = append(methods, o)
		}
		if methods == nil {
			methods = []obj{}
		}
		a.reply(m.ID, obj{{"protocolVersion", v},
			{"agentCapabilities", obj{{"loadSession", !s.NoLoadSession}, {"promptCapabilities", obj{{"image", false}}},
				{"mcpCapabilities", obj{{"http", !s.NoMCPHTTP}, {"sse", false}}}}},
			{"agentInfo", obj{{"name", cmp.Or(s.AgentName, "fakeacp")}, {"version", "1.0.0"}}},
			{"authMethods", methods}})
	case "authenticate":
		for _, am := range s.AuthMethods {
			if am.ID == p.MethodID {
				a.mu.Lock()
				a.authed = true
				a.mu.Unlock()
				a.reply(m.ID, obj{})
				return
			}
		}
		a.fail(m.ID, -32602, "Invalid params", "unknown auth method "+p.MethodID)
	case "session/new", "session/load":
		a.mu.Lock()
		authed := a.authed
		if m.Method == "session/load" {
			a.sid = p.SessionID
		}
		a.servers, a.cwd = p.MCPServers, p.Cwd
		a.mu.Unlock()
		if s.RequireAuth && !authed {
			a.fail(m.ID, -32000, "Authentication required", nil)
			return
		}
		res := obj{}
		if m.Method == "session/new" {
			res = append(res, kv{"sessionId", a.sid})
		}
		if len(s.Modes) > 0 {
			var modes []obj
			for _, id := range s.Modes {
				modes = append(modes, obj{{"id", id}, {"name", id}})
			}
			res = append(res, kv{"modes", obj{{"currentModeId", s.Modes[0]}, {"availableModes", modes}}})
		}
		if len(s.Models) > 0 {
			if s.ConfigModel {
				var opts []obj
				for _, id := range s.Models {
					opts = append(opts, obj{{"value", id}, {"name", id}})
				}
				res = append(res, kv{"configOptions", []obj{{{"id", "model"}, {"name", "Model"}, {"category", "model"},
					{"type", "select"}, {"currentValue", s.Models[0]}, {"options", opts}}}})
			} else {
				var models []obj
				for _, id := range s.Models {
					models = append(models, obj{{"modelId", id}, {"name", id}})
				}
				res = append(res, kv{"models", obj{{"currentModelId", s.Models[0]}, {"availableModels", models}}})
			}
		}
		a.reply(m.ID, res)
	case "session/set_mode":
		if !slices.Contains(s.Modes, p.ModeID) {
			a.fail(m.ID, -32602, "Invalid params", "unknown mode "+p.ModeID)
			return
		}
		a.mu.Lock()
		a.mode = p.ModeID
		a.mu.Unlock()
		a.update(obj{{"sessionUpdate", "current_mode_update"}, {"currentModeId", p.ModeID}})
		a.reply(m.ID, obj{})
	case "session/set_model", "session/set_config_option":
		if len(s.Models) == 0 || (m.Method == "session/set_config_option") != s.ConfigModel {
			a.fail(m.ID, -32601, "Method not found", nil)
			return
		}
		a.mu.Lock()
		a.model = p.ModelID + p.Value
		a.mu.Unlock()
		a.reply(m.ID, obj{})
	case "session/prompt":
		var parts []string
		for _, b := range p.Prompt {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
		a.mu.Lock()
		if a.busy {
			a.mu.Unlock()
			a.fail(m.ID, -32603, "Internal error", "a prompt is already running")
			return
		}
		a.busy = true
		a.turns++
		a.intr = make(chan struct{})
		n, intr := a.turns, a.intr
		a.mu.Unlock()
		go a.prompt(m.ID, n, intr)
	case "session/cancel":
		if s.IgnoreCancel {
			return
		}
		a.mu.Lock()
		if a.busy && a.intr != nil {
			close(a.intr)
			a.intr = nil
		}
		a.mu.Unlock()
	default:
		if len(m.ID) > 0 {
			a.fail(m.ID, -32601, "Method not found", m.Method)
		}
	}
}

// pause waits d, or less if intr fires first; it reports whether the whole
// of d passed.
func pause(d time.Duration, intr <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-intr:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-intr:
		return false
	}
}

func (s *Script) interval() time.Duration {
	if s.Interval <= 0 {
		return 10 * time.Millisecond
	}
	return s.Interval
}

func (s *Script) answer(n int) string {
	a := s.Answer
	switch {
	case n <= len(s.Answers):
		a = s.Answers[n-1]
	case a == "":
		a = fmt.Sprintf("Turn %d: %s", n, DefaultAnswer)
	}
	if pad := s.AnswerSize - len(a); pad > 0 {
		a += strings.Repeat(".", pad)
	}
	return a
}

// split cuts s into n pieces of about the same number of runes.
func split(s string, n int) []string {
	r := []rune(s)
	n = max(1, min(n, len(r)))
	var out []string
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// prompt runs turn n and answers the prompt request id.
func (a *agent) prompt(id json.RawMessage, n int, intr <-chan struct{}) {
	s := a.s
	finish := func(stop string) {
		a.mu.Lock()
		a.busy = false
		a.mu.Unlock()
		if stop == "" {
			stop = "end_turn"
		}
		res := obj{{"stopReason", stop}}
		if stop == "end_turn" {
			res = append(res, kv{"usage", obj{{"inputTokens", 10 * n}, {"outputTokens", 5 * n}, {"totalTokens", 15 * n}}})
		}
		a.reply(id, res)
	}
	cancelled := func() { finish("cancelled") }
	if s.ReportState {
		a.mu.Lock()
		state := fmt.Sprintf("mode=%s model=%s", a.mode, a.model)
		a.mu.Unlock()
		a.chunk("agent_thought_chunk", state)
	}
	if s.Thought != "" {
		a.chunk("agent_thought_chunk", s.Thought)
	}
	switch s.Malformed {
	case "text":
		a.writeRaw([]byte("this line is not JSON"))
	case "object":
		a.writeRaw([]byte(`{"hello":"world"}`))
	}
	if s.Permission != "" {
		a.permission(intr)
	}
	var said []string // what Ask, Edit and MCPCall put before the answer
	for _, step := range []struct {
		set bool
		run func() (string, bool)
	}{
		{s.Ask != "", func() (string, bool) { return a.askCommands(s.Ask, max(s.AskCount, 1), intr) }},
		{s.Edit != "", func() (string, bool) { return a.askEdit(s.Edit, intr) }},
		{s.MCPCall != nil, func() (string, bool) { return a.mcpCall(s.MCPCall, intr) }},
	} {
		if !step.set {
			continue
		}
		what, ok := step.run()
		if !ok {
			cancelled()
			return
		}
		said = append(said, what)
	}
	if s.ClientRequest != "" {
		ch := a.ask(s.ClientRequest, obj{{"sessionId", a.sid}, {"path", "/etc/hostname"}})
		select {
		case m := <-ch:
			what := "result"
			if m.Error != nil {
				what = fmt.Sprintf("error %d", m.Error.Code)
			}
			a.chunk("agent_thought_chunk", s.ClientRequest+": "+what)
		case <-intr:
			cancelled()
			return
		}
	}
	if s.Tool {
		tid := "call_" + randHex(4)
		a.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", "echo hello"}, {"kind", "execute"},
			{"status", "in_progress"}, {"rawInput", obj{{"command", "echo hello"}}}})
		a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
			{"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", "hello"}}}}}}})
	}
	if s.HugeLine > 0 {
		tid := "call_" + randHex(4)
		a.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", "cat big"}, {"kind", "read"}, {"status", "in_progress"}})
		a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", "completed"},
			{"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", strings.Repeat("x", s.HugeLine)}}}}}}})
	}
	if s.Stream {
		for k := 1; ; k++ {
			a.chunk("agent_message_chunk", fmt.Sprintf("Working, step %d.", k))
			if !pause(s.interval(), intr) {
				cancelled()
				return
			}
			a.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", fmt.Sprintf("think_%d", k)}, {"title", "think"},
				{"kind", "think"}, {"status", "completed"}})
			if !pause(s.interval(), intr) {
				cancelled()
				return
			}
		}
	}
	if s.Fail != "" {
		a.mu.Lock()
		a.busy = false
		a.mu.Unlock()
		a.fail(id, -32603, "Internal error", obj{{"details", s.Fail}})
		return
	}
	answer := s.answer(n)
	if len(said) > 0 {
		answer = strings.Join(said, "\n") + "\n" + answer
	}
	for i, piece := range split(answer, s.Chunks) {
		if i > 0 && !pause(s.interval(), intr) {
			cancelled()
			return
		}
		a.chunk("agent_message_chunk", piece)
		if s.ExitCode != 0 {
			os.Exit(s.ExitCode)
		}
	}
	if !pause(s.StallFor, intr) {
		cancelled()
		return
	}
	if s.Malformed == "result" {
		a.mu.Lock()
		a.busy = false
		a.mu.Unlock()
		a.reply(id, "oops")
		return
	}
	finish(s.StopReason)
}

// permission asks for permission for a tool call of kind Script.Permission
// and reports the answer.
func (a *agent) permission(intr <-chan struct{}) {
	kind := a.s.Permission
	title := a.s.PermissionTitle
	if title == "" {
		title = "a " + kind + " call"
	}
	tid := "perm_" + randHex(4)
	a.update(obj{{"sessionUpdate", "tool_call"}, {"toolCallId", tid}, {"title", title}, {"kind", kind}, {"status", "pending"}})
	call := obj{{"toolCallId", tid}, {"title", title}, {"kind", kind}}
	if kind == "edit" || kind == "delete" || kind == "move" {
		// A call that changes a file names it, as every agent's does.
		a.mu.Lock()
		cwd := a.cwd
		a.mu.Unlock()
		call = append(call, kv{"locations", []obj{{{"path", filepath.Join(cwd, "permission.txt")}}}})
	}
	if a.s.PermissionInput != nil {
		call = append(call, kv{"rawInput", a.s.PermissionInput})
	}
	got, ok := a.askPermission(call, []obj{
		{{"optionId", "allow"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "always"}, {"name", "Always allow"}, {"kind", "allow_always"}},
		{{"optionId", "reject"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}, intr)
	if !ok {
		return
	}
	status := "failed"
	if got == "allow" || got == "always" {
		status = "completed"
	}
	a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", status}})
	a.chunk("agent_thought_chunk", "permission "+kind+": "+got)
}

// askPermission sends session/request_permission for call with options,
// and returns the option chosen, or "cancelled"; false when the turn was
// cancelled first.
func (a *agent) askPermission(call obj, options []obj, intr <-chan struct{}) (string, bool) {
	ch := a.ask("session/request_permission", obj{{"sessionId", a.sid}, {"toolCall", call}, {"options", options}})
	var m *rpc
	select {
	case m = <-ch:
	case <-intr:
		return "", false
	}
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	json.Unmarshal(m.Result, &res)
	got := res.Outcome.Outcome
	if got == "selected" {
		got = res.Outcome.OptionID
	}
	return got, true
}

// geminiOptions are Gemini CLI's options for a question about a shell
// command or an edit; always names its allow_always option.
func geminiOptions(always string) []obj {
	return []obj{
		{{"optionId", "proceed_always"}, {"name", always}, {"kind", "allow_always"}},
		{{"optionId", "proceed_once"}, {"name", "Allow"}, {"kind", "allow_once"}},
		{{"optionId", "cancel"}, {"name", "Reject"}, {"kind", "reject_once"}},
	}
}

// askGemini asks permission for call with Gemini CLI's options and
// returns whether it was allowed, and otherwise the first line of the
// answer; false when the turn was cancelled first.
func (a *agent) askGemini(call obj, always string, intr <-chan struct{}) (allowed bool, line string, ok bool) {
	got, ok := a.askPermission(call, geminiOptions(always), intr)
	if !ok {
		return false, "", false
	}
	if got != "proceed_once" && got != "proceed_always" {
		return false, "denied (" + got + ")", true
	}
	return true, "", true
}

// askEdit asks permission to write path, as Gemini CLI asks for its
// write_file tool, and writes fakeagent.EditContent into it when allowed.
// It returns the first line of the answer; false when the turn was
// cancelled first.
func (a *agent) askEdit(path string, intr <-chan struct{}) (string, bool) {
	a.mu.Lock()
	cwd := a.cwd
	a.mu.Unlock()
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	title := path
	if rel, err := filepath.Rel(cwd, path); err == nil && !strings.HasPrefix(rel, "..") {
		title = rel
	}
	var old any // null for a new file
	if b, err := os.ReadFile(path); err == nil {
		old = string(b)
	}
	tid := "write_file__write_file_" + randHex(4)
	diff := []obj{{{"type", "diff"}, {"path", path}, {"oldText", old}, {"newText", fakeagent.EditContent}}}
	allowed, line, ok := a.askGemini(obj{{"toolCallId", tid}, {"status", "pending"}, {"title", "Writing to " + title},
		{"content", diff}, {"locations", []obj{{{"path", path}}}}, {"kind", "edit"}}, "Allow All Edits", intr)
	if !allowed {
		return line, ok
	}
	status, line := "completed", "edited"
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(fakeagent.EditContent), 0o644)
	}
	if err != nil {
		status, line = "failed", "edit failed: "+err.Error()
	}
	a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", status}, {"content", diff}})
	return line, true
}

// askCommands asks n questions about command at once (askCommand each)
// and returns their lines joined; false when the turn was cancelled
// first.
func (a *agent) askCommands(command string, n int, intr <-chan struct{}) (string, bool) {
	lines := make([]string, n)
	oks := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { lines[i], oks[i] = a.askCommand(command, intr) })
	}
	wg.Wait()
	if slices.Contains(oks, false) {
		return "", false
	}
	return strings.Join(lines, "\n"), true
}

// askCommand asks permission to run command, as Gemini CLI asks for its
// shell tool, and runs it when allowed. It returns the first line of the
// answer; false when the turn was cancelled first.
func (a *agent) askCommand(command string, intr <-chan struct{}) (string, bool) {
	tid := "run_shell_command__run_shell_command_" + randHex(4)
	allowed, line, ok := a.askGemini(obj{{"toolCallId", tid}, {"status", "pending"}, {"title", command},
		{"rawInput", obj{{"command", command}}}, {"locations", []obj{}}, {"kind", "execute"}}, "Allow for this session", intr)
	if !allowed {
		return line, ok
	}
	a.mu.Lock()
	cwd := a.cwd
	a.mu.Unlock()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	status := "completed"
	if err != nil {
		status = "failed"
	}
	a.update(obj{{"sessionUpdate", "tool_call_update"}, {"toolCallId", tid}, {"status", status},
		{"content", []obj{{{"type", "content"}, {"content", obj{{"type", "text"}, {"text", string(out)}}}}}}})
	return "approved", true
}
