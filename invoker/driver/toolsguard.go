package driver

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/clinvoke/clinvoke/internal/egress"
	"github.com/clinvoke/clinvoke/invoker"
)

// toolsGuard admits to the Go tools' endpoint (mcphost.Host) the
// connections of the CLI's own process only. The bearer token keeps out
// whoever lacks it; but a command the CLI runs, as its user, can read
// the CLI's memory (/proc/PID/mem of a dumpable process, where no Yama
// policy forbids it), where the token is, or take a copy of the CLI's
// connection (pidfd_getfd), unless the sandbox put it in a Landlock
// domain nested in the CLI's (a shell's command where the run has its
// mount namespace: internal/sandbox's shim), and a program the CLI runs
// without a shell stays in the CLI's domain. So each
// connection is traced to the processes that hold its client's socket
// (egress.SocketHolders), and admitted only if every one of them is in
// the session of the run's root, or is the program's own process (a
// client of the program's, which has the token anyway). A copy taken
// before that check is refused with the connection; one taken after it
// finds the connection carrying the CLI's one request only, since the
// Host serves one request per connection when it has a guard.
//
// The library starts the CLI as a session leader; its wrapper's
// relaunched child (Codex's node shim, Gemini CLI's relaunch) and the MCP
// servers it starts stay in that session, and the CLIs run each command
// in a session of its own (setsid), which neither the command nor
// anything it starts can leave for the CLI's: setsid makes a new session,
// setpgid moves only within one, and clone(CLONE_PARENT) keeps the
// caller's session. What it cannot tell apart is the CLI's own process
// made to connect for a command (a debugger attached to it, code
// injected through /proc/PID/mem), a copy taken between the check and
// the CLI's own request, and a holder this program may not read (not
// dumpable, as a user without CAP_SYS_PTRACE).
//
// Requests through the run's proxy are asked about too (forwarded), at
// the address the proxy's dial reached, with the proxy's client's
// socket inside the namespace.
//
// Under network rules the run's connections reach the endpoint through
// the forwarder of its namespace, which asks forwarded; without them
// they reach the Host directly, which asks direct. The lookup runs per
// connection, never at the run's start. Only Linux has it: elsewhere the
// token alone holds.
//
// Under network rules the Host admits only the connections of the run's
// forwarder and proxy, whose clients forwarded checked: those whose
// client's address is the local address of one of their dials (dials).
// Any other, from a process on the host, is refused and warned of: a
// server the run may reach that relays connections (an HTTP proxy, a
// fetch tool, a model proxy) would otherwise carry a command's call,
// with the token it read, to the endpoint. The program's own process is
// no exception there, as it is without network rules: it may be the
// relay (a server it hosts for the run), and its holding the socket
// cannot tell its own client from the relay's.
type toolsGuard struct {
	addr  netip.AddrPort // the Host's, set before the run starts
	root  atomic.Int64   // the pid of the run's root, once started
	netns atomic.Bool    // the run's connections come through its forwarder
	dials egress.Dials   // under network rules, the forwarder's and the proxy's connections

	refused pending[string] // refusals of direct not yet warned of
}

// started records the run's root, and whether the run has a network
// namespace (whose forwarder, not the Host, checks its connections).
func (g *toolsGuard) started(pid int, netns bool) {
	if g == nil {
		return
	}
	g.netns.Store(netns)
	g.root.Store(int64(pid))
}

// forwarded is the egress.Guard of the run's forwarders and proxy: a
// connection from peer inside the namespace, accepted at at, to ep.
func (g *toolsGuard) forwarded(ep, at, peer netip.AddrPort) string {
	if ep.Port() != g.addr.Port() || ep.Addr().Unmap() != g.addr.Addr().Unmap() {
		return "" // another endpoint: not the Go tools'
	}
	return g.check(at, peer)
}

// direct is the Host's mcphost.Options.Admit: a connection straight to
// it, which under network rules must be one the forwarder or the proxy
// dialled (their clients checked by forwarded).
func (g *toolsGuard) direct(local, remote netip.AddrPort) string {
	var why string
	switch {
	case !g.netns.Load():
		why = g.check(local, remote)
	case !g.dials.Has(remote):
		why = fmt.Sprintf("it came from %s on the host, not through the run's forwarder or proxy: a server on the host that the run may reach and that relays connections (an HTTP proxy, a fetch tool) cannot carry a call to it", remote)
	}
	if why != "" && why != clientGone {
		g.refused.add(why)
	}
	return why
}

// clientGone is check's answer for a connection whose client's socket
// is no longer open (its client gave up, while the check waited for its
// turn, say): refused, and not warned of, since which process opened it
// cannot be told and nothing is left to serve.
const clientGone = "its client closed the connection before it was checked"

// check returns "" if every holder of the client's socket of the
// connection from peer to ep, in the root's network namespace, is in the
// root's session or is this process, else why not.
func (g *toolsGuard) check(ep, peer netip.AddrPort) string {
	root := int(g.root.Load())
	if root == 0 {
		return "the run's CLI has not started yet"
	}
	hs, err := egress.SocketHolders(root, peer, ep)
	if errors.Is(err, errors.ErrUnsupported) {
		return "" // no such lookup on this system: the token alone holds
	}
	if errors.Is(err, egress.ErrNoSocket) {
		return clientGone
	}
	if errors.Is(err, egress.ErrHoldersHidden) {
		return "the processes holding its socket are hidden from this program (not dumpable, or another user's): which process opened it cannot be told, so it is refused; a program with CAP_SYS_PTRACE sees them"
	}
	if err != nil {
		return fmt.Sprintf("the process that opened it could not be found (%v)", err)
	}
	self := os.Getpid() // the program's own client, which has the token anyway
	for _, h := range hs {
		if h.Session != root && h.Pid != self {
			return fmt.Sprintf("it came from pid %d (%s), a process of the run outside the CLI's session, as the commands the CLI runs are", h.Pid, h.Comm)
		}
	}
	return ""
}

// warnings returns a KindWarning event for each connection direct
// refused since the last call, and one counting those the queue dropped.
func (g *toolsGuard) warnings(tool *invoker.Tool) []invoker.Event {
	if g == nil {
		return nil
	}
	refused, dropped := g.refused.take()
	evs := make([]invoker.Event, 0, len(refused)+1)
	for _, why := range refused {
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: toolsRefused(g.addr.String(), why)})
	}
	if dropped > 0 {
		evs = append(evs, invoker.Event{Kind: invoker.KindWarning, Tool: tool, Text: fmt.Sprintf("the Go tools' endpoint %s refused %d more connections of processes of the run that are not the CLI, not listed in these warnings (more than %d waited at once)", g.addr, dropped, maxPending)})
	}
	return evs
}

// toolsRefused is the warning of a connection to the Go tools' endpoint
// at hp refused for why.
func toolsRefused(hp, why string) string {
	return fmt.Sprintf("a process of the run that is not the CLI tried the Go tools' endpoint %s, and was refused: %s; only the CLI's own process may call the run's Go tools, not a command it runs, even with the endpoint's token", hp, why)
}
