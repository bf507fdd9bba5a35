//go:build e2e

package e2e

// examples/mcpserver driven by an MCP client that is not ours: the
// official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json), run by mcpclient.mjs over stdio, streamable HTTP and
// stateless HTTP; over HTTP the server requires a bearer token
// (-auth-tokens), which the client sends. The agent underneath is the fake (internal/testkit/fakeagent,
// run by the examples/demo binary), with a tool tree of a grandchild and
// a setsid daemon; after every step the test proves that no process of
// the finished runs survived.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// tsResult is what mcpclient.mjs reports of one call.
type tsResult struct {
	IsError  bool               `json:"isError"`
	Out      *mcpadapter.Output `json:"out"`
	Text     string             `json:"text"`
	Progress int                `json:"progress"`
	Rejected bool               `json:"rejected"`
	Error    string             `json:"error"`
	Code     int                `json:"code"` // the HTTP status of a failed connection
}

// startNodeDriver starts a node driver script (mcpclient.mjs, mcptasks.mjs)
// with its configuration as the one argument, and returns it with its
// standard input and output (the caller waits for it). At the test's end its input is closed and it is killed and
// reaped (a no-op once it exited, as it should have); a failed test logs
// what it and the server wrote to standard error.
func startNodeDriver(t *testing.T, node, driver string, config []byte) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.Command(node, driver, string(config))
	cmd.Dir = filepath.Dir(driver)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("driver and server stderr:\n%s", stderr.String())
		}
	})
	return cmd, stdin, stdout
}

// tsReport is one line of mcpclient.mjs: a step and its calls.
type tsReport struct {
	Step        string              `json:"step"`
	DriverError string              `json:"driverError"`
	Results     json.RawMessage     `json:"results"`
	tsResult                        // a step of one call
	many        []tsResult          // "concurrent"
	named       map[string]tsResult // "bad inputs"
}

// goBuild builds pkg of this module into dir and returns the binary.
func goBuild(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// needNode returns node and the driver's path, or skips (fails under
// CI=true) when the TypeScript SDK is not installed.
func needNode(t *testing.T) (node, driver string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or @modelcontextprotocol/sdk missing (%v): run e2e/run, which installs e2e/package-lock.json", err)
		}
		t.Skipf("node or @modelcontextprotocol/sdk missing (%v): run e2e/run", err)
	}
	driver, err = filepath.Abs("mcpclient.mjs")
	if err != nil {
		t.Fatal(err)
	}
	return node, driver
}

var listenRE = regexp.MustCompile(`transport=http://(127\.0\.0\.1:[0-9]+)`)

