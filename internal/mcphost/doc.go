// Package mcphost lets an agent CLI call tools written in Go: it hosts a
// run's go-sdk servers (each an [*mcp.Server] with tools added by
// [mcp.AddTool]) for the length of one run, and ends them with it.
//
// There are two ways in, one for each way a CLI reaches MCP servers:
//
//   - [Serve] listens on a random port of 127.0.0.1 and serves each server
//     over streamable HTTP at its own path, for CLIs that connect to MCP
//     servers by URL (Codex, Gemini CLI). Every request must carry the
//     per-run bearer token; one without it is answered 401 and never
//     reaches a server.
//   - [NewBridge] delivers single JSON-RPC messages to the servers over
//     in-memory connections, for CLIs that carry "SDK MCP servers" over their
//     own control protocol (Claude Code's mcp_message control requests).
//     The connections carry messages of any size; the Bridge bounds a reply
//     to the CLI ([Options].MaxReply), and one over the bound fails its
//     request alone.
//
// It never listens on anything but the loopback address, and it never reads
// a token from anywhere but the Authorization header.
//
// # Validation
//
// Both constructors check the servers before anything starts and return a
// [*ConfigError] for each problem a CLI would otherwise meet later, with less
// explanation: a name that is not usable in a URL or a configuration key, an
// input schema that does not resolve, two tools that a CLI would give the
// same name.
//
// # Calls and their contexts
//
// A tool handler's context is cancelled when the run ends ([Host.Close],
// [Bridge.Close], or the context given to [Serve]) and when the owner cancels
// the calls in flight ([Host.CancelCalls], [Bridge.CancelCalls]), which it
// does when the turn that made them is cancelled. With [Options].CallContext
// the owner also gives each call the context it belongs to (the turn in
// progress): the handler's context has its values and its deadline, and is
// cancelled with it, so that its Err reads context.DeadlineExceeded once the
// deadline has passed. Close returns only when no handler still runs. A
// handler that panics does not crash the program: the panic becomes a tool
// error the agent sees.
//
// The go-sdk gives a handler a context derived from the connection, not from
// the HTTP request that carried the call, and without the connection's
// cancellation; closing a session waits for its handlers without cancelling
// them. So the package adds one receiving middleware to each server it hosts
// (once per server, however often it is hosted), which gives every call a
// context it can cancel and recovers panics. The middleware acts only on
// sessions this package started; other uses of the same server pass through
// it untouched.
package mcphost
