package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Load makes the fake use resources as an agent's tools do, so that the
// limits a library sets on a run can be seen at work: memory, processes,
// CPU. By default a Load is the work of the Tool call (Script.Tool): the
// fake starts a tool process (a helper, Proc.Role "tool-load") that does
// it, waits for it, and reports its output and status as the tool's result,
// failed when the tool failed or was killed, as a CLI reports a shell
// command that failed; then the turn goes on. With InCLI the fake itself
// does it, before the Tool call and the answer, as a CLI whose own process
// grows.
type Load struct {
	// Alloc is how many bytes to allocate, every page of them resident,
	// then hold for Hold. On Linux they are one anonymous mapping filled
	// in by the kernel (MAP_POPULATE), so that the race detector's shadow
	// memory does not add to them: the process holds Alloc bytes more
	// than it would without it, to the page.
	Alloc int64 `json:"alloc,omitempty"`
	// Forks is how many processes to start, each a helper (Proc.Role
	// "tool-child") that sleeps until the tool ends, stopping at the first
	// fork refused: a tool that forks until the host says no. The tool
	// then kills them, and fails when a fork was refused.
	Forks int `json:"forks,omitempty"`
	// Spin keeps every CPU busy (one goroutine per GOMAXPROCS) for this
	// long.
	Spin time.Duration `json:"spin,omitempty"`
	// Hold is how long to hold the memory and the processes before the
	// tool ends.
	Hold time.Duration `json:"hold,omitempty"`
	// InCLI makes the fake itself do the work, before its Tool call.
	InCLI bool `json:"in_cli,omitempty"`
}

func (l Load) set() bool { return l.Alloc > 0 || l.Forks > 0 || l.Spin > 0 || l.Hold > 0 }

// Helper roles of a Load.
const (
	roleToolLoad  = "tool-load"  // the tool process: does the Load
	roleToolChild = "tool-child" // a process of Load.Forks
)

// envLoad holds a tool process's Load as JSON.
const envLoad = "CLINVOKE_FAKEAGENT_LOAD"

// describe is the command line a tool of l shows.
func (l Load) describe() string {
	var parts []string
	if l.Alloc > 0 {
		parts = append(parts, "alloc="+strconv.FormatInt(l.Alloc, 10))
	}
	if l.Forks > 0 {
		parts = append(parts, "forks="+strconv.Itoa(l.Forks))
	}
	if l.Spin > 0 {
		parts = append(parts, "spin="+l.Spin.String())
	}
	if l.Hold > 0 {
		parts = append(parts, "hold="+l.Hold.String())
	}
	return "fakeagent-load " + strings.Join(parts, " ")
}

// toolRun is what the Tool call reports: its output, its exit status and
// whether it failed.
type toolRun struct {
	output string
	code   int
	failed bool
}

// toolLine is the command line of the Tool call: "echo hello", or the
// Load's tool process.
func (a *agent) toolLine() string {
	if l := a.s.Load; l.set() && !l.InCLI {
		return l.describe()
	}
	return toolCommand
}

// runTool runs the Tool call: prints "hello", or runs the Load's tool
// process and waits for it.
func (a *agent) runTool() toolRun {
	l := a.s.Load
	if !l.set() || l.InCLI {
		return toolRun{output: toolOutput}
	}
	var t toolRun
	exe, err := os.Executable()
	if err != nil {
		return toolRun{output: err.Error(), code: 127, failed: true}
	}
	b, _ := json.Marshal(l)
	cmd := exec.Command(exe, "fakeagent-"+roleToolLoad)
	cmd.Env = append(os.Environ(), envRole+"="+roleToolLoad, envLoad+"="+string(b))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.output = strings.TrimSpace(out.String())
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() < 0:
		// Killed by a signal: a shell reports 128+N and the signal's name.
		t.code, t.failed = 137, true
		t.output = strings.TrimSpace(t.output + "\n" + ee.String())
	case errors.As(err, &ee):
		t.code, t.failed = ee.ExitCode(), true
	case err != nil:
		t.code, t.failed, t.output = 126, true, err.Error()
	}
	return t
}

// loadInCLI does a Load marked InCLI in the fake itself.
func (a *agent) loadInCLI() {
	if l := a.s.Load; l.set() && l.InCLI {
		doLoad(l, os.Stderr)
	}
}

// runToolLoad is the main function of the tool process.
func runToolLoad() int {
	var l Load
	if err := json.Unmarshal([]byte(os.Getenv(envLoad)), &l); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent-load:", err)
		return 2
	}
	return doLoad(l, os.Stdout)
}

// doLoad does l, writing what it did to w, and returns an exit status: 1
// when a fork was refused.
func doLoad(l Load, w *os.File) int {
	status := 0
	var mem []byte
	if l.Alloc > 0 {
		mem = allocate(l.Alloc)
		fmt.Fprintf(w, "allocated %d bytes\n", l.Alloc)
	}
	var children []*exec.Cmd
	if l.Forks > 0 {
		warmThreads(16)
		exe, _ := os.Executable()
		for len(children) < l.Forks {
			cmd := exec.Command(exe, "fakeagent-"+roleToolChild)
			cmd.Env = append(os.Environ(), envRole+"="+roleToolChild)
			if err := cmd.Start(); err != nil {
				fmt.Fprintf(w, "fork: %v (after %d processes)\n", err, len(children))
				status = 1
				break
			}
			children = append(children, cmd)
		}
		if status == 0 {
			fmt.Fprintf(w, "started %d processes\n", len(children))
		}
	}
	if l.Spin > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), l.Spin)
		done := make(chan struct{})
		n := runtime.GOMAXPROCS(0)
		for range n {
			go func() {
				defer func() { done <- struct{}{} }()
				for x := 0; ctx.Err() == nil; x++ {
					for range 1 << 16 {
						x ^= x << 1
					}
				}
			}()
		}
		for range n {
			<-done
		}
		cancel()
		fmt.Fprintf(w, "spun %v on %d threads\n", l.Spin, n)
	}
	time.Sleep(l.Hold)
	for _, c := range children {
		c.Process.Kill()
		c.Wait()
	}
	runtime.KeepAlive(mem)
	return status
}

// warmThreads makes the Go runtime start n OS threads now and keep them
// idle. A process about to fork until its task limit refuses a fork must
// hold the threads its runtime needs afterwards: a thread the runtime
// cannot create kills a Go program (exit 2, "failed to create new OS
// thread") before it can report the refused fork and exit as its script
// says. Each goroutine locked to its thread holds that thread while the
// others start; unlocked and returned, the threads stay in the runtime's
// idle pool.
func warmThreads(n int) {
	var ready, running sync.WaitGroup
	release := make(chan struct{})
	ready.Add(n)
	running.Add(n)
	for range n {
		go func() {
			defer running.Done()
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	close(release)
	running.Wait()
}

// allocateHeap returns n bytes of the Go heap, every page written.
func allocateHeap(n int64) []byte {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}
