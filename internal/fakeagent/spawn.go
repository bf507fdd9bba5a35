package fakeagent

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Helper roles, each run by Main in a re-executed copy of the binary (no
// shell, no external programs).
const (
	roleSleeper = "sleeper" // Grandchild: same process group, null stdio
	roleHolder  = "holder"  // HoldStdout: inherits stdout and stderr
	roleEscapee = "escapee" // Escapee: setsid, starts roleEscaped, exits
	roleEscaped = "escaped" // the escapee's orphaned child
)

// readyTimeout bounds how long the fake waits for its helpers to record
// themselves.
const readyTimeout = 30 * time.Second

// startHelpers starts the helper processes the script asks for and waits
// until each has recorded its pid, so that once the fake prints its first
// event, every process of its tree exists and is in the record.
//
// Readiness travels through a pipe: every helper inherits the write end
// (as fd 3, passed on by the escapee to its child) and closes it once it
// has recorded itself; EOF on the read end means all have.
func startHelpers(s *Script) error {
	if !s.Grandchild && !s.Escapee && !s.HoldStdout {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	var escapee *exec.Cmd
	start := func(role string) (*exec.Cmd, error) {
		cmd := helperCommand(exe, role, w)
		if role == roleHolder {
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		}
		if role == roleEscapee {
			cmd.SysProcAttr = newSession()
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", role, err)
		}
		return cmd, nil
	}
	if s.Grandchild {
		_, err = start(roleSleeper)
	}
	if err == nil && s.HoldStdout {
		_, err = start(roleHolder)
	}
	if err == nil && s.Escapee {
		escapee, err = start(roleEscapee)
	}
	w.Close()
	if err != nil {
		return err
	}
	r.SetReadDeadline(time.Now().Add(readyTimeout))
	io.Copy(io.Discard, r)
	if escapee != nil {
		escapee.Wait() // it exits at once, leaving its child orphaned
	}
	return nil
}

// helperCommand returns the command that runs role, handing it ready (the
// write end of the readiness pipe) where the OS allows.
func helperCommand(exe, role string, ready *os.File) *exec.Cmd {
	cmd := exec.Command(exe, "fakeagent-"+role) // the argument shows in ps
	cmd.Env = append(os.Environ(), envRole+"="+role)
	passReady(cmd, ready)
	return cmd
}

// runHelper is the main function of a helper process.
func runHelper(role string) int {
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
	switch role {
	case roleEscapee:
		exe, err := os.Executable()
		if err == nil {
			err = helperCommand(exe, roleEscaped, ready).Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: escapee:", err)
			return 1
		}
		return 0 // orphaning the child
	case roleSleeper, roleHolder, roleEscaped:
		if ready != nil {
			ready.Close()
		}
		time.Sleep(sleepFor)
		return 0
	}
	fmt.Fprintf(os.Stderr, "fakeagent: unknown role %q\n", role)
	return 2
}
