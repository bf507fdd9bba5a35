package invoker

// Sandbox asks the kernel to hold what a run's processes may touch in the
// filesystem: the CLI and every process it starts (its tools, the MCP
// servers it starts, their children) are born under a ceiling none of them
// can lift, root included, mapped from the request's Permission:
//
//   - ReadOnly: the run may write only its CLI's own state (session and
//     log directories, named per backend; never its settings, memory or
//     instruction files), a private temporary directory (TMPDIR, removed
//     with the run), the null device and the terminals. /tmp, /dev/shm,
//     the working directory and the cgroup filesystem are not writable.
//   - WorkspaceWrite: the above, plus the working directory's existing
//     entries, except the configuration names (.git, .claude, .gemini,
//     .codex, .agents, .mcp.json, .claude.json, .env), which stay read-only:
//     nothing can be written in them, nor can they be removed, renamed,
//     linked or made anew. Nothing new can be made at the top of the
//     working directory (inside its existing directories, anything).
//   - Unlimited: no ceiling on writes.
//
// At every level the home directory cannot be read, listed or executed
// from, nor can the host's other homes (/home, /root) and its secrets
// (/etc/shadow, the SSH host keys and others docs/sandbox.md lists, where
// this process could read them), except the CLI's own directories, its
// install, the working directory and the paths in Show; neither can the
// paths in Hide. The
// caches of the agent's tools (Go's, npm's, pip's, XDG's) go to the run's
// private temporary directory. docs/sandbox.md says what each kind of
// host holds, how to get it, and what it costs.
//
// On Linux the ceiling is Landlock (Linux 5.13 and later; no privilege
// needed). Capabilities.Sandbox says whether this host holds it.
//
// Network, when set, also puts the run's processes in a network
// namespace of their own whose only way out is an HTTP proxy the library
// runs (CONNECT and plain HTTP, no TLS interception): a tool that ignores
// the proxy variables gets no connection at all. The proxy lets through
// what the run must reach at every level (the backend's model endpoint,
// the MCP servers of the request given by URL, the Go tools' endpoint;
// those on the host's loopback are reached at the same address from
// inside) and the hosts Network allows. Every attempt is in
// Result.Connections; a denied one is also a KindWarning event naming the
// host and port and the rule that would allow it. On Linux the namespace
// is entered as root (CAP_SYS_ADMIN), and by any other user where
// unprivileged user namespaces are allowed (the CLI then runs in a user
// namespace of its own, as the same user): Capabilities.Sandbox says
// "network" where it is held, and a run asking for Network in Mode
// "required" elsewhere fails with ErrSandbox.
//
// Options.Sandbox holds for every run of an Invoker, Request.Sandbox and
// SessionRequest.Sandbox for one run or session: each of their non-zero
// fields replaces the Options' field (Hide and Show are appended). A
// session's ceiling is fixed when its CLI starts, at the level it was
// opened with: the kernel cannot tighten it on a running process. A turn
// that runs below the level of the turn before (TurnRequest.Permission)
// therefore starts with every process the earlier turns left running
// killed (a shell's background job, a tool run in the background), the
// CLI and what it started while opening (its MCP servers) spared, and a
// KindWarning event, the turn's first, names what was killed; the CLI's
// own level holds the lower turn's tools.
type Sandbox struct {
	// Mode is "" or "off" (no sandbox, the default), "available" (held
	// where the host can, for a CLI that works inside it;
	// Result.Sandbox says whether it was) or "required" (a run on a host
	// that cannot hold it fails with ErrSandbox before anything starts).
	// "off" in a Request turns off the Options' sandbox for that run. A
	// CLI whose own sandbox cannot run inside it (Codex;
	// Capabilities.SandboxNote says so) runs inside it with its own
	// sandbox off where the host holds the network part too, below
	// Unlimited with Network "none" when the run gives no rules; where the
	// host holds the filesystem alone it runs without it under
	// "available", and "required" fails with ErrSandbox.
	Mode string
	// Hide are absolute paths the run cannot read, list or execute, with
	// everything beneath them (Show excepted).
	Hide []string
	// Show are absolute paths beneath a hidden path (the home directory,
	// another home, a secret of the host, or Hide) that the run may read:
	// a toolchain or a project it needs.
	Show []string
	// Network is the run's network ceiling: nil for none (the run
	// reaches what the host reaches), "none" alone for only what the run
	// must reach, or hosts it may reach besides: "host", "host:port",
	// "*.domain" (every name below the domain), "*.domain:port", an IP
	// address, "[IPv6]:port". A request's non-empty Network replaces the
	// Options'. It holds only with Mode "available" or "required"; set
	// without a Mode it is an invalid request, and Mode "off" turns it off
	// with the rest.
	Network []string
}

// A Connection is one connection a sandboxed run's process attempted
// under Sandbox.Network: through the proxy, to a loopback endpoint the
// run must reach, or around the proxy (a TCP connection or a UDP
// datagram sent straight to an address, always denied: Err says which).
type Connection struct {
	// Host and Port name the destination as the process asked for it.
	Host string
	Port int
	// Allowed reports whether the rules let it through.
	Allowed bool
	// Sent and Received count the bytes each way; zero when denied.
	Sent, Received int64
	// Err says why it was denied, or why an allowed one failed; empty
	// when it ended normally.
	Err string
}
