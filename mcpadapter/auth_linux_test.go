package mcpadapter_test

// The example server over HTTP with authentication, as a separate process
// running the fake agent: every endpoint refuses bad credentials and
// starts no process; the right token runs the agent; a bind beyond
// loopback without authentication does not start.

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// writeTokens writes a token file of lines NAME:TOKEN and returns its path.
func writeTokens(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startedProcesses returns how many processes of the fake agent's trees
// recorded themselves in dir.
func startedProcesses(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(strings.TrimSpace(string(data)))) / 3 // "pid starttime role"
}

func TestExampleServerHTTPAuth(t *testing.T) {
	bin := buildServer(t)
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			root := t.TempDir()
			rec := t.TempDir()
			transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
			s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, Grandchild: true, Answer: "authenticated", RecordDir: rec, Tag: fakeagent.NewTag()}
			tokens := writeTokens(t, "alice:"+aliceToken, "old:"+oldToken)
			flags := []string{"-auth-tokens", tokens, "-metrics", "127.0.0.1:0"}
			if stateless {
				flags = append(flags, "-stateless")
			}
			// -metrics with the address of -http: /metrics on the same
			// listener, behind the same checks.
			srv := startHTTPServer(t, bin, s, root, transcript, append(flags, "-http", "127.0.0.1:0")...)
			as := &accessServer{url: srv.url, transcript: transcript}

			var sid string
			if !stateless {
				cs, _ := connectHTTP(t, srv.url, withToken(oldToken), -1)
				sid = cs.ID()
				t.Cleanup(func() { cs.Close() }) // its token is rotated out below: its DELETE gets 401
			}
			if err := os.WriteFile(tokens+".new", []byte("alice:"+aliceToken+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tokens+".new", tokens); err != nil {
				t.Fatal(err)
			}

			bad := map[string]func(rawRequest) rawRequest{
				"no token": func(r rawRequest) rawRequest { return r },
				"wrong token": func(r rawRequest) rawRequest {
					r.header = with(r.header, "Authorization", "Bearer "+bobToken)
					return r
				},
				"rotated out": func(r rawRequest) rawRequest {
					r.header = with(r.header, "Authorization", "Bearer "+oldToken)
					return r
				},
				"query token": func(r rawRequest) rawRequest { r.path += "?access_token=" + aliceToken; return r },
			}
			eps := endpoints(sid, root)
			eps["GET /healthz"] = rawRequest{method: "GET", path: "/healthz"}
			for ename, e := range eps {
				e.body = strings.ReplaceAll(e.body, `"echo"`, `"codex"`)
				for cname, cred := range bad {
					resp, body := as.do(t, cred(e))
					if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
						t.Errorf("%s, %s: %s %q, WWW-Authenticate %q; want 401 with a Bearer challenge", ename, cname, resp.Status, body, resp.Header.Get("WWW-Authenticate"))
					}
				}
			}
			if n := startedProcesses(t, rec); n != 0 {
				t.Errorf("%d processes of the agent started for refused requests, want none", n)
			}
			if _, err := os.Stat(transcript); !os.IsNotExist(err) {
				t.Errorf("transcript after refused requests: %v, want none written", err)
			}

			// The right token runs the agent; its name is the identity.
			cs, _ := connectHTTP(t, srv.url, withToken(aliceToken), -1)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("who am I", root)})
			var out mcpadapter.Output
			if err == nil {
				decode(t, res, &out)
			}
			if err != nil || res.IsError || out.Text != "authenticated" {
				t.Fatalf("CallTool() with the token: %v %+v, want the agent's answer", err, out)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("ClientSession.Close() error = %v", err)
			}
			if e := transcriptEntries(t, transcript, 1); e[0].Identity != "alice" || e[0].Status != mcpadapter.StatusCompleted {
				t.Errorf("transcript entry %+v, want alice's completed run", e[0])
			}
			if n := startedProcesses(t, rec); n == 0 {
				t.Errorf("no process of the agent recorded itself: the fake did not record")
			}
			resp, body := as.do(t, rawRequest{method: "GET", path: "/metrics", header: map[string]string{"Authorization": "Bearer " + aliceToken}})
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, "clinvoke") {
				t.Errorf("GET /metrics with the token: %s %.200q, want the metrics", resp.Status, body)
			}
			noSurvivors(t, s.Tag, srv.cmd.Process.Pid)
			if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			<-srv.exited
		})
	}
}

