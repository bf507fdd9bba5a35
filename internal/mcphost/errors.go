package mcphost

import (
	"errors"
	"fmt"
)

// Problems found by [Serve] and [NewBridge] before anything starts. A
// [*ConfigError] unwraps to one of them, so callers branch with errors.Is.
var (
	// ErrBadName means a server name cannot be used in a URL path or a CLI's
	// configuration key, or a tool name is empty.
	ErrBadName = errors.New("unusable name")
	// ErrBadSchema means a tool's input schema would be refused by a CLI or
	// by the model's API.
	ErrBadSchema = errors.New("invalid input schema")
	// ErrToolClash means two tools would reach the model under the same name
	// once a CLI has qualified them with their server's name.
	ErrToolClash = errors.New("tool name clash")
	// ErrNilServer means a name was given a nil *mcp.Server.
	ErrNilServer = errors.New("nil server")
)

// Causes of a cancelled call, as context.Cause reports them to a handler.
var (
	// ErrClosed is the cause of a call's cancellation when its host or
	// bridge closes, and the error Bridge.Handle returns after Close.
	ErrClosed = errors.New("mcphost: closed")
	// ErrCallCancelled is the cause of a call's cancellation by CancelCalls.
	ErrCallCancelled = errors.New("mcphost: call cancelled by its owner")
)

// A ConfigError reports one problem with the servers given to [Serve] or
// [NewBridge]. Several are joined with errors.Join; each unwraps to its
// Kind, one of [ErrBadName], [ErrBadSchema], [ErrToolClash], [ErrNilServer].
type ConfigError struct {
	Kind    error  // one of the Err* values above
	Server  string // the server's name
	Tool    string // the tool's name, if the problem is a tool's
	Problem string // what is wrong
	Fix     string // what to change
	Err     error  // the underlying error, if any (a schema's resolution error)
}

// Error names the server (and tool), the problem and the fix.
func (e *ConfigError) Error() string {
	where := fmt.Sprintf("server %q", e.Server)
	if e.Tool != "" {
		where += fmt.Sprintf(", tool %q", e.Tool)
	}
	msg := fmt.Sprintf("mcphost: %s: %v: %s", where, e.Kind, e.Problem)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		msg += " (" + e.Fix + ")"
	}
	return msg
}

// Unwrap returns the kind and, if set, the underlying error.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// A ListenError is returned by [Serve] when it cannot listen on the loopback
// address. Nothing was started.
type ListenError struct {
	Addr string // the address Serve tried, such as "127.0.0.1:0"
	Err  error  // the error from net.Listen
}

// Error names the address and the cause.
func (e *ListenError) Error() string {
	return fmt.Sprintf("mcphost: cannot listen on %s: %v", e.Addr, e.Err)
}

// Unwrap returns the error from net.Listen.
func (e *ListenError) Unwrap() error { return e.Err }
