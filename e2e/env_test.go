//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/gemini"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/invoker"
)

// A cli describes one real CLI and how to run it in isolation against a
// fake model server, as measured in docs/cli-facts.md.
type cli struct {
	name string // the backend's Name and the executable on PATH
	pkg  string // npm package, for messages
	new  func(...invoker.Options) invoker.Invoker
	// model is passed as Request.Model ("" keeps the CLI's default).
	model string
	// shell is the least permission under which the CLI's shell tool runs
	// in headless mode.
	shell invoker.Permission
	// setup writes the CLI's configuration under home and returns the
	// environment that points the CLI at srv and keeps it off the network.
	setup func(t testing.TB, srv *fakemodel.Server, home string) []string
}

var clis = []cli{
	{
		name: "codex", pkg: "@openai/codex", new: codex.New,
		// The default model sends "responses-lite" code-mode tools; gpt-5.5
		// uses the classic exec_command function the fake scripts.
		model: "gpt-5.5",
		shell: invoker.ReadOnly, // echo and sleep run in the read-only sandbox
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			return setupCodex(t, srv, home, "")
		},
	},
	{
		name: "gemini", pkg: "@google/gemini-cli", new: gemini.New,
		// A fixed model skips the routing call of "auto".
		model: "gemini-2.5-pro",
		shell: invoker.Unlimited, // only --approval-mode yolo declares the shell tool
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"maxAttempts": 1},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
			return []string{
				"GEMINI_CLI_HOME=" + home,
				"GOOGLE_GEMINI_BASE_URL=" + srv.GeminiBaseURL(),
				"GEMINI_API_KEY=fakemodel",
				"GEMINI_CLI_TRUST_WORKSPACE=true", // the workdir is a fresh temp dir
			}
		},
	},
	{
		name: "claude", pkg: "@anthropic-ai/claude-code", new: claude.New,
		shell: invoker.ReadOnly, // Bash runs echo and sleep in the default mode
		setup: func(t testing.TB, srv *fakemodel.Server, home string) []string {
			return []string{
				"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
				"ANTHROPIC_BASE_URL=" + srv.AnthropicBaseURL(),
				"ANTHROPIC_API_KEY=sk-ant-fakemodel",
				"CLAUDE_CODE_MAX_RETRIES=0",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			}
		},
	},
}

// setupCodex writes a Codex configuration under home that points Codex at
// srv, with model in the file unless it is "", and returns the environment
// that makes Codex read it. OPENAI_BASE_URL is ignored; a custom provider
// is not. No retries, so errors come back in seconds; no analytics or
// plugins, so nothing but the fake is called.
func setupCodex(t testing.TB, srv *fakemodel.Server, home, model string) []string {
	dir := filepath.Join(home, ".codex")
	var top string
	if model != "" {
		top = fmt.Sprintf("model = %q\n", model)
	}
	writeFile(t, filepath.Join(dir, "config.toml"), top+fmt.Sprintf(`model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
`, srv.OpenAIBaseURL()))
	return []string{"CODEX_HOME=" + dir, "OPENAI_API_KEY=sk-fakemodel"}
}

// cliNamed returns the description of the CLI named name in clis.
func cliNamed(name string) *cli {
	for i := range clis {
		if clis[i].name == name {
			return &clis[i]
		}
	}
	panic("e2e: no CLI " + name)
}

// forEachCLI runs f as one subtest per CLI, each with a fresh rig.
func forEachCLI(t *testing.T, f func(t *testing.T, r *rig)) {
	forEachRig(t, clis, f)
}

// forEachRig runs f as one subtest per CLI of cs, each with a fresh rig.
func forEachRig(t *testing.T, cs []cli, f func(t *testing.T, r *rig)) {
	for i := range cs {
		c := &cs[i]
		t.Run(c.name, func(t *testing.T) { f(t, newRig(t, c)) })
	}
}

// tagVar is set in every CLI's environment, with a value unique to the
// test; every process the CLI starts inherits it, so survivors are found by
// scanning /proc/*/environ, independently of the library's own marker.
const tagVar = "CLINVOKE_E2E_TAG"

var tagSeq atomic.Int64

// A rig is one test's isolated setup for one CLI: a fake model server, a
// home directory holding the CLI's configuration and state, a workdir, and
// an Invoker whose runs all carry the test's tag.
type rig struct {
	t       *testing.T
	cli     *cli
	srv     *fakemodel.Server
	inv     invoker.Invoker
	home    string
	workdir string
	tag     string
	// opts are the Options inv was made with, for a test that needs an
	// Invoker with more.
	opts invoker.Options
}

