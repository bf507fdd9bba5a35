package fakeagent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Helper roles, each run by Main in a re-executed copy of the binary (no
// shell, no external programs). Proc.Role documents them.
const (
	roleSleeper = "sleeper" // Grandchild: same process group, null stdio
	roleHolder  = "holder"  // HoldStdout: inherits stdout and stderr
	roleEscapee = "escapee" // Escapee: setsid, starts roleEscaped, exits
	roleEscaped = "escaped" // the escapee's orphaned child

	roleSessionHelper = "session-helper" // SessionHelper: kept and used across turns

	// TurnSpawns, started on every turn of a session.
	roleTurnGrandchild  = "turn-grandchild"   // same process group, null stdio
	roleTurnDaemonStart = "turn-daemon-start" // starts roleTurnDaemon, exits
	roleTurnDaemon      = "turn-daemon"       // setsid, orphaned
	roleTurnEnviStart   = "turn-envi-start"   // starts roleTurnEnvi, exits
	roleTurnEnvi        = "turn-envi-daemon"  // setsid, cleared environment, orphaned
)

// readyTimeout bounds how long the fake waits for its helpers to record
// themselves.
const readyTimeout = 30 * time.Second

// startReady starts the commands mk makes, each given w, the write end of a
// readiness pipe, and waits until every process holding w has closed it:
// every helper inherits it (as fd 3, passed on by a helper to the child it
// starts) and closes it once it has recorded itself, so EOF on the read end
// means all have. It returns the commands it started.
func startReady(mk func(w *os.File) []*exec.Cmd) ([]*exec.Cmd, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var started []*exec.Cmd
	for _, cmd := range mk(w) {
		if err = cmd.Start(); err != nil {
			err = fmt.Errorf("starting %s: %w", cmd.Args[0], err)
			break
		}
		started = append(started, cmd)
	}
	w.Close()
	if err != nil {
		return started, err
	}
	r.SetReadDeadline(time.Now().Add(readyTimeout))
	io.Copy(io.Discard, r)
	return started, nil
}

// startHelpers starts the helper processes the script asks for and waits
// until each has recorded its pid, so that once the fake prints its first
// event, every process of its tree exists and is in the record. It returns
// the Grandchild helper's command, if one was started.
func startHelpers(s *Script) (*exec.Cmd, error) {
	if !s.Grandchild && !s.Escapee && !s.HoldStdout && !s.ClearedEscapee {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var escapee, cleared, sleeper *exec.Cmd
	_, err = startReady(func(w *os.File) []*exec.Cmd {
		var cmds []*exec.Cmd
		if s.Grandchild {
			sleeper = helperCommand(exe, roleSleeper, w)
			cmds = append(cmds, sleeper)
		}
		if s.HoldStdout {
			cmd := helperCommand(exe, roleHolder, w)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			cmds = append(cmds, cmd)
		}
		if s.Escapee {
			escapee = helperCommand(exe, roleEscapee, w)
			escapee.SysProcAttr = newSession()
			cmds = append(cmds, escapee)
		}
		if s.ClearedEscapee {
			cleared = helperCommand(exe, roleTurnEnviStart, w)
			cmds = append(cmds, cleared)
		}
		return cmds
	})
	if err != nil {
		return nil, err
	}
	for _, c := range []*exec.Cmd{escapee, cleared} {
		if c != nil {
			c.Wait() // it exits at once, leaving its child orphaned
		}
	}
	return sleeper, nil
}

// startSession starts what a session starts before its first turn: the
// helpers of Grandchild, Escapee and HoldStdout, and the session helper.
func (a *agent) startSession() error {
	if err := a.startHelpers(); err != nil {
		return err
	}
	h, err := startSessionHelper(&a.s)
	if err != nil {
		return fmt.Errorf("session helper: %w", err)
	}
	a.helper = h
	return nil
}

// A sessionHelper is the helper a session keeps across turns
// (Script.SessionHelper): a child of the fake that answers each line the
// fake writes, as an MCP server answers a CLI.
type sessionHelper struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// startSessionHelper starts the session helper if the script asks for one
// (nil otherwise), once it has recorded itself.
func startSessionHelper(s *Script) (*sessionHelper, error) {
	if !s.SessionHelper {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var h sessionHelper
	var perr error
	_, err = startReady(func(w *os.File) []*exec.Cmd {
		cmd := helperCommand(exe, roleSessionHelper, w)
		var out io.Reader
		if h.in, perr = cmd.StdinPipe(); perr == nil {
			out, perr = cmd.StdoutPipe()
		}
		if perr != nil {
			return nil
		}
		h.out = bufio.NewReader(out)
		return []*exec.Cmd{cmd}
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// use asks the helper to answer for turn n, and returns an error when it
// does not (it is gone). A nil helper has nothing to do.
func (h *sessionHelper) use(n int) error {
	if h == nil {
		return nil
	}
	ask := "turn " + strconv.Itoa(n)
	if _, err := io.WriteString(h.in, ask+"\n"); err != nil {
		return err
	}
	l, err := h.out.ReadString('\n')
	if err != nil {
		return err
	}
	if got := strings.TrimSuffix(l, "\n"); got != "ok "+ask {
		return fmt.Errorf("answered %q to %q", got, ask)
	}
	return nil
}

// beginTurn does what the script asks at the start of turn n of a session,
// before the turn's first event: it uses the session helper and starts the
// turn's processes (TurnSpawns), which have all recorded themselves when it
// returns. A failure ends the fake (see Script.SessionHelper).
func (a *agent) beginTurn(n int) {
	if err := a.helper.use(n); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent: the session helper is gone:", err)
		os.Exit(4)
	}
	if !a.s.TurnSpawns {
		return
	}
	if err := spawnTurn(n); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent: turn processes:", err)
		os.Exit(2)
	}
}

// spawnTurn starts turn n's processes: a grandchild in the fake's group
// and two daemons, each started by a process that exits at once (as
// `setsid -f CMD` does), one of them with a cleared environment (as
// `setsid -f env -i CMD` does).
func spawnTurn(n int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	turn := envTurn + "=" + strconv.Itoa(n)
	started, err := startReady(func(w *os.File) []*exec.Cmd {
		var cmds []*exec.Cmd
		for _, role := range []string{roleTurnGrandchild, roleTurnDaemonStart, roleTurnEnviStart} {
			cmd := helperCommand(exe, role, w)
			cmd.Env = append(cmd.Env, turn)
			cmds = append(cmds, cmd)
		}
		return cmds
	})
	for _, cmd := range started {
		// The grandchild is reaped when it is killed, as a CLI reaps its
		// tools; the other two exit at once.
		go cmd.Wait()
	}
	return err
}

// helperCommand returns the command that runs role, handing it ready (the
// write end of the readiness pipe) where the OS allows.
func helperCommand(exe, role string, ready *os.File) *exec.Cmd {
	cmd := exec.Command(exe, "fakeagent-"+role) // the argument shows in ps
	cmd.Env = append(os.Environ(), envRole+"="+role)
	passReady(cmd, ready)
	return cmd
}

// clearedCommand is helperCommand for a process whose environment was
// cleared (env -i): it holds only what the helper needs to run and to
// record itself (the record directory and the signal behaviour of s) and
// to end with the test binary (envLifeline), not EnvTag, EnvOwner or
// anything the library set.
func clearedCommand(exe, role string, s *Script, ready *os.File) *exec.Cmd {
	cmd := exec.Command(exe, "fakeagent-"+role)
	b, _ := json.Marshal(Script{RecordDir: s.RecordDir, IgnoreSignals: s.IgnoreSignals})
	cmd.Env = []string{EnvScript + "=" + string(b), envRole + "=" + role, envTurn + "=" + os.Getenv(envTurn), envLifeline + "=" + os.Getenv(EnvOwner)}
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	passReady(cmd, ready)
	return cmd
}

// runHelper is the main function of a helper process.
func runHelper(role string) int {
	switch role {
	case roleToolLoad:
		return runToolLoad()
	case roleToolChild:
		sleepOwned(sleepFor)
		return 0
	case roleCommandCall:
		return runCommandCall()
	}
	s, _ := parseScript(os.Getenv(EnvScript))
	if s.IgnoreSignals {
		// Notify, unlike Ignore, does not pass SIG_IGN on to exec'd
		// children. Signals that do not fit are dropped.
		signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)
	}
	recorder{dir: s.RecordDir}.addProc(role)
	var ready *os.File
	if fd, err := strconv.Atoi(os.Getenv(envReady)); err == nil {
		ready = os.NewFile(uintptr(fd), "ready")
	}
	// starter starts the child of a helper that then exits, orphaning it.
	starter := func(child *exec.Cmd) int {
		if err := child.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: %s: %v\n", role, err)
			return 1
		}
		return 0
	}
	exe, err := os.Executable()
	if err != nil && (role == roleEscapee || role == roleTurnDaemonStart || role == roleTurnEnviStart) {
		fmt.Fprintf(os.Stderr, "fakeagent: %s: %v\n", role, err)
		return 1
	}
	switch role {
	case roleEscapee:
		return starter(helperCommand(exe, roleEscaped, ready))
	case roleTurnDaemonStart:
		cmd := helperCommand(exe, roleTurnDaemon, ready)
		cmd.SysProcAttr = newSession()
		return starter(cmd)
	case roleTurnEnviStart:
		cmd := clearedCommand(exe, roleTurnEnvi, &s, ready)
		cmd.SysProcAttr = newSession()
		return starter(cmd)
	case roleSessionHelper:
		if ready != nil {
			ready.Close()
		}
		// Answer each line until the fake is gone, then sleep on:
		// killing it is the library's job.
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("ok " + sc.Text())
		}
		sleepOwned(sleepFor)
		return 0
	case roleSleeper, roleHolder, roleEscaped, roleTurnGrandchild, roleTurnDaemon, roleTurnEnvi:
		var caught chan os.Signal
		if role == roleSleeper && s.GrandchildTraps {
			// Notify, unlike a disposition inherited as SIG_IGN,
			// receives the signals: set before the helper is ready.
			caught = make(chan os.Signal, 2)
			signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
		}
		if ready != nil {
			ready.Close()
		}
		if caught == nil {
			sleepOwned(sleepFor)
			return 0
		}
		go func() {
			sleepOwned(sleepFor)
			os.Exit(0)
		}()
		// Signals sent one after the other may be caught in any order
		// by the helper's threads: each is recorded.
		for sig := range caught {
			recorder{dir: s.RecordDir}.addSignal(sig)
			if sig == os.Interrupt {
				return 0
			}
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "fakeagent: unknown role %q\n", role)
	return 2
}

// sleepOwned sleeps for d, or until the process that made the helper's
// script (EnvOwner, or envLifeline after a cleared environment) has exited,
// whichever comes first (Linux; elsewhere it sleeps for d).
func sleepOwned(d time.Duration) {
	owner := os.Getenv(EnvOwner)
	if owner == "" {
		owner = os.Getenv(envLifeline)
	}
	awaitExit(owner, d)
}
