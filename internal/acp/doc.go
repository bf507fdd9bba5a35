// Package acp is clinvoke's one client of the Agent Client Protocol
// (https://agentclientprotocol.com): JSON-RPC 2.0, one message per line, on
// the agent's standard input and output. It is a driver.SessionProtocol:
// the engine owns the process and its lines, and calls the protocol from
// one goroutine at a time with each line it reads; the protocol returns the
// lines to write and the events of the turn in flight. It starts no
// goroutine, holds no reader and writes nothing itself.
//
// A session opens with initialize (protocol version 1, no file system and
// no terminal offered to the agent), authenticate when an authentication
// method is chosen (Config.AuthMethod, or an env_var method whose
// variables are all set), session/new in the workdir (or session/load to
// resume, when the agent advertises loadSession, and then the extension
// request _clinvoke/ping, whose answer ends the history the agent replays,
// which no turn takes: load.go), then session/set_mode
// for the permission level (Config.Modes) and the model (session/set_model,
// or session/set_config_option for a config option of category "model").
// Each turn switches mode and model first when the TurnRequest asks for
// it, and sends session/prompt only once the agent has answered; the
// prompt's response ends the turn, and its stop reason decides how.
// session/cancel is the turn's interrupt.
//
// Every request of the agent is answered: session/request_permission from
// the permission level (or Config.Ceiling; below Unlimited an edit, delete
// or move must also name its files, each inside the working directory as
// internal/workspace judges it), anything else (fs/*, terminal/*, unknown
// methods) with the JSON-RPC error -32601, and the turn goes on. With the
// session's Approve callback, a request the level allows goes to the
// program instead (driver.Step.Approvals) and is answered with its
// decision: allow_once, allow_always for Decision.ForSession, reject_once
// for a denial (ACP carries no message with it, and no changed input: a
// Decision with Input is a denial); what the level does not allow is
// rejected without asking. An edit, delete or move allowed for the
// session below Unlimited is answered allow_once instead, and the grant
// kept by the protocol (Gemini CLI takes allow_always on an edit for a
// switch of the session to autoEdit, where nothing is asked): a later
// request of the same kind and tool is judged by the level, then allowed
// once without asking the program. A request whose id is null is
// rejected too. The session then stays in the mode it opened
// in, so that the agent asks. A request still waiting when the turn is
// cancelled or ends is answered with the outcome cancelled. A request that
// does not decode is rejected; one that reuses the id of a request still
// waiting for the program is rejected, and the waiting one with it, so
// that no Allow can answer a question the program did not allow.
//
// The request's MCP servers are sent with session/new: a command as a stdio
// server, a URL as an http server with its headers, which needs the agent's
// mcpCapabilities.http; under the kernel's sandbox a stdio server's env
// sets NODE_OPTIONS with the inspector option (mcp.go). Their tools are
// trusted: a request for permission for one is allowed at every level
// (for the rest of the session, with no callback), or goes to the
// callback as an "mcp_tool". A call is such a
// tool only when fields the agent makes prove it (servers.go), never by
// its title, which the model writes.
//
// Each backend that speaks ACP (package invoker/acp for any agent, Gemini
// CLI's --acp mode) configures it with a Config: its name, modes,
// authentication, tool names and error classification.
package acp