func TestTypeScriptClient(t *testing.T) {
	node, driver := needNode(t)
	bins := t.TempDir()
	server := goBuild(t, bins, "mcpserver", "./examples/mcpserver")
	fake := goBuild(t, bins, "fakecodex", "./examples/demo") // runs the fake agent when its environment asks
	for _, mode := range []string{"stdio", "http", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
			s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: 1500 * time.Millisecond, Grandchild: true, Escapee: true,
				Answer: "done", Tag: fakeagent.NewTag()}
			env := append(os.Environ(), s.Env()...)
			args := []string{"-cli", "codex", "-codex-bin", fake, "-root", root, "-transcript", transcript, "-progress", "1ms"}

			cfg := map[string]any{"root": root, "outside": outside}
			var srv *exec.Cmd
			if mode == "stdio" {
				envMap := map[string]string{}
				for _, kv := range env {
					k, v, _ := strings.Cut(kv, "=")
					envMap[k] = v
				}
				cfg["transport"], cfg["command"], cfg["args"], cfg["env"] = "stdio", server, args, envMap
			} else {
				args = append(args, "-http", "127.0.0.1:0", "-auth-tokens", tokenFile(t, "ts-client:"+tsToken))
				if mode == "stateless" {
					args = append(args, "-stateless")
				}
				srv = exec.Command(server, args...)
				srv.Env = env
				url := startLogged(t, srv)
				cfg["transport"], cfg["url"], cfg["token"] = "http", url, tsToken
			}
			js, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cmd, stdin, stdout := startNodeDriver(t, node, driver, js)

			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 16<<20)
			var steps []string
			for sc.Scan() {
				var r tsReport
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("driver line %q: %v", sc.Text(), err)
				}
				steps = append(steps, r.Step)
				if r.DriverError != "" {
					t.Fatalf("step %s: the driver failed: %s", r.Step, r.DriverError)
				}
				switch r.Step {
				case "concurrent":
					if err := json.Unmarshal(r.Results, &r.many); err != nil {
						t.Fatal(err)
					}
				case "bad inputs", "unauthenticated":
					if err := json.Unmarshal(r.Results, &r.named); err != nil {
						t.Fatal(err)
					}
				}
				checkTSStep(t, mode, &r)
				// Every run that started has ended, and nothing of its tree
				// is left.
				waitRunsEnded(t, transcript)
				noSurvivorsBut(t, s.Tag, server)
				// The runs the client cancelled or left were stopped, not
				// finished by the fake (it answers after 1.5 s). In
				// stateless mode notifications/cancelled comes in a request
				// of its own, which cannot reach the call (it may land on
				// another replica), and the TypeScript SDK keeps the call's
				// request open after it: that run ends by itself.
				for _, prompt := range map[string][]string{"cancel": {"cancel me"}, "concurrent": {"second, cancelled"}, "disconnect": {"left behind"}}[r.Step] {
					want := mcpadapter.StatusCancelled
					if mode == "stateless" && r.Step != "disconnect" {
						want = mcpadapter.StatusCompleted
					}
					e := finalEntry(t, transcript, prompt)
					if e.Status != want {
						t.Errorf("%s: the run of %q ended %+v, want %s", r.Step, prompt, e, want)
					} else {
						t.Logf("%s: the run of %q ended %s: %s", r.Step, prompt, e.Status, e.Error)
					}
					if want := map[bool]string{true: "", false: "ts-client"}[mode == "stdio"]; e.Identity != want {
						t.Errorf("%s: the run of %q has identity %q, want %q", r.Step, prompt, e.Identity, want)
					}
				}
				fmt.Fprintln(stdin)
			}
			want := []string{"cancel", "progress", "concurrent", "failure", "bad inputs", "disconnect"}
			if mode != "stdio" {
				want = append([]string{"unauthenticated"}, want...)
			}
			if mode != "stdio" {
				want = append(want, "next client")
			}
			if !slices.Equal(steps, want) {
				t.Errorf("steps %q, want %q", steps, want)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("driver: %v", err)
			}
			if srv != nil {
				// Stop the HTTP server; it records and exits.
				srv.Process.Signal(os.Interrupt)
				srv.Wait()
				if !srv.ProcessState.Success() {
					t.Errorf("server exit: %v, want success", srv.ProcessState)
				}
			}
			noSurvivorsBut(t, s.Tag)
		})
	}
}