// TestExampleServerRefusesNetworkWithoutAuth: -http on every interface
// without authentication does not start, and says which flag fixes it;
// with -insecure-no-auth it starts, warning.
func TestExampleServerRefusesNetworkWithoutAuth(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	cmd := exec.Command(bin, "-http", "0.0.0.0:0", "-cli", "codex", "-codex-bin", os.Args[0], "-root", root)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-insecure-no-auth") || !strings.Contains(string(out), "-auth-tokens FILE") {
		t.Errorf("-http 0.0.0.0:0 without auth: %v\n%s\nwant a failure naming -auth-tokens and -insecure-no-auth", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd = exec.CommandContext(ctx, bin, "-http", "0.0.0.0:0", "-insecure-no-auth", "-cli", "codex", "-codex-bin", os.Args[0], "-root", root)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(log.String(), "msg=serving") {
		n, err := stderr.Read(buf)
		log.Write(buf[:n])
		if err != nil {
			break
		}
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if !strings.Contains(log.String(), "WARNING: -insecure-no-auth") || !strings.Contains(log.String(), `auth="NONE (-insecure-no-auth)"`) {
		t.Errorf("-insecure-no-auth: log\n%s\nwant the warning and the serving line", log.String())
	}
}

// closingSink passes the reasons of the warm sessions the server closes.
type closingSink chan string

func (s closingSink) Enabled(context.Context, slog.Level) bool { return true }
func (s closingSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s closingSink) WithGroup(string) slog.Handler            { return s }
func (s closingSink) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "warm session closing" {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "why" {
				s <- a.Value.String()
			}
			return true
		})
	}
	return nil
}

// TestSessionKeepsToItsIdentity: a session answers the calls of the
// identity that ran it: another identity naming its session_id, to
// continue or to fork it, is refused with nothing started, and the owner's
// warm session is left as it was.
func TestSessionKeepsToItsIdentity(t *testing.T) {
	s := fakeagent.Script{Flavor: fakeagent.Claude, RecordDir: t.TempDir(), Tag: fakeagent.NewTag()}
	inv := claude.New(invoker.Options{Binary: os.Args[0], Env: s.Env(), InterruptGrace: 200 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	tokens, err := mcpadapter.ParseTokens("alice:" + aliceToken + "\nbob:" + bobToken)
	if err != nil {
		t.Fatal(err)
	}
	closing := make(closingSink, 10)
	root := t.TempDir()
	t.Cleanup(func() { noSurvivors(t, s.Tag) }) // after the server's shutdown
	as := newAccessServer(t, &mcpadapter.Options{WarmSessions: mcpadapter.WarmSessions{MaxSessions: 2},
		HTTPAccess: mcpadapter.HTTPAccess{Tokens: tokens}, Logger: slog.New(closing)}, true, inv)
	agents := func() int {
		rec, err := fakeagent.ReadRecord(s.RecordDir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range rec.Procs {
			if p.Role == "agent" {
				n++
			}
		}
		return n
	}
	ask := func(token string, kv ...any) (*mcp.CallToolResult, mcpadapter.Output) {
		t.Helper()
		cs := as.connect(t, token)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "claude", Arguments: args("hi", root, kv...)})
		if err != nil {
			t.Fatalf("CallTool() error = %v", err)
		}
		var out mcpadapter.Output
		decode(t, res, &out)
		return res, out
	}
	res, first := ask(aliceToken)
	if res.IsError || first.SessionID == "" {
		t.Fatalf("alice's first call = %+v, want an answer with a session", first)
	}
	if res, out := ask(aliceToken, "session_id", first.SessionID); res.IsError {
		t.Fatalf("alice continuing her session = %+v, want an answer", out)
	}
	if n := agents(); n != 1 {
		t.Fatalf("alice's two calls ran %d processes, want one warm session", n)
	}
	for _, kv := range [][]any{{"session_id", first.SessionID}, {"session_id", first.SessionID, "fork", true}} {
		res, out := ask(bobToken, kv...)
		if !res.IsError || out.Status != mcpadapter.StatusRefused || !strings.Contains(out.Error, "another client") || strings.Contains(out.Error, "alice") {
			t.Errorf("bob naming alice's session %v = %+v, want refused as another client's, without naming her", kv, out)
		}
	}
	if n := agents(); n != 1 {
		t.Errorf("bob's refused calls left %d processes in all, want alice's one", n)
	}
	if res, out := ask(aliceToken, "session_id", first.SessionID); res.IsError {
		t.Fatalf("alice continuing after bob's attempts = %+v, want an answer", out)
	}
	if n := agents(); n != 1 {
		t.Errorf("alice's third call ran %d processes in all, want her warm session still (1)", n)
	}
	select {
	case why := <-closing:
		t.Errorf("a warm session closed (%q), want alice's kept", why)
	default:
	}
	if res, out := ask(bobToken); res.IsError || out.SessionID == first.SessionID {
		t.Errorf("bob's own call = %+v, want an answer in a session of his own", out)
	}
}
