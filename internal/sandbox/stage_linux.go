package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// A run of a process that may not make a mount namespace (not root) gets
// its private /tmp and /dev/shm by another route where unprivileged user
// namespaces are allowed: the run is born in new user and mount
// namespaces (its user and group mapped to themselves) as this program's
// own binary, whose first stage (init, before main) carries out the
// ruleset's plan (EnterPrivate), tells the host how it went, drops every
// capability, applies the ruleset and executes the run's program. The
// host's network is the run's, unchanged. Under network rules
// internal/egress's first stage is the same one (RunStage), in a network
// namespace too, with its network steps added (a NetStage).

// stageEnv names the variable that makes a process started by Wrap (or
// by internal/egress's) run the first stage instead of the program: its
// value is a StageSpec in JSON, or a spec that embeds one.
const stageEnv = StageVar

// A StageSpec tells a first stage what to do. internal/egress's spec
// embeds it, its own fields beside these.
type StageSpec struct {
	FD      int    // the Unix socket to send the report on
	Path    string // the program to execute afterwards; empty for a probe
	Ruleset int    // the Landlock ruleset to apply, or 0 for a probe
	Private int    `json:",omitempty"` // the file that holds the private roots' plan, or 0
	// Restricted says that the host asked for a ruleset: the stage
	// refuses to execute Path without one then.
	Restricted bool   `json:",omitempty"`
	Nonce      string // begins the report: the host's check that this spec is its own
	Dir        string // the run's working directory, entered again once the private roots are made
	// Net says that the stage takes network steps too: the package that
	// adds them (internal/egress) runs it from its own init, with its
	// NetStage, not this package's init.
	Net bool `json:",omitempty"`
}

// Stage returns s: what RunStage reads of a spec that embeds a StageSpec.
func (s *StageSpec) Stage() *StageSpec { return s }

// A NetStage is what a first stage under network rules adds to RunStage:
// its spec, which embeds a StageSpec (Stage returns it), and its network
// steps.
type NetStage interface {
	Stage() *StageSpec
	// Network runs first, in the new namespaces with the network
	// capabilities the command kept: it returns the descriptors the host
	// is sent, before the mount namespace, and the text the message
	// carries before the private roots' report. An error ends the stage,
	// its text sent to the host instead.
	Network() (fds []int, text string, err error)
}

// init runs the first stage when this binary was started by Wrap (a
// start through a shell's path is internal/shellshim's, whose init runs
// before this one). It never returns then. A
// spec with network steps (Net) is left to internal/egress's init, which
// runs after this one (it imports this package), and which every binary
// that writes such a spec links.
func init() {
	v, ok := os.LookupEnv(stageEnv)
	if !ok {
		return
	}
	var spec StageSpec
	if json.Unmarshal([]byte(v), &spec) == nil && spec.Net {
		return
	}
	os.Exit(RunStage(nil))
}

// RunStage runs the first stage whose spec the variable StageVar holds,
// and removes it: in new user and mount namespaces (and a network
// namespace, with net) with CAP_SYS_ADMIN there only (ambient), it takes
// net's network steps (if net is not nil), makes the private roots of
// the plan, sends the report (PrivateReport, after net's descriptors and
// text) over the spec's FD, drops every capability, applies the ruleset
// and executes the spec's Path with the same arguments and environment.
// A probe (no Path) makes a mount namespace without net, reports and
// returns 0. On failure it returns 127, having written why to its
// standard error, or, with net, sent it to the host.
func RunStage(net NetStage) int {
	// Capabilities, no_new_privs, the namespaces and a Landlock domain
	// are the calling thread's: all from one thread. (init already runs
	// locked to the main thread; this keeps it so.)
	runtime.LockOSThread()
	v := os.Getenv(stageEnv)
	os.Unsetenv(stageEnv)
	var spec *StageSpec
	var into any
	if net != nil {
		spec, into = net.Stage(), net
	} else {
		spec = new(StageSpec)
		into = spec
	}
	if err := json.Unmarshal([]byte(v), into); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %s=%q: %v\n", stageEnv, v, err)
		return 127
	}
	if err := CheckStageSpec(spec.Path, spec.Restricted, spec.Ruleset); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	fail := func(err error) int {
		if net != nil {
			// The host reads it as the message.
			unix.Sendmsg(spec.FD, []byte(err.Error()), nil, nil, 0)
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		return 127
	}
	msg := []byte(spec.Nonce)
	var fds []int
	if net != nil {
		nfds, text, err := net.Network()
		if err != nil {
			return fail(err)
		}
		fds = nfds
		msg = append(append(msg, text...), 0)
	}
	var rep PrivateReport
	switch {
	case spec.Path == "" && net == nil:
		// The probe of this route; the network route's answers by its
		// network steps.
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			rep.Why = "unshare(CLONE_NEWNS): " + err.Error()
		} else {
			rep.Held = true
		}
	case spec.Private != 0 && spec.Ruleset != 0:
		plan, err := ReadPlan(spec.Private)
		if err == nil {
			rep.Skipped, err = EnterPrivate(plan, spec.Ruleset)
		}
		if rep.Held = err == nil; err != nil {
			rep.Why = err.Error()
		}
		if err := EnterDir(spec.Dir); err != nil {
			return fail(err)
		}
	}
	// The mount namespace goes to the host last, which holds it until
	// the run is reaped: its teardown (the unmounts and an RCU grace
	// period) is then not on the exit of the run's last process.
	if rep.Held && spec.Path != "" {
		if ns, err := unix.Open("/proc/self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			fds = append(fds, ns)
			defer unix.Close(ns)
		}
	}
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(spec.FD, rep.Append(msg), rights, nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: send the first stage's report:", err)
		return 127
	}
	runtime.KeepAlive(net) // what it holds open until sent
	unix.Close(spec.FD)
	if spec.Path == "" {
		return 0
	}
	// What the namespaces gave closes at the execution (close-on-exec) or
	// is dropped (StageExec); so does every descriptor from the stage's
	// own up, the host program's stray ones among them.
	if err := CloseStrayOnExec(spec.FD); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	if err := StageExec(spec.Path, spec.Ruleset); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return 127
}