// checkTSStep checks what the TypeScript client saw of one step.
func checkTSStep(t *testing.T, mode string, r *tsReport) {
	t.Helper()
	completed := func(name string, c tsResult) {
		if c.Rejected || c.IsError || c.Out == nil || c.Out.Status != mcpadapter.StatusCompleted || c.Out.Text != "done" || c.Out.SessionID == "" {
			t.Errorf("%s: %s: %+v, want the fake's answer", r.Step, name, c)
		}
	}
	cancelled := func(name string, c tsResult) {
		if !c.Rejected || !strings.Contains(strings.ToLower(c.Error), "cancel") && !strings.Contains(strings.ToLower(c.Error), "abort") {
			t.Errorf("%s: %s: %+v, want the call rejected as cancelled", r.Step, name, c)
		}
	}
	refused := func(name string, c tsResult, why string) {
		switch {
		case c.Rejected && strings.Contains(c.Error, why): // the SDK's schema check: a protocol error naming the field
		case c.IsError && c.Out != nil && c.Out.Status == mcpadapter.StatusRefused && strings.Contains(c.Out.Error, why):
		case c.IsError && strings.Contains(c.Text, why): // the SDK's schema check as an isError result
		default:
			t.Errorf("%s: %s: %+v, want refused, saying %q", r.Step, name, c, why)
		}
	}
	switch r.Step {
	case "cancel":
		cancelled("call", r.tsResult)
	case "progress":
		completed("call", r.tsResult)
		if r.Progress == 0 {
			t.Errorf("progress: no progress notification reached the client")
		}
	case "concurrent":
		if len(r.many) != 3 {
			t.Fatalf("concurrent: %d results, want 3", len(r.many))
		}
		completed("first", r.many[0])
		cancelled("second", r.many[1])
		completed("third", r.many[2])
	case "failure":
		if !r.IsError || r.Out == nil || r.Out.Status != mcpadapter.StatusRefused || !strings.Contains(r.Out.Error, "outside the allowed roots") ||
			!strings.Contains(r.Text, "refused") {
			t.Errorf("failure: %+v, want an isError result: refused, outside the allowed roots", r.tsResult)
		}
	case "bad inputs":
		refused("noPrompt", r.named["noPrompt"], "prompt")
		refused("blankPrompt", r.named["blankPrompt"], "prompt is empty")
		refused("promptNotString", r.named["promptNotString"], "prompt")
		refused("badPermission", r.named["badPermission"], "permission")
		refused("badSession", r.named["badSession"], "session")
		if u := r.named["unknownTool"]; !u.Rejected || !strings.Contains(u.Error, "no_such_tool") {
			t.Errorf("bad inputs: unknown tool: %+v, want an error naming it", u)
		}
		completed("after", r.named["after"])
	case "disconnect":
		if !r.Rejected {
			t.Errorf("disconnect: %+v, want the call to end with the connection", r.tsResult)
		}
	case "next client":
		completed("call", r.tsResult)
	case "unauthenticated":
		for _, name := range []string{"noToken", "wrongToken"} {
			if c := r.named[name]; !c.Rejected || c.Code != 401 || !strings.Contains(c.Error, "token") {
				t.Errorf("unauthenticated: %s: %+v, want the connection refused with 401", name, c)
			}
		}
	}
}

// tsToken is the bearer token of the TypeScript client.
const tsToken = "ts-0123456789abcdef0123456789abcdef"

// tokenFile writes a token file of lines NAME:TOKEN and returns its path.
func tokenFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitRunsEnded waits until every run with a "running" line in the
// transcript at path has its final line: its tree is reaped.
func waitRunsEnded(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	for {
		open := map[string]bool{}
		if data, err := os.ReadFile(path); err == nil {
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				if line == "" {
					continue
				}
				var e mcpadapter.TranscriptEntry
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("transcript line %q: %v", line, err)
				}
				if e.Run != "" {
					open[e.Run] = e.Status == mcpadapter.StatusRunning
				}
			}
		}
		n := 0
		for _, running := range open {
			if running {
				n++
			}
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still not recorded as ended", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finalEntry returns the final transcript entry of the run of prompt.
func finalEntry(t *testing.T, path, prompt string) mcpadapter.TranscriptEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var found mcpadapter.TranscriptEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e mcpadapter.TranscriptEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		if e.Prompt == prompt && e.Status != mcpadapter.StatusRunning {
			found = e
		}
	}
	return found
}

// noSurvivorsBut fails the test if a process carrying tag is alive, other
// than those running one of the executables named (the server, which is
// given the fake's environment to pass on).
func noSurvivorsBut(t *testing.T, tag string, exes ...string) {
	t.Helper()
	var left []string
	for _, pid := range fakeagent.Survivors(tag) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if !slices.Contains(exes, exe) {
			left = append(left, fmt.Sprintf("%d (%s)", pid, exe))
		}
	}
	if len(left) > 0 {
		t.Errorf("processes survived: %v", left)
	}
}

// startLogged starts an HTTP server whose log says where it listens, and
// returns its URL.
func startLogged(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op once it exited, as it should have
		cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("server stderr:\n%s", log.String())
			mu.Unlock()
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(testenv.Timeout(testenv.Hang)):
		t.Fatal("the server did not say where it listens")
	}
	return ""
}
