//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// A host typed into a terminal runs under a shell: the shell leads the
// terminal's session and starts the host as a job, in a process group of
// its own that it puts in the foreground; Ctrl-C then signals that group
// only, and when the host exits the shell stays. A host that led the
// session itself would make the kernel hang up the terminal when it exits,
// and SIGHUP whatever of its group is left (the MCP server, still
// stopping), which no user's terminal does. So the test binary plays the
// shell: TestMain runs jobShell when envJobShell is set.
const (
	// envJobShell names the file where the job shell reports the host's
	// pid ("pid N") and, once it has reaped it, its status ("exit N").
	envJobShell = "CLINVOKE_E2E_JOBSHELL"
	// envJobEnv holds the host's extra environment, as a JSON list, so
	// that the shell itself carries none of it (no rig tag in particular).
	envJobEnv = "CLINVOKE_E2E_JOBSHELL_ENV"
)

// jobShell runs its arguments as a foreground job on the terminal that is
// its standard input, reports the job's pid and exit status to the file
// named by envJobShell, then stays, as a shell at its prompt does, until the
// test closes the pipe on its file descriptor 3. (It does not read the
// terminal meanwhile: its process group, whose parent is outside the
// session, is orphaned, so a read while the job holds the foreground fails
// at once, and a session leader that exits hangs up the terminal, which
// sends SIGHUP to whatever is left of the job.)
func jobShell() int {
	report := os.Getenv(envJobShell)
	var extra []string
	if err := json.Unmarshal([]byte(os.Getenv(envJobEnv)), &extra); err != nil {
		fmt.Fprintln(os.Stderr, "jobshell:", err)
		return 2
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envJobShell+"=") && !strings.HasPrefix(kv, envJobEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Env = append(env, extra...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A new process group put in the foreground of the terminal on fd 0.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "jobshell:", err)
		return 2
	}
	appendLine(report, fmt.Sprintf("pid %d", cmd.Process.Pid))
	_ = cmd.Wait()
	appendLine(report, fmt.Sprintf("exit %d", cmd.ProcessState.ExitCode()))
	io.Copy(io.Discard, os.NewFile(3, "stay"))
	return 0
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobshell:", err)
		return
	}
	defer f.Close()
	f.WriteString(line + "\n")
}

// startOnTerminal runs the host as a user does in a terminal: as the
// foreground job of a shell (jobShell) leading a session whose controlling
// terminal is a pseudo-terminal, so that Ctrl-C typed on it signals the
// host's process group, in whatever mode the host put the terminal.
func (r *hostRig) startOnTerminal() *hostRun {
	r.t.Helper()
	host := r.command()
	self, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	report := filepath.Join(r.t.TempDir(), "job")
	extra, _ := json.Marshal(r.env)
	shell := exec.Command(self, host.Args...)
	shell.Args[1] = host.Path
	shell.Dir = host.Dir
	shell.Env = append(os.Environ(), envJobShell+"="+report, envJobEnv+"="+string(extra))

	stayR, stayW, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	shell.ExtraFiles = []*os.File{stayR} // fd 3: the shell stays until stayW is closed

	run := &hostRun{cmd: shell, out: new(lockedBuffer), done: make(chan struct{})}
	ptmx, err := pty.StartWithSize(shell, &pty.Winsize{Rows: 40, Cols: 120})
	stayR.Close()
	if err != nil {
		stayW.Close()
		r.t.Fatal(err)
	}
	run.ptmx = ptmx
	copied := make(chan struct{})
	go func() { io.Copy(run.out, ptmx); close(copied) }() // ends with EIO once the terminal is closed
	shellDone := make(chan struct{})
	go func() { shell.Wait(); close(shellDone) }()
	// The terminal stays open, its shell waiting, until the test ends.
	r.t.Cleanup(func() {
		stayW.Close()
		ptmx.Close()
		<-copied
		select {
		case <-shellDone:
		case <-time.After(10 * time.Second):
			_ = shell.Process.Kill()
			<-shellDone
		}
	})

	r.waitUntil("the job shell to start the host", func() bool {
		pid, _, _ := readJob(report)
		run.pid = pid
		return pid > 0
	})
	go func() {
		for {
			if _, code, ok := readJob(report); ok {
				if code != 0 {
					run.err = fmt.Errorf("exit status %d", code)
				}
				close(run.done)
				return
			}
			select {
			case <-shellDone:
				run.err = fmt.Errorf("the job shell exited before reporting the host's status")
				close(run.done)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	r.t.Cleanup(run.kill)
	return run
}

// readJob reads the job shell's report: the host's pid, and its exit
// status once ok.
func readJob(path string) (pid, code int, ok bool) {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "pid "); found {
			pid, _ = strconv.Atoi(v)
		}
		if v, found := strings.CutPrefix(line, "exit "); found {
			code, _ = strconv.Atoi(v)
			ok = true
		}
	}
	return pid, code, ok
}
