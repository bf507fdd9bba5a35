package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// stageEnv names the variable that makes a process started by Wrap run
// the first stage (see init) instead of the program: its value is a
// stageSpec in JSON.
const stageEnv = sandbox.EgressStageVar

// stageSpec tells the first stage what to do.
type stageSpec struct {
	FD     int      // the Unix socket to send the listeners on
	Path   string   // the program to execute afterwards; empty for a probe
	Listen []string // the addresses, in order
	// Ruleset, if not 0, is the descriptor of a Landlock ruleset to
	// apply (after PR_SET_NO_NEW_PRIVS) just before the execution.
	Ruleset int
	// Private, if not 0, is the descriptor of a file that holds the
	// ruleset's private /tmp and /dev/shm (sandbox.Ruleset.PrivatePlan),
	// made before the listeners are sent. A file, not this variable: a
	// plan may name thousands of paths, and one string of the environment
	// holds at most 128 KiB (E2BIG).
	Private int `json:",omitempty"`
	// Restricted says that the host asked for a ruleset: the stage
	// refuses to execute Path without one then.
	Restricted bool   `json:",omitempty"`
	Nonce      string // begins the message: the host's check that this spec is its own
	Dir        string // the run's working directory, entered again once the private roots are made
}

// init runs the first stage when this binary was started by Wrap. It
// never returns then.
func init() {
	if v, ok := os.LookupEnv(stageEnv); ok {
		os.Unsetenv(stageEnv)
		os.Exit(runStage(v))
	}
}

// runStage runs in new user and network namespaces, with CAP_NET_ADMIN
// and CAP_NET_RAW there only (ambient): it brings the loopback up, sets
// up the catch-all route of direct connections (catchDirect), opens the
// listeners, sends them and the route's socket to the host over
// spec.FD, drops every capability and executes spec.Path with the same
// arguments and environment. On failure it sends the error's text
// instead, and returns 127.
func runStage(v string) int {
	// Capabilities, no_new_privs and a Landlock domain are the calling
	// thread's: drop, set and execute from one thread. (init already
	// runs locked to the main thread; this keeps it so.)
	runtime.LockOSThread()
	var spec stageSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "egress: %s=%q: %v\n", stageEnv, v, err)
		return 127
	}
	if err := sandbox.CheckStageSpec(spec.Path, spec.Restricted, spec.Ruleset); err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		return 127
	}
	fail := func(err error) int {
		unix.Sendmsg(spec.FD, []byte(err.Error()), nil, nil, 0)
		return 127
	}
	if err := loopbackUp(); err != nil {
		return fail(fmt.Errorf("bring lo up: %w", err))
	}
	// The catch-all route's socket goes last, after the listeners; if it
	// cannot be had, the message says why. The listeners' files stay
	// referenced until they are sent: a collected *os.File closes its
	// descriptor.
	direct, derr := catchDirect()
	var fds []int
	var files []*os.File
	for _, a := range spec.Listen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return fail(err)
		}
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			return fail(err)
		}
		fds, files = append(fds, int(f.Fd())), append(files, f)
	}
	// Why direct connections are not recorded, where they are not, then
	// after a NUL the private roots' report (sandbox.PrivateReport).
	// After the nonce: empty where the socket is sent, which is how the
	// host tells the two apart.
	msg := []byte(spec.Nonce)
	if derr != nil {
		why := sandbox.CutReason(derr.Error())
		if why == "" {
			why = "no reason given"
		}
		msg = append(msg, why...)
	} else {
		fds = append(fds, direct)
	}
	var rep sandbox.PrivateReport
	if spec.Private != 0 && spec.Ruleset != 0 {
		plan, err := sandbox.ReadPlan(spec.Private)
		if err == nil {
			rep.Skipped, err = sandbox.EnterPrivate(plan, spec.Ruleset)
		}
		if rep.Held = err == nil; err != nil {
			rep.Why = err.Error()
		}
		if err := sandbox.EnterDir(spec.Dir); err != nil {
			return fail(err)
		}
	}
	msg = rep.Append(append(msg, 0))
	// The mount namespace goes last, where there is one: the host holds
	// it until the run is reaped, so that its teardown is not on the exit
	// of the run's last process.
	if rep.Held && spec.Path != "" {
		if ns, err := unix.Open("/proc/self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			fds = append(fds, ns)
			defer unix.Close(ns)
		}
	}
	if err := unix.Sendmsg(spec.FD, msg, unix.UnixRights(fds...), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, "egress: send the listeners:", err)
		return 127
	}
	runtime.KeepAlive(files)
	unix.Close(spec.FD)
	if spec.Path == "" {
		return 0
	}
	// The listeners stay open in the host; here they close at the exec
	// (close-on-exec). Nothing of the namespaces' privilege passes on
	// (as root, the network capabilities: sandbox.StageExec), the ruleset
	// is applied as the route without a user namespace applies it
	// (sandbox.RestrictSelf: with Landlock's logging of the denials after
	// the execve where the ABI has it).
	fmt.Fprintln(os.Stderr, "egress:", sandbox.StageExec(spec.Path, spec.Ruleset))
	return 127
}