// StageExec ends a first stage in a user namespace of the run's own: it
// drops every capability the namespace gave the calling thread (as root,
// EscapeCaps and CAP_NET_RAW, from the bounding set too, as the route
// without a user namespace does), sets no_new_privs (so that no program
// with file capabilities regains any in the namespace), applies the
// Landlock ruleset open at ruleset (if not 0; closing it) and executes
// path with this process's arguments and environment. It returns only on
// failure.
func StageExec(path string, ruleset int) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: drop the ambient capabilities: %w", err)
	}
	if os.Getuid() != 0 {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var none [2]unix.CapUserData
		if err := unix.Capset(&hdr, &none[0]); err != nil {
			return fmt.Errorf("sandbox: drop the capabilities: %w", err)
		}
	} else if err := DropCaps(append(slices.Clone(EscapeCaps), unix.CAP_NET_RAW)...); err != nil {
		// root keeps its capabilities in the namespace, but for these
		return fmt.Errorf("sandbox: drop the capabilities that reach past the sandbox: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if ruleset != 0 {
		err := RestrictSelf(ruleset)
		unix.Close(ruleset)
		if err != nil {
			return err
		}
	}
	unsetStageOnly()
	err := syscall.Exec(path, os.Args, os.Environ())
	return fmt.Errorf("sandbox: execute %s: %w", path, err)
}

