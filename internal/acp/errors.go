package acp

import (
	"errors"
	"fmt"

	"github.com/clinvoke/clinvoke/invoker"
)

// ProtocolVersion is the version of the Agent Client Protocol this client
// speaks, sent in initialize.
const ProtocolVersion = 1

// Errors of a session or turn that invoker's sentinels do not name. Package
// invoker/acp exports them under the same names.
var (
	// ErrProtocol is matched by the error of a session whose agent broke
	// the protocol: a JSON object on standard output that is no JSON-RPC
	// message, or a response to one of the client's requests that cannot
	// be decoded. The session is stopped: the turn could not end
	// otherwise. (A line that is not JSON at all is a warning, and the
	// session goes on.)
	ErrProtocol = errors.New("the agent broke the Agent Client Protocol")

	// ErrRefusal is matched by the *invoker.StreamError of a turn the
	// agent ended with stop reason "refusal": the model refused to go on.
	// The agent leaves the prompt out of the conversation.
	ErrRefusal = errors.New("the agent refused to continue")

	// ErrMaxTokens is matched by the *invoker.StreamError of a turn the
	// agent ended with stop reason "max_tokens": the model reached its
	// output token limit.
	ErrMaxTokens = errors.New("the model reached its maximum number of tokens")
)

// A VersionError reports an agent that answered initialize with a protocol
// version this client does not speak. It matches invoker.ErrUnsupported.
type VersionError struct {
	// Client is the version the client asked for (ProtocolVersion).
	Client int
	// Agent is the version the agent answered with.
	Agent int
}

// Error names both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("the agent speaks Agent Client Protocol version %d; this client speaks version %d: use a release of the agent that supports version %d", e.Agent, e.Client, e.Client)
}

// Unwrap returns invoker.ErrUnsupported.
func (e *VersionError) Unwrap() error { return invoker.ErrUnsupported }

// protocolError is an ErrProtocol with what was wrong.
func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}