// Wrap prepares cmd, not yet started, to start in the sandbox without
// CAP_SYS_ADMIN: cmd starts in new user and network namespaces (its user
// and group mapped to themselves) as this program's own binary, whose
// first stage brings the loopback up, opens the proxy's and the
// forwarders' listeners, hands them to this process and executes cmd's
// program with cmd's arguments and environment, with no capability left.
// Call Started once cmd.Start has returned nil.
//
// It needs unprivileged user namespaces (some distributions restrict
// them: ProbeWrap says whether they are allowed) and this package linked
// into the running binary, which it is whenever Wrap is called. Inside,
// files of other users show as owned by the overflow user (nobody) and
// set-user-ID programs do not gain privilege.
func (n *Net) Wrap(cmd *exec.Cmd) error { return n.wrap(cmd, nil, nil) }

// WrapRestricted is Wrap for a command that must also run under the
// Landlock ruleset whose descriptor ruleset holds: the first stage
// applies it, after PR_SET_NO_NEW_PRIVS, once the namespaces are set up
// and just before it executes the command, whose program is then
// executed, and everything it starts runs, under the ruleset. The caller
// keeps and closes ruleset. Use it where the thread that starts cmd
// cannot be restricted itself: writing the new user namespace's id maps
// from a restricted thread is refused.
func (n *Net) WrapRestricted(cmd *exec.Cmd, ruleset *os.File) error { return n.wrap(cmd, ruleset, nil) }

// WrapPrivate is WrapRestricted for a ruleset with private /tmp and
// /dev/shm, whose plan (sandbox.Ruleset.PrivatePlan) the first stage
// carries out in a mount namespace of its own (in the new user
// namespace, with CAP_SYS_ADMIN there) before it applies the ruleset.
// PrivateHeld says, once Started returned, whether they hold.
func (n *Net) WrapPrivate(cmd *exec.Cmd, ruleset *os.File, plan []byte) error {
	return n.wrap(cmd, ruleset, plan)
}

func (n *Net) wrap(cmd *exec.Cmd, ruleset *os.File, plan []byte) error {
	if n.wrapped != nil {
		return errors.New("egress: Wrap called twice on one Net")
	}
	sf, err := sandbox.PrepareStage(cmd, ruleset, plan)
	if err != nil {
		return err
	}
	n.wrapped, n.stageEnd, n.plan, n.stageNonce = sf.Host, sf.Stage, sf.Plan, sf.Nonce
	// The stage's message carries its process ID (receiveListeners).
	unix.SetsockoptInt(int(sf.Host.Fd()), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	sandbox.SetStageEnv(cmd, stageEnv, stageSpec{FD: sf.FD, Path: sf.Path, Listen: n.listenAddrs(), Ruleset: sf.Ruleset, Private: sf.Private,
		Restricted: sf.Ruleset != 0, Nonce: sf.Nonce, Dir: sf.Dir})
	wrapAttr(cmd.SysProcAttr)
	return nil
}

// wrapAttr adds to the new user namespace (sandbox.PrepareStage) a new
// network namespace, and CAP_NET_ADMIN and CAP_NET_RAW (the catch-all
// route's packet socket) kept across the exec of the first stage.
func wrapAttr(a *syscall.SysProcAttr) {
	a.Cloneflags |= unix.CLONE_NEWNET
	a.AmbientCaps = append(a.AmbientCaps, unix.CAP_NET_ADMIN, unix.CAP_NET_RAW)
}

// Started receives the listeners from the first stage of the command
// Wrap prepared, and serves them. Call it once cmd.Start returned nil; if
// Start failed, call Close alone. It returns a *NamespaceError (matching
// ErrUnavailable) if the first stage could not set the namespace up; the
// command then exits with status 127.
func (n *Net) Started() error {
	if n.wrapped == nil {
		return errors.New("egress: Started without Wrap")
	}
	n.stageEnd.Close()
	n.closePlan()
	m, err := receiveListeners(n.wrapped, len(n.listenAddrs()), n.stageNonce)
	n.wrapped.Close()
	if err != nil {
		return err
	}
	n.private, n.privateWhy, n.skipped = m.private.Held, m.private.Why, m.private.Skipped
	n.mntNS = m.ns
	n.serve(m.listeners)
	if m.direct >= 0 {
		// The first stage, now the run's first process, is in the
		// namespace until it exits.
		if m.pid > 0 {
			n.counters = openCounters(fmt.Sprintf("/proc/%d/net", m.pid))
		}
		n.recordDirect(m.direct)
	} else {
		n.bypassErr = m.directErr
	}
	return nil
}

// closeRights closes the descriptors the control messages oob carry.
func closeRights(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for i := range msgs {
		if rights, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			for _, fd := range rights {
				unix.Close(fd)
			}
		}
	}
}