// CloseStrayOnExec marks close-on-exec every descriptor of this process
// from from up. A first stage's command gets its standard descriptors and
// the files its host passed it at 3 up to the stage's own, which come
// after them (PrepareStage); every other descriptor it holds is one the
// host's program had without close-on-exec (inherited from its own
// parent, or opened by cgo), and must not reach the program the stage
// executes: Landlock checks a file where it is opened, not where an open
// descriptor is used.
func CloseStrayOnExec(from int) error {
	if from < 3 {
		return fmt.Errorf("sandbox: the first stage's descriptors begin at %d, below 3", from)
	}
	err := unix.CloseRange(uint(from), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("sandbox: list the descriptors to close at the execution: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("sandbox: list the descriptors to close at the execution: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < from {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("sandbox: mark descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}

// CheckStageSpec refuses a first stage's spec that would execute path
// without a ruleset where the host asked for one (restricted).
func CheckStageSpec(path string, restricted bool, ruleset int) error {
	if path != "" && restricted && ruleset == 0 {
		return fmt.Errorf("sandbox: the first stage's spec asks for a ruleset but names none: %s is not executed unrestricted", path)
	}
	return nil
}

// EnterDir enters dir again by its path, if not empty, once a first stage
// made the run's private roots: the working directory the stage was born
// in is the host's, beneath the new /tmp or /dev/shm where it lies there,
// and relative paths would reach through it past the read-only binds.
func EnterDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("sandbox: enter the working directory %s in the run's private roots: %w", dir, err)
	}
	return nil
}

// A StageSpecError is a first stage's report that does not begin with the
// nonce its host put in the stage's spec: the stage ran a spec other than
// its host's, so nothing of what it reports holds, and the run fails.
type StageSpecError struct {
	Var string // the variable that carries the stage's spec
}

func (e *StageSpecError) Error() string {
	return "sandbox: the first stage ran a spec other than this process's; remove " + e.Var + " from the run's environment"
}

// CutNonce returns the report msg without the nonce it must begin with,
// or a *StageSpecError naming the spec's variable v.
func CutNonce(msg []byte, nonce, v string) ([]byte, error) {
	rest, ok := bytes.CutPrefix(msg, []byte(nonce))
	if !ok || nonce == "" {
		return nil, &StageSpecError{Var: v}
	}
	return rest, nil
}

// PrivateReport is what a first stage tells the host of the private
// roots it was asked for.
type PrivateReport struct {
	Held    bool     // they hold
	Why     string   // else why not
	Skipped []string // the links on the way to a settings file left as they are, each with why
}

// MaxReason bounds each reason a first stage sends, so that its message
// fits the host's buffer (StageBuffer).
const MaxReason = 2000

// maxSkipped bounds the skipped links a report carries.
const maxSkipped = 16

// StageBuffer is the size of the buffer a first stage's message fits.
const StageBuffer = 1 << 16

// CutReason returns s cut to at most MaxReason bytes, at a character's
// start, and without NUL bytes, which separate the parts of a first
// stage's message.
func CutReason(s string) string {
	s = strings.ReplaceAll(s, "\x00", " ")
	if len(s) <= MaxReason {
		return s
	}
	s = s[:MaxReason]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// Append appends the report to b: a byte that says whether the roots
// hold (1) or not (0), why not, and each skipped link after a NUL.
func (r PrivateReport) Append(b []byte) []byte {
	held := byte(0)
	if r.Held {
		held = 1
	}
	b = append(append(b, held), CutReason(r.Why)...)
	for i, s := range r.Skipped {
		if i == maxSkipped {
			s = fmt.Sprintf("and %d more", len(r.Skipped)-i)
		}
		b = append(append(b, 0), CutReason(s)...)
		if i == maxSkipped {
			break
		}
	}
	return b
}

// ParsePrivateReport reads a report that Append wrote.
func ParsePrivateReport(b []byte) PrivateReport {
	if len(b) == 0 {
		return PrivateReport{Why: "the first stage sent no report"}
	}
	parts := strings.Split(string(b[1:]), "\x00")
	return PrivateReport{Held: b[0] == 1, Why: parts[0], Skipped: parts[1:]}
}

// ReadPlan reads the private roots' plan from the file open at fd, and
// closes it.
func ReadPlan(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "private-plan")
	defer f.Close()
	plan, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("sandbox: read the private roots' plan: %w", err)
	}
	return plan, nil
}

// PlanFile returns a file in memory that holds plan, read from its start,
// for a first stage to read (ReadPlan): a file, not a variable of the
// environment, since a plan may name thousands of paths and one string of
// the environment holds at most 128 KiB (E2BIG).
func PlanFile(plan []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("clinvoke-private-plan", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: a file for the private roots' plan: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "private-plan")
	if _, err := f.Write(plan); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: write the private roots' plan: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: rewind the private roots' plan: %w", err)
	}
	return f, nil
}

// UserNSAttr asks a in new user namespace with this process's user and
// group mapped to themselves (setgroups denied), as a first stage's
// namespaces are made, and in a new IPC namespace: the System V IPC and
// POSIX message queues of the run's own, gone with it.
func UserNSAttr(a *syscall.SysProcAttr) {
	uid, gid := os.Getuid(), os.Getgid()
	a.Cloneflags |= unix.CLONE_NEWUSER | unix.CLONE_NEWIPC
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
}

// StageFiles are what a first stage is handed, and where the command
// finds them.
type StageFiles struct {
	Host, Stage *os.File // the socket's host end, and the stage's
	Plan        *os.File // the private roots' plan, or nil
	Path        string   // the program the stage executes (the command's)
	Dir         string   // the command's working directory (this process's where it has none)
	Nonce       string   // a random string the stage's report must begin with (CutNonce)
	// FD, Ruleset and Private are the descriptors of the stage's end,
	// the ruleset and the plan in the command, 0 where there is none.
	FD, Ruleset, Private int
}

// Spec returns the spec of the stage f prepares: its descriptors, the
// program, the working directory and the nonce; Restricted where it has
// a ruleset.
func (f *StageFiles) Spec() StageSpec {
	return StageSpec{FD: f.FD, Path: f.Path, Ruleset: f.Ruleset, Private: f.Private, Restricted: f.Ruleset != 0, Nonce: f.Nonce, Dir: f.Dir}
}

// PrepareStage prepares cmd, not yet started, to start as this program's
// own binary in a new user namespace (UserNSAttr): it hands the command
// one end of a new socket for the stage's message, the ruleset (if not
// nil) and, with a ruleset and a plan, the plan in a file (with
// CAP_SYS_ADMIN kept across the execution, for the mount namespace). The
// caller adds its namespaces and its spec (SetStageEnv), and closes the
// files it is given once the command started, or failed to.
func PrepareStage(cmd *exec.Cmd, ruleset *os.File, plan []byte) (*StageFiles, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	sf := &StageFiles{Host: os.NewFile(uintptr(fds[0]), "stage-host"), Stage: os.NewFile(uintptr(fds[1]), "stage"), Path: cmd.Path, Dir: cmd.Dir, Nonce: rand.Text()}
	if sf.Dir == "" {
		sf.Dir, _ = os.Getwd()
	}
	sf.FD = 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, sf.Stage)
	if ruleset != nil {
		sf.Ruleset = 3 + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, ruleset)
		if len(plan) > 0 {
			if sf.Plan, err = PlanFile(plan); err != nil {
				sf.Host.Close()
				sf.Stage.Close()
				return nil, err
			}
			sf.Private = 3 + len(cmd.ExtraFiles)
			cmd.ExtraFiles = append(cmd.ExtraFiles, sf.Plan)
		}
	}
	cmd.Path = "/proc/self/exe"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	UserNSAttr(cmd.SysProcAttr)
	if sf.Private != 0 {
		// For the mount namespace; dropped with the rest before the
		// execution.
		cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, unix.CAP_SYS_ADMIN)
	}
	return sf, nil
}

