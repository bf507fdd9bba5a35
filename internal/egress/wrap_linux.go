package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// netSpec is the spec of the first stage under network rules: the
// generic part (sandbox.StageSpec, with Net set) and the listeners'
// addresses. The stage itself is sandbox.RunStage's, with the network
// steps (Network) added.
type netSpec struct {
	sandbox.StageSpec
	Listen []string // the addresses, in order

	files    []*os.File // the listeners' files, referenced until they are sent
	counters *counters  // the namespace's counters, referenced until they are sent
}

// init runs the first stage when this binary was started by Wrap. It
// never returns then. (internal/sandbox's init, which runs before, left
// a spec with network steps to this one.)
func init() {
	if v, ok := os.LookupEnv(sandbox.StageVar); ok {
		var spec sandbox.StageSpec
		if json.Unmarshal([]byte(v), &spec) == nil && spec.Net {
			os.Exit(sandbox.RunStage(new(netSpec)))
		}
	}
}

// Network runs in new user and network namespaces, with CAP_NET_ADMIN
// and CAP_NET_RAW there only (ambient): it brings the loopback up, sets
// up the catch-all route of direct connections (catchDirect) and opens
// the listeners. It returns their descriptors, then the route's socket
// and the namespace's counters (openCounters: opened here, they are the
// host's however soon the run exits), or, where the socket cannot be
// had, why. The text of the stage's message is how many counters' files
// follow the socket (stageText), then why there is no socket: empty
// where it is sent, which is how the host tells the two apart.
func (s *netSpec) Network() (fds []int, text string, err error) {
	if err := loopbackUp(); err != nil {
		return nil, "", fmt.Errorf("bring lo up: %w", err)
	}
	direct, derr := catchDirect()
	for _, a := range s.Listen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return nil, "", err
		}
		// The file stays referenced until it is sent: a collected
		// *os.File closes its descriptor.
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			return nil, "", err
		}
		fds, s.files = append(fds, int(f.Fd())), append(s.files, f)
	}
	if derr != nil {
		why := sandbox.CutReason(derr.Error())
		if why == "" {
			why = "no reason given"
		}
		return fds, stageText(0, why), nil
	}
	fds = append(fds, direct)
	s.counters = openCounters("/proc/thread-self/net")
	cf := s.counters.fds()
	return append(fds, cf...), stageText(len(cf), ""), nil
}

// stageText is the text of the first stage's message: k, the number of
// counters' files sent after the catch-all route's socket (a digit), then
// why there is no socket, or nothing.
func stageText(k int, why string) string { return strconv.Itoa(k) + why }

// parseStageText returns what stageText made text of, or 0 and text
// itself where it does not begin with a digit.
func parseStageText(text string) (k int, why string) {
	if text != "" && text[0] >= '0' && text[0] <= '2' {
		return int(text[0] - '0'), text[1:]
	}
	return 0, text
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
	spec := netSpec{StageSpec: sf.Spec(), Listen: n.listenAddrs()}
	spec.Net = true
	sandbox.SetStageEnv(cmd, spec)
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
		n.counters = m.counters
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
	counters  *counters             // the namespace's counters, with direct, or nil
	ns        *os.File              // the run's mount namespace, or nil
}

// maxStageFDs is how many descriptors the first stage sends besides the
// listeners, at most: the catch-all route's socket, snmp and snmp6, and
// the mount namespace.
const maxStageFDs = 4

// receiveListeners reads the first stage's message on c: nl listeners,
// the catch-all route's socket and the namespace's counters or why there
// is no socket, and the private roots' report, after nonce; or the text
// of its error. A message with
// the descriptors but without nonce is a *sandbox.StageSpecError.
func receiveListeners(c *os.File, nl int, nonce string) (stageMessage, error) {
	m := stageMessage{direct: -1}
	buf := make([]byte, sandbox.StageBuffer)
	oob := make([]byte, unix.CmsgSpace(4*(nl+maxStageFDs)))
	nb, noob, flags, _, err := unix.Recvmsg(int(c.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err == nil && flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		err = fmt.Errorf("the message was cut (flags %#x): more than %d descriptors or %d bytes", flags, nl+maxStageFDs, len(buf))
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
			}
		}
	}
	if len(fds) < nl || len(fds) > nl+maxStageFDs || nb == 0 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		why := errors.New("the first stage exited")
		if nb > 0 {
			why = errors.New(string(buf[:nb]))
		}
		return m, &NamespaceError{Op: "set up the new namespaces", Err: why, Missing: "unprivileged user namespaces with a loopback this user may bring up"}
	}
	body, err := sandbox.CutNonce(buf[:nb], nonce, sandbox.StageVar)
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return m, err
	}
	text, rep, _ := strings.Cut(string(body), "\x00")
	k, directWhy := parseStageText(text)
	m.private = sandbox.ParsePrivateReport([]byte(rep))
	rest := fds[nl:]
	switch {
	case directWhy != "":
		m.directErr = errors.New(directWhy)
	case len(rest) > k:
		m.direct = rest[0]
		m.counters = countersOf(rest[1 : 1+k])
		rest = rest[1+k:]
	default:
		m.directErr = errors.New("the first stage sent no socket")
		for _, fd := range rest {
			unix.Close(fd)
		}
		rest = nil
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
			m.counters.close()
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
