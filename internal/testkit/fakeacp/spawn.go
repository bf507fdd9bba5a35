package fakeacp

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Helper roles.
const (
	roleSleeper = "sleeper" // Grandchild, and the escapee's orphan
	roleEscapee = "escapee" // leaves the session, starts a sleeper, exits
)

// helperCommand runs role in a copy of this binary; the argument shows in
// ps.
func helperCommand(role string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "fakeacp-"+role)
	cmd.Env = append(os.Environ(), envRole+"="+role)
	return cmd, nil
}

// startHelpers starts what Grandchild and Escapee ask for; once it
// returns, the processes exist (the escapee's orphan too).
func startHelpers(s *Script) error {
	if s.Grandchild {
		cmd, err := helperCommand(roleSleeper)
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		go cmd.Wait()
	}
	if s.Escapee {
		cmd, err := helperCommand(roleEscapee)
		if err != nil {
			return err
		}
		cmd.SysProcAttr = newSession()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("escapee: %w", err)
		}
	}
	return nil
}

// runHelper is the main function of a helper process.
func runHelper(role string) int {
	switch role {
	case roleSleeper:
		time.Sleep(sleepFor)
		return 0
	case roleEscapee:
		cmd, err := helperCommand(roleSleeper)
		if err == nil {
			err = cmd.Start() // orphaned when this process exits
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeacp: escapee:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "fakeacp: unknown role %q\n", role)
	return 2
}