// SetStageEnv sets in cmd's environment (this process's where it has
// none) the variable StageVar, whose value is spec (a StageSpec, or a
// value that embeds one) in JSON: what makes the program's binary run as
// a first stage. Every entry of the first stages' variables (IsStageVar)
// cmd's environment held is removed: the first of duplicates would be the
// one the stage reads. The stage's own GOMAXPROCS=1 is added where cmd's
// environment sets none (stageOnlyEnv), before the spec, which comes last.
func SetStageEnv(cmd *exec.Cmd, spec any) {
	b, _ := json.Marshal(spec)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	env := make([]string, 0, len(cmd.Env)+1)
	for _, kv := range cmd.Env {
		if k, _, _ := strings.Cut(kv, "="); !IsStageVar(k) {
			env = append(env, kv)
		}
	}
	cmd.Env = append(stageOnlyEnv(env), stageEnv+"="+string(b))
}

// A Stage is the host's end of a command Wrap prepared.
type Stage struct {
	host, stage *os.File // the socket's two ends
	plan        *os.File
	ns          *os.File // the run's mount namespace, until handed over
	nonce       string   // the report's first bytes
	rep         PrivateReport
}

// Wrap prepares cmd, not yet started, to start in new user and mount
// namespaces as this program's own binary, whose first stage gives the
// command the private /tmp and /dev/shm of plan (Ruleset.PrivatePlan,
// none if empty), applies the Landlock ruleset open as ruleset (the
// caller keeps and closes it) and executes cmd's program with cmd's
// arguments and environment, with no capability left. The host's network
// stays the command's. Call Started once cmd.Start returned nil, else
// Close. The thread that starts cmd must not be restricted: writing the
// new user namespace's id maps from a restricted thread is refused.
func Wrap(cmd *exec.Cmd, ruleset *os.File, plan []byte) (*Stage, error) {
	sf, err := PrepareStage(cmd, ruleset, plan)
	if err != nil {
		return nil, err
	}
	if sf.Private == 0 {
		// Without a plan (a probe) the stage makes a mount namespace all
		// the same.
		cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, unix.CAP_SYS_ADMIN)
	}
	SetStageEnv(cmd, sf.Spec())
	return &Stage{host: sf.Host, stage: sf.Stage, plan: sf.Plan, nonce: sf.Nonce}, nil
}

