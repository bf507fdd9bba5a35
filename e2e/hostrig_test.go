//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/procstat"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/hostconfig"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// A hostRig is one test's setup for a real MCP host (codex, gemini or
// claude) configured as docs/hosts.md shows (package hostconfig) to start
// examples/mcpserver, with the host's own model a fakemodel.Server on
// 127.0.0.1. Unless the rig is made for the real CLIs, the agent CLIs the
// server runs are the fake agent: a directory placed first on the host's
// PATH holds, under each CLI's name, a wrapper that runs this test binary
// as the fake with the rig's Script. (Codex passes its MCP servers only a
// few variables, PATH among them, so the wrappers carry the Script.)
type hostRig struct {
	t     *testing.T
	host  hostconfig.Host
	model *fakemodel.Server

	home       string // HOME and the host's configuration
	root       string // the server's -root
	project    string // the workdir the model asks for, under root
	transcript string // the server's -transcript
	config     string // the file holding the configuration of docs/hosts.md
	tag        string // tagVar's value in the host's environment
	agent      fakeagent.Script
	env        []string // the host's environment, on top of os.Environ
}

// hostModels are the models the hosts ask for: fixed ones, so that Gemini
// skips its routing call and Codex offers MCP tools as a namespace (with
// gpt-5.5 it hides them behind tool_search).
var hostModels = map[string]string{"codex": "gpt-5", "gemini": "gemini-2.5-pro"}

// newHostRig finds the host on PATH (failing under CI=true, skipping
// otherwise), starts its fake model and writes the host's configuration:
// the test's part (model provider, no telemetry, from env_test.go) and the
// part of docs/hosts.md rendered for the rig's directories. agent is the fake
// agent the server runs; a zero Flavor is set per CLI, and Tag is set.
// With realCLIs, no fake is installed and the server runs the real CLIs.
func newHostRig(t *testing.T, host hostconfig.Host, agent fakeagent.Script, realCLIs bool) *hostRig {
	t.Helper()
	return newHostRigServing(t, host, agent, realCLIs, "")
}

// newHostRigServing is newHostRig with the host configured to start server
// instead of examples/mcpserver (when not empty), with the same arguments.
func newHostRigServing(t *testing.T, host hostconfig.Host, agent fakeagent.Script, realCLIs bool, server string) *hostRig {
	t.Helper()
	c := cliNamed(host.Name)
	lookPathCI(t, c)
	if server == "" {
		server = mcpServer(t)
	}
	r := &hostRig{
		t:          t,
		host:       host,
		model:      fakemodel.New(t),
		home:       t.TempDir(),
		root:       t.TempDir(),
		transcript: filepath.Join(t.TempDir(), "transcript.jsonl"),
		tag:        fmt.Sprintf("%d-%d-%s", os.Getpid(), tagSeq.Add(1), strings.ReplaceAll(t.Name(), "/", ".")),
		agent:      agent,
	}
	r.agent.Tag = fakeagent.NewTag()
	r.project = filepath.Join(r.root, "project")
	if err := os.Mkdir(r.project, 0o755); err != nil {
		t.Fatal(err)
	}
	// Codex runs only in a git repository (or with --skip-git-repo-check,
	// which the command of docs/hosts.md does not pass).
	if out, err := exec.Command("git", "init", "-q", r.project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}

	path := os.Getenv("PATH")
	if !realCLIs {
		bin := t.TempDir()
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range host.CLIs {
			s := r.agent
			if s.Flavor == "" {
				s.Flavor = name
			}
			writeWrapper(t, filepath.Join(bin, name), self, s.Env())
		}
		path = bin + string(os.PathListSeparator) + path
	}

	// The server's stand-in agents record each run in the test's
	// temporary directory, which a sandboxed run cannot write: these tests
	// are about the hosts' cancellation, so the server runs without it.
	v := hostconfig.Values{Command: server, Root: r.root, Transcript: r.transcript, Extra: []string{"-sandbox", "off"}}
	r.env = append(c.setup(t, r.model, r.home),
		"HOME="+r.home,
		"PATH="+path,
		tagVar+"="+r.tag,
	)
	switch host.Name {
	case "codex":
		// The block of docs/hosts.md goes after the test's model provider; the
		// model is a top-level key, so it goes first.
		cfg := filepath.Join(r.home, ".codex", "config.toml")
		base, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, cfg, fmt.Sprintf("model = %q\n%s\n%s", hostModels["codex"], base, host.Config(v)))
		r.config = cfg
	case "gemini":
		// settings.json is one JSON object: docs/hosts.md's mcpServers joins
		// the test's settings.
		cfg := filepath.Join(r.home, ".gemini", "settings.json")
		var settings, snippet map[string]any
		readJSON(t, cfg, &settings)
		if err := json.Unmarshal([]byte(host.Config(v)), &snippet); err != nil {
			t.Fatalf("the Gemini settings of docs/hosts.md are not JSON: %v", err)
		}
		for k, val := range snippet {
			settings[k] = val
		}
		settings["model"] = map[string]any{"name": hostModels["gemini"]}
		b, _ := json.MarshalIndent(settings, "", "  ")
		writeFile(t, cfg, string(b))
		r.config = cfg
	case "claude":
		// The command of docs/hosts.md names the file in the current directory.
		r.config = filepath.Join(r.project, host.ConfigFile)
		writeFile(t, r.config, host.Config(v))
	}
	t.Cleanup(r.killSurvivors)
	return r
}

