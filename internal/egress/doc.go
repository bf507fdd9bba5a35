// Package egress is the network part of a run's sandbox: a network
// namespace for the run's process tree whose only ways out are an HTTP
// proxy run by this package and forwarders of the loopback endpoints the
// run must reach, with every connection attempt recorded.
//
// The proxy lets through CONNECT tunnels and plain HTTP requests with an
// absolute http:// URI to the hosts its rules allow (an exact name or IP
// address, "*.domain" for every name below a domain, each on one port or
// any) and answers 403, with a body saying what was denied and who may
// allow it, to the others. It never looks inside TLS. By default it also
// refuses an allowed name that resolves to a loopback, link-local or
// unspecified address (127.0.0.1, a cloud metadata address), so that a
// run cannot reach the host's own services through a name it controls;
// a rule naming the address itself allows it.
//
// The namespace holds the rules: a process in it has a loopback device
// and nothing else, so a tool that ignores the proxy variables gets no
// connection at all. Its TCP connection, to any address, is refused at
// once ("connection refused": every address is the namespace's own for
// TCP, and nothing listens there) and recorded as a denied attempt
// (MethodDirect) from the kernel's reset, which a packet socket on the
// namespace's loopback hands to the host. So is its UDP datagram, to
// any unicast address where nothing of the run listens (MethodDirectUDP, from the
// kernel's ICMP port unreachable: a connected socket reads "connection
// refused", so a DNS lookup fails at once); and its datagram to a
// broadcast or multicast address, which the kernel answers with no
// error, from the datagram itself. Other protocols (a ping) find no
// route. A refusal the kernel drops
// before the host reads it (a burst that outran the reader), and a
// datagram it refused without the error it is recorded from (an older
// kernel's rate limits, which a run as root may set back), are counted
// from the kernel's own counters: Lost, OnLost. The endpoints on the host's
// loopback that the run must reach (a model server, a tool bridge, MCP
// servers over HTTP) are reached at the same address from inside:
// listeners on the same 127.0.0.1:PORT inside the namespace forward each
// connection to the host's.
//
// # How a run uses it
//
// New checks the rules in the host before anything starts. Env (or
// MergeEnv) gives the run's environment the proxy variables. Then one of
// two routes puts the run's first process in the namespace:
//
//   - Prepare and Enter, with CAP_SYS_ADMIN (root): Prepare readies the
//     namespace. It takes one made ahead (its loopback up, its catch-all
//     route set up, the proxy's listener open; see nspool_linux.go);
//     it is ready when Prepare returns, the forwarders' listeners, if
//     any, opened there by a thread of the runtime's that visits the
//     namespace and comes back. Otherwise (none kept, the proxy on
//     another port, a visit that failed) Prepare goes on in the
//     background, on an OS thread of its own that ends once it is done:
//     it joins the namespace taken, or makes one, and opens there the
//     forwarders' listeners (and the proxy's, in one it made), while the
//     run's other start work goes on. Enter, on the locked OS thread that
//     then forks the run's first process, waits for it and moves that
//     thread alone into it (setns). The thread must never be unlocked: it
//     ends with its goroutine. Running, once the run has started, has the
//     next runs' namespaces made.
//   - Wrap and Started, without privilege where unprivileged user
//     namespaces are allowed: the command starts in new user and network
//     namespaces as this program's own binary, whose first stage (run from
//     this package's init, before main, by internal/sandbox's RunStage
//     with this package's network steps) brings the loopback up, opens the
//     listeners, hands them to the host over a Unix socket and executes
//     the command with its arguments and environment and no capability
//     left. Its user and group are mapped to themselves; files of other
//     users show as owned by the overflow user (nobody) inside.
//     WrapRestricted also has the first stage apply a Landlock ruleset
//     just before it executes the command: the thread that starts the
//     command cannot hold the ruleset itself, since the new namespace's
//     id maps are written from it. WrapPrivate also has it give the run
//     its private /tmp and /dev/shm first, in a mount namespace of its
//     own (internal/sandbox's plan); where it cannot, it tells the host
//     why in the same message (PrivateWhy), with the settings links it
//     could not hold (PrivateSkipped). The stage's generic part (its
//     files, the private roots, dropping the capabilities, applying the
//     ruleset and executing the command) is internal/sandbox's, whose
//     own first stage is the same one without the network steps; both
//     read their spec from one variable (sandbox.StageVar), this
//     package's marked as having network steps.
//
// Either way, goroutines of the host's namespace serve the listeners, so
// their dials leave from the host, and the namespace ends with the last
// process in it. Close stops everything and waits for every goroutine,
// but for the release of the packet socket, which waits for an RCU grace
// period in the kernel and ends on a goroutine of its own, after the run.
//
// # What it needs
//
// Enter needs CAP_SYS_ADMIN: root, a binary given the capability, or a
// container allowed it (seccomp included); Probe says whether this
// process has it. Wrap needs unprivileged user namespaces (some
// distributions restrict them); ProbeWrap says whether they are allowed.
// Where a route is not available, it returns a *NamespaceError matching
// ErrUnavailable that says what is missing and how to get it. An
// unprivileged process cannot use Enter: a multithreaded process cannot
// enter a new user namespace, and entering a network namespace needs
// CAP_SYS_ADMIN in the caller's own; hence Wrap's first stage.
//
// # Environment
//
// Env sets HTTP_PROXY, HTTPS_PROXY and ALL_PROXY and their lower-case
// twins to the proxy's address inside the namespace, and NO_PROXY (and
// no_proxy) to the loopback addresses, which inside hold only the
// forwarded endpoints. Codex (reqwest) reads these variables; Gemini CLI
// and Claude Code (Node) read HTTPS_PROXY and HTTP_PROXY for their model
// and web requests. A client that ignores them fails to connect.
package egress
