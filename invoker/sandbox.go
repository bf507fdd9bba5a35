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
//     .codex, .agents, .mcp.json, .claude.json), which stay read-only:
//     nothing can be written in them, nor can they be removed, renamed,
//     linked or made anew. Nothing new can be made at the top of the
//     working directory (inside its existing directories, anything).
//   - Unlimited: no ceiling on writes.
//
// At every level the home directory cannot be read, listed or executed
// from, except the CLI's own directories, its install, the working
// directory and the paths in Show; neither can the paths in Hide. The
// caches of the agent's tools (Go's, npm's, pip's, XDG's) go to the run's
// private temporary directory. docs/sandbox.md says what each kind of
// host holds, how to get it, and what it costs.
//
// On Linux the ceiling is Landlock (Linux 5.13 and later; no privilege
// needed). Capabilities.Sandbox says whether this host holds it. Network
// rules are not part of the filesystem sandbox.
//
// Options.Sandbox holds for every run of an Invoker, Request.Sandbox and
// SessionRequest.Sandbox for one run or session: each of their non-zero
// fields replaces the Options' field (Hide and Show are appended). A
// session's ceiling is fixed when its CLI starts, at the level it was
// opened with: the kernel cannot tighten it on a running process. A turn
// that runs below the level of the turn before (TurnRequest.Permission)
// therefore starts with every process the earlier turns left running
// killed (a shell's background job, a tool run in the background), the
// CLI and what it started while opening (its MCP servers) spared; the
// CLI's own level holds the lower turn's tools.
type Sandbox struct {
	// Mode is "" or "off" (no sandbox, the default), "available" (held
	// where the host can; Result.Sandbox says whether it was) or
	// "required" (a run on a host that cannot hold it fails with
	// ErrSandbox before anything starts). "off" in a Request turns off
	// the Options' sandbox for that run.
	Mode string
	// Hide are absolute paths the run cannot read, list or execute, with
	// everything beneath them (Show excepted).
	Hide []string
	// Show are absolute paths beneath the home directory (or Hide) that
	// the run may read: a toolchain or a project it needs.
	Show []string
}
