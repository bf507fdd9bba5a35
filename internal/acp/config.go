package acp

import (
	"encoding/json"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// A Config is what one agent's sessions need to know beyond the protocol:
// everything in which the agents that speak ACP differ. The zero value
// (but for Name) serves an agent with no modes and no authentication. A
// Config is read, never written, by the protocols made from it, and may be
// shared by them.
type Config struct {
	// Name is the agent's short name, used in messages ("gemini").
	Name string

	// Modes maps permission levels to the agent's session mode ids, set
	// with session/set_mode when a session opens and when a turn switches
	// level. A level without a mode keeps (or returns to) the mode the
	// session opened in.
	Modes map[invoker.Permission]string

	// AuthMethod is the id of the authentication method to use when the
	// agent lists it in its initialize response. When empty, the first
	// method of type env_var whose required variables are all set
	// (LookupEnv) is used, and none when there is none such.
	AuthMethod string

	// LookupEnv looks a variable up in the agent's environment, to tell
	// which env_var authentication methods can be satisfied. Nil means
	// none can.
	LookupEnv func(key string) (string, bool)

	// ToolName recovers the name of the tool a call runs from the call's
	// id, as the agent builds it (GeminiToolName), for invoker.Tool.Name;
	// "" when the id does not say. Nil, or "", names a call by its kind
	// ("execute", "read", ...), or "tool" when it has none. The name is
	// trusted: a call of kind "other" that it names after a server of the
	// request ("mcp_SERVER_TOOL") is that server's tool, trusted at every
	// level. So it must read only what the agent makes, never the title,
	// which the model writes.
	ToolName func(id string) string

	// Classify recognises a sentinel (invoker.ErrAuthRequired,
	// invoker.ErrRateLimited) in an error of the agent, from its JSON-RPC
	// code (Gemini CLI answers a rate-limited prompt with 429) and its
	// message, or returns nil. Nil recognises none.
	Classify func(code int, msg string) error

	// ResetsAt, if not nil, returns when the rate limit that failed a turn
	// resets (driver.Outcome.ResetsAt), from the message of the error
	// Classify recognised as invoker.ErrRateLimited, or the zero time when
	// it is not known.
	ResetsAt func(msg string) time.Time

	// Notices, if not nil, returns the events the agent reported out of
	// band (on standard error, seen by Stderr) since it was last called,
	// with raw as their Raw. The protocol calls it before it decodes each
	// line of the agent's output during a turn, and delivers the events
	// first, after the message being written, which they end.
	Notices func(raw json.RawMessage) []invoker.Event

	// Stderr inspects one line of the agent's standard error; a non-nil
	// error ends the session (see driver.SessionProtocol.Stderr). Nil
	// ignores standard error.
	Stderr func(line []byte) error

	// CheckTurn, if not nil, checks a turn before its prompt is sent; an
	// error (wrapping invoker.ErrInvalidRequest) refuses it.
	CheckTurn func(t *invoker.TurnRequest) error

	// Ceiling, if not nil, decides which of the agent's requests for
	// permission the permission level allows, in place of Allowed: it
	// reports whether call may run under perm, the level in force. A call
	// it allows runs at once, or goes to the session's Approve callback
	// when there is one; a call it does not allow is rejected. Below
	// Unlimited, a call that changes files (edit, delete, move) is also
	// rejected when one of its paths is outside the working directory,
	// whatever Ceiling says. It is called from the goroutine that reads
	// the agent's output.
	Ceiling func(perm invoker.Permission, call ToolCall) bool

	// AllowAlways chooses among the allow_always options of a request for
	// permission (their ids, in the agent's order) the one that allows
	// the same tool for the rest of the session (Decision.ForSession), or,
	// with server true, every tool of the call's MCP server (a server of
	// the request, trusted). Nil, or an id not among ids, chooses the
	// first.
	AllowAlways func(ids []string, server bool) string
}

// A ToolCall is the tool call an agent asks permission for.
type ToolCall struct {
	// ID is the agent's id of the call.
	ID string
	// Kind is ACP's kind of tool: "read", "edit", "delete", "move",
	// "search", "execute", "think", "fetch", "switch_mode" or "other".
	Kind string
	// Title is the agent's human-readable description of the call.
	Title string
	// Input is the call's raw input, when the agent gave it.
	Input json.RawMessage
	// Content is the call's content, when the agent gave it: text,
	// diffs.
	Content json.RawMessage
	// Paths are the files the call touches: its locations and the paths
	// of its diffs.
	Paths []string
	// Name is the tool's name (Config.ToolName).
	Name string
	// MCP reports a tool of an MCP server, and Server names it when it is
	// a server of the session's request. Both are set only when
	// structured fields prove it (see Protocol's permission), never from
	// the title.
	MCP    bool
	Server string
}

// Allowed is the rule of the permission levels for the agent's requests
// for permission: ReadOnly allows the kinds that change nothing (read,
// search, fetch, think), WorkspaceWrite also edit, delete and move, and
// Unlimited everything, execute and unknown kinds included.
func Allowed(perm invoker.Permission, kind string) bool {
	switch kind {
	case "read", "search", "fetch", "think":
		return true
	case "edit", "delete", "move":
		return perm.Rank() >= 1
	}
	return perm == invoker.Unlimited
}

func (c *Config) toolName(id, kind string) string {
	if c.ToolName != nil {
		if n := c.ToolName(id); n != "" {
			return n
		}
	}
	if kind != "" {
		return kind
	}
	return "tool"
}

func (c *Config) classify(e *rpcError) error {
	if c.Classify == nil {
		return nil
	}
	return c.Classify(e.Code, e.text())
}

func (c *Config) name() string {
	if c.Name == "" {
		return "the agent"
	}
	return c.Name
}