// editConfig replaces old by new in the file holding docs/hosts.md's
// configuration, failing the test if old is not there.
func (r *hostRig) editConfig(old, new string) {
	r.t.Helper()
	b, err := os.ReadFile(r.config)
	if err != nil {
		r.t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		r.t.Fatalf("%s does not hold %q:\n%s", r.config, old, b)
	}
	writeFile(r.t, r.config, strings.Replace(string(b), old, new, 1))
}

// writeWrapper writes an executable that runs bin as the fake agent
// with env: the POSIX shell replaces itself with bin, so the fake is the
// process the server started.
func writeWrapper(t *testing.T, path, bin string, env []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	fmt.Fprintf(&b, "exec %s \"$@\"\n", shellQuote(bin))
	if err := os.WriteFile(path, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// callTurn is the model turn that calls the host's tool for docs/hosts.md's
// CLI, with prompt in the rig's project (and input's other fields).
func (r *hostRig) callTurn(prompt string, input map[string]any) fakemodel.Turn {
	name, ns := r.host.ToolName(r.host.Tool)
	args := map[string]any{"prompt": prompt, "workdir": r.project}
	for k, v := range input {
		args[k] = v
	}
	return fakemodel.Turn{Call: &fakemodel.Call{Name: name, Namespace: ns, Input: args}}
}

// command returns docs/hosts.md's headless command for the host, to run in
// the project with the rig's environment. The host's binary is the one on
// the test's PATH (the pinned one under e2e/run), not the fake.
func (r *hostRig) command() *exec.Cmd {
	argv := r.host.Argv()
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Dir = r.project
	cmd.Env = append(os.Environ(), r.env...)
	return cmd
}

// A hostRun is a running host.
type hostRun struct {
	cmd  *exec.Cmd // the host, or the shell whose job it is (on a terminal)
	pid  int       // the host's pid, which is also its process group's id
	out  *lockedBuffer
	done chan struct{} // closed when the host exited and was reaped
	err  error         // how the host exited, once done
	ptmx *os.File      // the terminal's master side, for a host on a terminal
}

// start runs the host in a process group of its own, with standard input
// on the null device and its output gathered.
func (r *hostRig) start() *hostRun {
	r.t.Helper()
	cmd := r.command()
	run := &hostRun{cmd: cmd, out: new(lockedBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = run.out, run.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	run.pid = cmd.Process.Pid
	go func() { run.err = cmd.Wait(); close(run.done) }()
	r.t.Cleanup(run.kill)
	return run
}

// kill ends a host that a failed test left running, and its group.
func (run *hostRun) kill() {
	select {
	case <-run.done:
		return
	default:
	}
	_ = syscall.Kill(-run.pid, syscall.SIGKILL)
	<-run.done
}

// wait waits for the host to exit, failing the test if it does not within
// the bound.
func (run *hostRun) wait(t *testing.T, what string) error {
	t.Helper()
	select {
	case <-run.done:
		return run.err
	case <-time.After(testenv.Timeout(time.Minute)):
		t.Fatalf("the host (pid %d) did not exit %s; output:\n%s", run.pid, what, run.out)
		return nil
	}
}

// realPid returns the pid of the process that is the host itself: Claude
// Code is one native binary; Codex's codex.js launches the native codex,
// and Gemini's launcher relaunches gemini as a child node process, and a
// signal to the launcher alone does nothing (docs/cli-facts.md).
func (r *hostRig) realPid(run *hostRun) int {
	r.t.Helper()
	pid := run.pid
	if r.host.Name == "claude" {
		return pid
	}
	var child int
	r.waitUntil("the real "+r.host.Name+" process under its launcher", func() bool {
		for _, c := range childrenOf(pid) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			args := strings.Split(string(cmdline), "\x00")
			if r.host.Name == "codex" && filepath.Base(args[0]) == "codex" ||
				r.host.Name == "gemini" && strings.Contains(string(cmdline), "gemini") {
				child = c
				return true
			}
		}
		return false
	})
	return child
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(p); err == nil && st.PPID == pid {
			out = append(out, p)
		}
	}
	return out
}

// waitUntil polls cond until it holds, failing the test after the bound.
func (r *hostRig) waitUntil(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(testenv.Timeout(time.Minute))
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// survivors lists the processes of the rig still alive, as "pid cmdline":
// those carrying the rig's tag (the host, and what inherits its
// environment: Codex passes its MCP servers only a few variables), the
// server (found by its transcript argument), and the fake agents with
// their helpers (by the Script's tag, which they inherit).
func (r *hostRig) survivors() []string {
	return findProcs(func(env, cmdline []byte) bool {
		return hasVar(env, tagVar+"="+r.tag) ||
			hasVar(env, fakeagent.EnvTag+"="+r.agent.Tag) ||
			bytes.Contains(cmdline, []byte("\x00"+r.transcript+"\x00"))
	})
}

// waitNoSurvivors waits for every process of the rig to be gone: after the
// host exits, the server may still be stopping its runs. It fails the test
// with the processes left if the bound passes.
func (r *hostRig) waitNoSurvivors(what string) {
	r.t.Helper()
	deadline := time.Now().Add(testenv.Timeout(time.Minute))
	for {
		ps := r.survivors()
		if len(ps) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Errorf("processes alive %s:\n%s", what, strings.Join(ps, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killSurvivors kills, by pid, whatever of the rig is left when the test
// ends; the failure itself has been reported.
func (r *hostRig) killSurvivors() { killProcs(r.survivors()) }

// transcriptEntries reads the server's transcript.
func (r *hostRig) transcriptEntries() []mcpadapter.TranscriptEntry {
	r.t.Helper()
	f, err := os.Open(r.transcript)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []mcpadapter.TranscriptEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e mcpadapter.TranscriptEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			r.t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in
// different goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHostSurvivorScan checks the scan the host tests rely on: a process
// is found by the rig's tag, by the fake agent's tag, and by the server's
// transcript argument, each in a session of its own; and none once they
// are gone.
// awaitExeced waits until /proc shows process pid with its new command
// line args. Start returns once the exec is past its point of no return,
// but the kernel sets up the new image's arguments and environment (what
// a scan reads) after that: a scan at once can find them empty. No event
// says when, so it polls, within a bound.
func awaitExeced(t *testing.T, pid int, args []string) {
	t.Helper()
	want := strings.Join(args, "\x00") + "\x00"
	deadline := time.Now().Add(testenv.Timeout(10 * time.Second))
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: command line %q, want %q", pid, b, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHostSurvivorScan(t *testing.T) {
	r := &hostRig{
		t:          t,
		tag:        fmt.Sprintf("%d-hostscan", os.Getpid()),
		agent:      fakeagent.Script{Tag: fakeagent.NewTag()},
		transcript: filepath.Join(t.TempDir(), "transcript.jsonl"),
	}
	var cmds []*exec.Cmd
	for _, c := range []struct {
		env  string
		args []string
	}{
		{tagVar + "=" + r.tag, []string{"sleep", "30"}},
		{fakeagent.EnvTag + "=" + r.agent.Tag, []string{"sleep", "30"}},
		{"", []string{"perl", "-e", "sleep 30", "--", "-transcript", r.transcript}}, // perl forks nothing, unlike a shell
	} {
		cmd := exec.Command(c.args[0], c.args[1:]...)
		cmd.Env = os.Environ()
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill() // if the scan failed to kill it
		cmds = append(cmds, cmd)
		awaitExeced(t, cmd.Process.Pid, c.args)
	}
	if got := r.survivors(); len(got) != len(cmds) {
		t.Errorf("survivors() = %q, want the %d processes started", got, len(cmds))
	}
	r.killSurvivors()
	for _, cmd := range cmds {
		_ = cmd.Wait() // reap, so the scan below cannot see a zombie
	}
	if got := r.survivors(); len(got) != 0 {
		t.Errorf("survivors() after killSurvivors = %q, want none", got)
	}
}
