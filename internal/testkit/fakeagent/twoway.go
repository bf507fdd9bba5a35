package fakeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcomes a session turn with Script.Ask, Script.Edit or Script.CallTool
// states in its answer, one line per action, before the scripted answer
// if there is one (see "Two-way control" in the package documentation).
const (
	// OutcomeApproved is the line of a command that ran.
	OutcomeApproved = "approved"
	// OutcomeEdited is the line of a file change that was written.
	OutcomeEdited = "edited"
	// OutcomeEditFailed starts the line of a file change that was
	// allowed but could not be written, followed by ": " and why.
	OutcomeEditFailed = "edit failed"
	// OutcomeDenied starts the line of a command or a file change that
	// did not happen, followed by ": " and the reason the client gave,
	// if any.
	OutcomeDenied = "denied"
	// OutcomeToolError starts the line of a tool call whose result is an
	// error (followed by ": " and its text).
	OutcomeToolError = "tool error"
	// OutcomeToolFailed starts the line of a tool call that got no result
	// (no such server or tool, a refused connection), followed by ": "
	// and why.
	OutcomeToolFailed = "tool failed"
)

// denied returns the outcome line of a denial with message msg.
func denied(msg string) string {
	if msg == "" {
		return OutcomeDenied
	}
	return OutcomeDenied + ": " + msg
}

// outcomes collects the outcome lines of one turn's actions.
type outcomes []string

// answer returns the turn's answer: the outcome lines, then the scripted
// answer of turn n when the script has one of its own.
func (o outcomes) answer(s *Script, n int) string {
	if len(o) == 0 {
		return s.turnAnswer(n)
	}
	text := strings.Join(o, "\n")
	if n <= len(s.Answers) || s.Answer != "" {
		text += "\n" + s.turnAnswer(n)
	}
	if pad := s.AnswerSize - len(text); pad > 0 {
		text += strings.Repeat(".", pad)
	}
	return text
}

// EditContent is what Script.Edit writes into its file.
const EditContent = "edited by the fake agent\n"

// errEndTurn is the error of an action whose answer ends the turn as
// interrupted (Codex's decision cancel).
var errEndTurn = errors.New("the client ended the turn")

// twoWay reports whether a session turn of s has actions to run.
func (s *Script) twoWay() bool { return s.Ask != "" || s.Edit != "" || s.CallTool != "" }

// turnActions are one protocol's ways of running a turn's actions, each
// returning the action's outcome line, or an error (ctx's, or
// errEndTurn) that ends the turn.
type turnActions struct {
	ask  func(ctx context.Context, command string) (string, error)
	edit func(ctx context.Context, e fileEdit) (string, error)
	call func(ctx context.Context) (string, error)
}

// actions runs the turn's actions that s sets, in order: Ask, Edit,
// CallTool, and returns their outcome lines.
func (s *Script) actions(ctx context.Context, do turnActions) (outcomes, error) {
	var out outcomes
	for _, step := range []struct {
		set bool
		run func() (string, error)
	}{
		{s.Ask != "", func() (string, error) { return s.askAll(ctx, do.ask) }},
		{s.Edit != "", func() (string, error) { return do.edit(ctx, newFileEdit(s.Edit)) }},
		{s.CallTool != "", func() (string, error) { return do.call(ctx) }},
	} {
		if !step.set {
			continue
		}
		line, err := step.run()
		if err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	return out, nil
}

// askAll asks Ask's question AskCount times at once (once when AskCount
// is below 2) and returns the outcome lines, in order, as one; an error
// of any ends the turn.
func (s *Script) askAll(ctx context.Context, ask func(ctx context.Context, command string) (string, error)) (string, error) {
	n := max(s.AskCount, 1)
	if n == 1 {
		return ask(ctx, s.Ask)
	}
	lines := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { lines[i], errs[i] = ask(ctx, s.Ask) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	return strings.Join(lines, "\n"), nil
}

// A fileEdit is the change of Script.Edit in one turn: the file, by its
// absolute path (a relative one is taken in the working directory), what
// it held before (nil when it did not exist), and what the change writes.
type fileEdit struct {
	path    string
	old     *string
	content string
}

func newFileEdit(path string) fileEdit {
	if !filepath.IsAbs(path) {
		wd, _ := os.Getwd()
		path = filepath.Join(wd, path)
	}
	e := fileEdit{path: path, content: EditContent}
	if b, err := os.ReadFile(path); err == nil {
		old := string(b)
		e.old = &old
	}
	return e
}

// write makes the change, creating the file's directory if need be, as
// the CLIs' write tools do, and returns its outcome line.
func (e fileEdit) write() string {
	err := os.MkdirAll(filepath.Dir(e.path), 0o755)
	if err == nil {
		err = os.WriteFile(e.path, []byte(e.content), 0o644)
	}
	if err != nil {
		return OutcomeEditFailed + ": " + err.Error()
	}
	return OutcomeEdited
}

// toolTarget splits Script.CallTool ("server/tool") into its parts.
func toolTarget(s string) (server, tool string) {
	server, tool, _ = strings.Cut(s, "/")
	return server, tool
}

// toolArgs returns Script.ToolArgs as a map for a tools/call request.
func (s *Script) toolArgs() map[string]any {
	args := map[string]any{}
	if len(s.ToolArgs) > 0 {
		json.Unmarshal(s.ToolArgs, &args)
	}
	return args
}

// runShell runs command with sh -c in the working directory, as the CLIs
// run a shell tool, and returns its combined output. ctx kills it.
func runShell(ctx context.Context, command string) (string, int) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.WaitDelay = time.Second // a cancelled command's children may hold its output
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		code = 1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
		if len(out) == 0 {
			out = []byte(err.Error())
		}
	}
	return string(out), code
}