// newRig finds the CLI on PATH (failing under CI=true, skipping otherwise),
// starts a fake model server and builds the isolated environment.
func newRig(t *testing.T, c *cli) *rig {
	t.Helper()
	bin := lookPathCI(t, c)
	r := &rig{
		t:       t,
		cli:     c,
		srv:     fakemodel.New(t), // closed last: Cleanup runs in reverse
		home:    t.TempDir(),
		workdir: t.TempDir(),
		tag:     fmt.Sprintf("%d-%d-%s", os.Getpid(), tagSeq.Add(1), strings.ReplaceAll(t.Name(), "/", ".")),
	}
	env := append(c.setup(t, r.srv, r.home),
		"HOME="+r.home, // nothing of the real home is read or written
		tagVar+"="+r.tag,
	)
	r.opts = invoker.Options{Binary: bin, Env: env}
	r.inv = c.new(r.opts)
	t.Cleanup(r.killSurvivors)
	return r
}

// workIn makes the rig's working directory a new one beneath base
// (named prefix and a random part, removed at the test's end), for a
// test that needs it outside /tmp; an empty base keeps t.TempDir's.
func (r *rig) workIn(base, prefix string) {
	r.t.Helper()
	if base == "" {
		return
	}
	wd, err := os.MkdirTemp(base, prefix)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { os.RemoveAll(wd) })
	r.workdir = wd
}

// lookPathCI finds c on PATH, failing the test under CI=true and skipping
// it otherwise when c is missing.
func lookPathCI(t *testing.T, c *cli) string {
	t.Helper()
	bin, err := exec.LookPath(c.name)
	if err != nil {
		msg := fmt.Sprintf("%s not on PATH (%v): run the e2e tests with e2e/run, which installs %s from e2e/package-lock.json", c.name, err, c.pkg)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// request returns a Request for prompt in the rig's workdir with the CLI's
// model.
func (r *rig) request(prompt string) invoker.Request {
	return invoker.Request{Prompt: prompt, Workdir: r.workdir, Model: r.cli.model}
}

// invoke runs req with a deadline that no scenario should reach, and checks
// the library's guarantee: when Invoke returns, no process of the run is
// alive.
func (r *rig) invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testenv.Timeout(90*time.Second))
	defer cancel()
	res, err := r.inv.Invoke(ctx, req)
	if res == nil {
		r.t.Fatalf("Invoke() returned a nil *Result (err %v)", err)
	}
	if ps := r.survivors(); len(ps) > 0 {
		r.t.Errorf("processes of the run alive after Invoke returned:\n%s", strings.Join(ps, "\n"))
	}
	return res, err
}

// survivors lists the processes carrying the rig's tag, as "pid cmdline".
func (r *rig) survivors() []string {
	return findProcs(func(env, cmdline []byte) bool {
		return hasVar(env, tagVar+"="+r.tag)
	})
}

// waitFor polls cond until it holds or the timeout passes.
func (r *rig) waitFor(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toolRunning reports whether a process of the rig runs command (as its
// whole command line, such as "sleep 300").
func (r *rig) toolRunning(command string) bool {
	return len(findProcs(func(env, cmdline []byte) bool {
		return hasVar(env, tagVar+"="+r.tag) &&
			string(bytes.TrimRight(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), " ")) == command
	})) > 0
}

// killSurvivors kills, by pid, whatever still carries the rig's tag when the
// test ends, so one failure does not leave sleeping tools behind. The
// failure itself has been reported by invoke.
func (r *rig) killSurvivors() { killProcs(r.survivors()) }

// killProcs kills, by pid, the processes of ps, a list as findProcs
// returns it.
func killProcs(ps []string) {
	for _, p := range ps {
		if pid, _ := strconv.Atoi(strings.Fields(p)[0]); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// findProcs scans /proc for processes whose environment and command line
// match. Processes that cannot be read (gone, or another user's) are
// skipped; zombies have an empty environment and never match.
func findProcs(match func(env, cmdline []byte) bool) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if match(env, cmdline) {
			cl := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
			if len(cl) > 120 {
				cl = cl[:120] + "..."
			}
			out = append(out, fmt.Sprintf("%d %s", pid, cl))
		}
	}
	return out
}

func hasVar(environ []byte, kv string) bool {
	for _, v := range bytes.Split(environ, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// jsonString is for failure messages: the result as one line.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSurvivorScan checks the helper the other tests rely on: a process
// carrying a rig's tag is found, by environment, in a session of its own.
func TestSurvivorScan(t *testing.T) {
	r := &rig{t: t, tag: fmt.Sprintf("%d-scan", os.Getpid())}
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), tagVar+"="+r.tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // if the scan failed to kill it
	awaitExeced(t, cmd.Process.Pid, cmd.Args)
	if !r.toolRunning("sleep 30") || len(r.survivors()) != 1 {
		t.Errorf("survivors() = %q, want the tagged sleep", r.survivors())
	}
	r.killSurvivors()
	_ = cmd.Wait() // reap, so the scan below cannot see it as a zombie
	if ps := r.survivors(); len(ps) != 0 {
		t.Errorf("survivors() after killSurvivors = %q, want none", ps)
	}
}
