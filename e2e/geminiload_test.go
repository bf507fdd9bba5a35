//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
)

// loadProbeEnv turns TestGeminiSessionLoadProbe on: the number of tries.
const loadProbeEnv = "CLINVOKE_GEMINI_LOAD_PROBE"

// TestGeminiSessionLoadProbe is a probe, not a check: it reports what ACP's
// session/load of the pinned Gemini CLI answers for a conversation that a
// run saved (gemini -p, as Invoke runs it), asked for by a new `gemini
// --acp` in the same home and workdir, over several tries, and fails only
// when the steps themselves fail. With 0.61.0 against the fake model the
// answer was not the same from one try to the next (the conversation
// loaded, or "No previous sessions found for this project.", or "Invalid
// session identifier"), which is why the gemini backend refuses
// Request.SessionID in sessions (ErrUnsupported) and resumes with Invoke.
// Run it when the pin moves:
//
//	CLINVOKE_GEMINI_LOAD_PROBE=5 e2e/run -run TestGeminiSessionLoadProbe -v
func TestGeminiSessionLoadProbe(t *testing.T) {
	tries, _ := strconv.Atoi(os.Getenv(loadProbeEnv))
	if tries <= 0 {
		t.Skipf("a probe of gemini's session/load, not a check; set %s to the number of tries to run it", loadProbeEnv)
	}
	var c *cli
	for i := range clis {
		if clis[i].name == "gemini" {
			c = &clis[i]
		}
	}
	answers := map[string]int{}
	for i := range tries {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) { answers[probeLoad(t, c)]++ })
	}
	t.Logf("session/load of a run's conversation, %d tries: %v", tries, answers)
}

// probeLoad saves a conversation with a run, asks a new ACP process to
// load it and returns the gist of the answer.
func probeLoad(t *testing.T, c *cli) string {
	r := newRig(t, c)
	r.srv.Enqueue(fakemodel.Answer("first answer"))
	first, err := r.invoke(context.Background(), r.request("first prompt"))
	if err != nil || first.SessionID == "" {
		t.Fatalf("Invoke() = %s, %v; want a session id", jsonString(first), err)
	}

	bin, err := exec.LookPath(c.name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), quick)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--acp", "--model="+c.model)
	cmd.Dir = r.workdir
	cmd.Env = append(append(os.Environ(), c.setup(t, r.srv, r.home)...), "HOME="+r.home, tagVar+"="+r.tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close() // end of input ends the ACP mode
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Logf("gemini --acp exited: %v", err)
		}
		r.killSurvivors() // its tools, if any; none is expected
		if ps := r.survivors(); len(ps) > 0 {
			t.Errorf("processes of gemini --acp alive after it exited:\n%s", strings.Join(ps, "\n"))
		}
	}()

	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	call := func(id int, method string, params any) []byte {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := fmt.Fprintf(in, "%s\n", b); err != nil {
			t.Fatalf("writing %s: %v", method, err)
		}
		for sc.Scan() {
			var m struct {
				ID *int `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.ID != nil && *m.ID == id {
				return sc.Bytes()
			}
		}
		err := sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		t.Fatalf("no answer to %s: %v; stderr:\n%s", method, err, stderr.String())
		return nil
	}
	call(1, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{
		"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false}})
	answer := call(2, "session/load", map[string]any{"sessionId": first.SessionID, "cwd": r.workdir, "mcpServers": []any{}})
	var res struct {
		Error *struct {
			Data struct {
				Details string `json:"details"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("session/load of %s: %.300s", first.SessionID, answer)
	switch {
	case res.Error == nil:
		return "loaded"
	case strings.HasPrefix(res.Error.Data.Details, "Invalid session identifier"):
		return "Invalid session identifier"
	}
	return strings.SplitN(res.Error.Data.Details, "\n", 2)[0]
}