// Started receives the first stage's report, once cmd.Start returned nil:
// whether the private roots hold (Private), and the settings links they
// left as they are (Skipped). An error means the first stage ended
// without a report (the command then exits with status 127), or with one
// that does not carry this process's nonce (a *StageSpecError: the
// command must not run).
func (s *Stage) Started() error {
	s.stage.Close()
	s.closePlan()
	buf := make([]byte, StageBuffer)
	oob := make([]byte, unix.CmsgSpace(4))
	n, noob, flags, _, err := unix.Recvmsg(int(s.host.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	s.host.Close()
	if err == nil {
		s.ns = namespaceRights(oob[:noob])
	}
	switch {
	case err != nil:
		return fmt.Errorf("sandbox: receive the first stage's report: %w", err)
	case n == 0:
		return errors.New("sandbox: the first stage in the run's user namespace exited before its report: see the run's standard error")
	case flags&unix.MSG_TRUNC != 0:
		return fmt.Errorf("sandbox: the first stage's report was cut at %d bytes", len(buf))
	}
	msg, err := CutNonce(buf[:n], s.nonce, stageEnv)
	if err != nil {
		return err
	}
	s.rep = ParsePrivateReport(msg)
	return nil
}

// namespaceRights returns the first file passed in oob (a control
// message of SCM_RIGHTS), closing any other, or nil if none: the mount
// namespace a first stage sends with its report.
func namespaceRights(oob []byte) *os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var ns *os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if ns == nil {
				ns = os.NewFile(uintptr(fd), "stage-mnt-ns")
			} else {
				unix.Close(fd)
			}
		}
	}
	return ns
}

// Namespace hands over, once Started returned nil, the run's mount
// namespace, which the first stage sent with its report (nil if it sent
// none): the caller closes it once the run is reaped, so that the
// namespace's teardown is not on the exit of the run's last process. A
// namespace not handed over is released by Close.
func (s *Stage) Namespace() *os.File {
	ns := s.ns
	s.ns = nil
	return ns
}

// Private reports, once Started returned nil, whether the run got its
// private /tmp and /dev/shm, and if not, why.
func (s *Stage) Private() (bool, string) {
	if s.rep.Held {
		return true, ""
	}
	return false, "the first stage in the run's user namespace could not make them: " + s.rep.Why
}

// Skipped returns, once Started returned nil, the links on the way to a
// settings file (and the files they end at) that could not be held
// read-only, each with why.
func (s *Stage) Skipped() []string { return s.rep.Skipped }

// Close releases what Wrap made and Started has not.
func (s *Stage) Close() error {
	s.host.Close()
	s.stage.Close()
	s.closePlan()
	if s.ns != nil {
		s.ns.Close()
		s.ns = nil
	}
	return nil
}

func (s *Stage) closePlan() {
	if s.plan != nil {
		s.plan.Close()
		s.plan = nil
	}
}

// ProbeStage reports whether Wrap can give a run its private /tmp and
// /dev/shm here: nil if so, else why not (unprivileged user namespaces
// restricted, most often). It starts the first stage once, which makes a
// mount namespace in a new user namespace and exits; later calls return
// the first lasting answer: a success, or a refusal that stays (EPERM,
// EACCES, EINVAL); a passing failure (the user namespaces' limit reached)
// is asked again.
func ProbeStage() error { return stageProbe.get() }

var stageProbe = lastingOnce{f: probeStage}

// lastingOnce calls f until it returns nil or a lasting refusal
// (lasting), and returns that answer from then on.
type lastingOnce struct {
	f    func() error
	mu   sync.Mutex
	done bool
	err  error
}

func (o *lastingOnce) get() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return o.err
	}
	err := o.f()
	if err == nil || lasting(err) {
		o.done, o.err = true, err
	}
	return err
}

// lasting reports whether err is a refusal that stays: one no later
// attempt would change.
func lasting(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}

func probeStage() error {
	cmd := exec.Command("/proc/self/exe")
	cmd.Path = ""
	s, err := Wrap(cmd, nil, nil)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		s.Close()
		return fmt.Errorf("a user namespace for the run's private /tmp and /dev/shm: %w: %s", err, MissingUserNS(err))
	}
	serr := s.Started()
	s.Close()
	werr := cmd.Wait()
	switch {
	case serr != nil:
		return serr
	case !s.rep.Held:
		return fmt.Errorf("a mount namespace in the run's user namespace: %s", s.rep.Why)
	case werr != nil:
		return fmt.Errorf("the first stage in the run's user namespace: %w", werr)
	}
	return nil
}

// MissingUserNS names what the host lacks when a child cannot start in a
// new user namespace, and how to get it.
func MissingUserNS(err error) string {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return "unprivileged user namespaces are restricted here: allow them (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 with an AppArmor profile for the program), or run as root"
	case errors.Is(err, unix.ENOSPC):
		return "the limit on user namespaces is reached: raise /proc/sys/user/max_user_namespaces"
	case errors.Is(err, unix.EINVAL):
		return "this kernel has no user namespaces: build it with CONFIG_USER_NS"
	}
	return "the kernel refused a new user namespace"
}