// An mcpServer is an MCP server configured for the fake by its client, in
// any CLI's configuration format: reached over streamable HTTP (URL, with
// Headers), started as a command speaking stdio (Command, Args, Env), or,
// for Claude Code, served by the client over the control protocol (SDK).
type mcpServer struct {
	Name    string
	URL     string
	Headers map[string]string
	Command string
	Args    []string
	Env     []string
	SDK     bool
	// Approve is Codex's default_tools_approval_mode.
	Approve string
}

// toolResult is what a tool call gave: its text, and whether it is an
// error result.
type toolResult struct {
	text    string
	isError bool
}

// outcome returns the answer line of a tool call that gave r or err.
func (r toolResult) outcome(err error) string {
	switch {
	case err != nil:
		return OutcomeToolFailed + ": " + err.Error()
	case r.isError:
		return OutcomeToolError + ": " + r.text
	}
	return r.text
}

// mcpClients keeps one client session per server for the fake's run, as
// the CLIs keep their MCP connections.
type mcpClients struct {
	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
}

// headerTransport adds headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// session returns the client session of srv, connecting on first use.
func (c *mcpClients) session(ctx context.Context, srv mcpServer) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs := c.sessions[srv.Name]; cs != nil {
		return cs, nil
	}
	var t mcp.Transport
	switch {
	case srv.URL != "":
		t = &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{
			Transport: headerTransport{headers: srv.Headers, base: http.DefaultTransport},
		}}
	case srv.Command != "":
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Env = append(os.Environ(), srv.Env...)
		t = &mcp.CommandTransport{Command: cmd}
	default:
		return nil, fmt.Errorf("server %q has neither a URL nor a command", srv.Name)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fakeagent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to MCP server %q: %w", srv.Name, err)
	}
	if c.sessions == nil {
		c.sessions = map[string]*mcp.ClientSession{}
	}
	c.sessions[srv.Name] = cs
	return cs, nil
}

// call lists the tools of srv and calls tool with args.
func (c *mcpClients) call(ctx context.Context, srv mcpServer, tool string, args map[string]any) (toolResult, error) {
	cs, err := c.session(ctx, srv)
	if err != nil {
		return toolResult{}, err
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		return toolResult{}, fmt.Errorf("tools/list of %q: %w", srv.Name, err)
	}
	if !hasTool(list.Tools, tool) {
		return toolResult{}, fmt.Errorf("server %q has no tool %q", srv.Name, tool)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return toolResult{}, fmt.Errorf("tools/call %s of %q: %w", tool, srv.Name, err)
	}
	return toolResult{text: contentText(res.Content), isError: res.IsError}, nil
}

// close ends every client session (a stdio server's process with it).
func (c *mcpClients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.sessions {
		cs.Close()
	}
	c.sessions = nil
}

func hasTool(tools []*mcp.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// contentText joins the text contents of a tool's result.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// findServer returns the server named name among servers.
func findServer(servers []mcpServer, name string) (mcpServer, bool) {
	for _, s := range servers {
		if s.Name == name {
			return s, true
		}
	}
	return mcpServer{}, false
}

// serverNames lists the names of servers, sorted.
func serverNames(servers []mcpServer) []string {
	names := make([]string, 0, len(servers))
	for _, s := range servers {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

// flagValues returns every value of the flags names in args, given as
// "name value..." (a variadic flag takes the arguments up to the next
// option) or "name=value", before any "--".
func flagValues(args []string, names ...string) []string {
	var vals []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		for _, n := range names {
			if a == n {
				for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					i++
					vals = append(vals, args[i])
				}
			} else if v, ok := strings.CutPrefix(a, n+"="); ok {
				vals = append(vals, v)
			}
		}
	}
	return vals
}

// pendingReplies routes the client's replies to the requests the fake
// sent it, by request id.
type pendingReplies struct {
	mu   sync.Mutex
	m    map[string]chan json.RawMessage
	next int // the next numeric request id
}

// newID returns the next numeric request id, from 0.
func (p *pendingReplies) newID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.next
	p.next++
	return id
}

// request registers request id, sends it with send, and waits for its
// reply, or for ctx.
func (p *pendingReplies) request(ctx context.Context, id string, send func()) (json.RawMessage, error) {
	ch := p.add(id)
	send()
	return p.await(ctx, id, ch)
}

// add registers request id and returns the channel its reply comes on.
func (p *pendingReplies) add(id string) chan json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]chan json.RawMessage{}
	}
	ch := make(chan json.RawMessage, 1)
	p.m[id] = ch
	return ch
}

// deliver hands msg to the request id, and reports whether one waited.
func (p *pendingReplies) deliver(id string, msg json.RawMessage) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.m[id]
	if ok {
		delete(p.m, id)
		ch <- msg
	}
	return ok
}

// await waits for the reply to request id, or for ctx; a reply that
// comes after ctx is done is dropped.
func (p *pendingReplies) await(ctx context.Context, id string, ch chan json.RawMessage) (json.RawMessage, error) {
	select {
	case msg := <-ch:
		return msg, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.m, id)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

// stopOn returns a context that is cancelled when stop is closed, and
// its cancel function, which must be called.
func stopOn(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