// stageMessage is what the first stage sends the host.
type stageMessage struct {
	listeners []net.Listener
	private   sandbox.PrivateReport // the private roots, where they were asked for
	direct    int                   // the catch-all route's packet socket, or -1
	directErr error                 // why there is none
	ns        *os.File              // the run's mount namespace, or nil
	pid       int                   // the first stage's process ID, or 0
}

// receiveListeners reads the first stage's message on c: nl listeners,
// the catch-all route's socket or why there is none, and the private
// roots' report, after nonce; or the text of its error. A message with
// the descriptors but without nonce is a *sandbox.StageSpecError.
func receiveListeners(c *os.File, nl int, nonce string) (stageMessage, error) {
	m := stageMessage{direct: -1}
	buf := make([]byte, sandbox.StageBuffer)
	oob := make([]byte, unix.CmsgSpace(4*(nl+2))+unix.CmsgSpace(unix.SizeofUcred))
	nb, noob, flags, _, err := unix.Recvmsg(int(c.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err == nil && flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		err = fmt.Errorf("the message was cut (flags %#x): more than %d descriptors or %d bytes", flags, nl+2, len(buf))
	}
	if err != nil {
		if noob > 0 {
			closeRights(oob[:noob])
		}
		return m, &NamespaceError{Op: "receive the listeners", Err: err, Missing: "the first stage in the new namespaces did not answer"}
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:noob]); err == nil {
		for i := range msgs {
			if rights, err := unix.ParseUnixRights(&msgs[i]); err == nil {
				fds = append(fds, rights...)
			} else if cred, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
				m.pid = int(cred.Pid) // SO_PASSCRED: the sender's, as the kernel checks it
			}
		}
	}
	if len(fds) < nl || len(fds) > nl+2 || nb == 0 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		why := errors.New("the first stage exited")
		if nb > 0 {
			why = errors.New(string(buf[:nb]))
		}
		return m, &NamespaceError{Op: "set up the new namespaces", Err: why, Missing: "unprivileged user namespaces with a loopback this user may bring up"}
	}
	body, err := sandbox.CutNonce(buf[:nb], nonce, stageEnv)
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return m, err
	}
	directWhy, rep, _ := strings.Cut(string(body), "\x00")
	m.private = sandbox.ParsePrivateReport([]byte(rep))
	rest := fds[nl:]
	switch {
	case directWhy != "":
		m.directErr = errors.New(directWhy)
	case len(rest) > 0:
		m.direct, rest = rest[0], rest[1:]
	default:
		m.directErr = errors.New("the first stage sent no socket")
	}
	for i, fd := range rest {
		if i == 0 {
			m.ns = os.NewFile(uintptr(fd), "stage-mnt-ns")
		} else {
			unix.Close(fd)
		}
	}
	for i, fd := range fds[:nl] {
		f := os.NewFile(uintptr(fd), "egress-listener")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			for _, l := range m.listeners {
				l.Close()
			}
			for _, fd := range fds[i+1 : nl] {
				unix.Close(fd)
			}
			if m.direct >= 0 {
				unix.Close(m.direct)
			}
			if m.ns != nil {
				m.ns.Close() // an *os.File: never closed by its number, which may be reused
			}
			return m, &NamespaceError{Op: "use a received listener", Err: err, Missing: "a listening socket from the first stage"}
		}
		m.listeners = append(m.listeners, l)
	}
	return m, nil
}

// ProbeWrap reports whether Wrap can give a run a network sandbox here:
// nil if so, else a *NamespaceError (matching ErrUnavailable) naming what
// is missing. It starts this binary's first stage once, which sets the
// namespaces up and exits: about the cost of one run's.
func ProbeWrap() error {
	n, err := New(nil)
	if err != nil {
		return err
	}
	defer n.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Path = ""
	if err := n.Wrap(cmd); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		n.stageEnd.Close()
		n.wrapped.Close()
		return &NamespaceError{Op: "start in new user and network namespaces", Err: err, Missing: sandbox.MissingUserNS(err)}
	}
	serr := n.Started()
	werr := cmd.Wait()
	if serr != nil {
		return serr
	}
	if werr != nil {
		return &NamespaceError{Op: "the first stage", Err: werr, Missing: "the first stage failed after it set the namespaces up"}
	}
	return nil
}
