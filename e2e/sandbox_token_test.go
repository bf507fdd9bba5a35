//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/sandbox"
	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// ancestorsEnviron is a shell command that walks up from the shell to the
// first process and prints, for each ancestor whose /proc/PID/environ it
// can read, how many variables it read there, then every variable that
// holds a bearer token or names an MCP server's header.
const ancestorsEnviron = `p=$$; n=0; while [ "$p" -gt 1 ] 2>/dev/null; do
if e=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null); then n=$((n+1)); echo "environ of $p: $(printf '%s\n' "$e" | wc -l) variables"; printf '%s\n' "$e" | grep -a -i -e bearer -e CLINVOKE_MCP; fi
p=$(awk '/^PPid:/{print $2}' /proc/$p/status 2>/dev/null); done; echo "walked $n environs"`

// memoryToken is a shell command that scans the writable memory of each
// ancestor it may read (/proc/PID/maps and /proc/PID/mem) for a bearer
// token of the Go tools' endpoint (43 characters of base64url) and for
// the endpoint's port, then calls the endpoint with each token it found,
// as an MCP client's initialize would. It prints, never the token, but
// the first 12 hex digits of its SHA-256, where it was found, and what
// curl got: "candidate SHA from pid PID: http CODE exit CODE". It begins
// with the shell the CLI ran it through: "shell EXE" and "argv ARGV",
// the executable the kernel started and its first arguments (no command
// substitution: Gemini CLI refuses a command with one).
const memoryToken = `readlink /proc/$$/exe | sed 's/^/shell /'; tr '\0' ' ' </proc/$$/cmdline | head -1 | cut -c1-24 | sed 's/^/argv /'; echo; perl -MDigest::SHA=sha256_hex -e '
my $p = getppid(); my (%tok, $port);
while ($p > 1) {
  if (open(my $m, "<", "/proc/$p/maps") and open(my $mem, "<:raw", "/proc/$p/mem")) {
    while (my $l = <$m>) {
      next unless $l =~ /^([0-9a-f]+)-([0-9a-f]+) rw/;
      my ($a, $b) = (hex($1), hex($2));
      next if $b - $a > 1 << 28;
      sysseek($mem, $a, 0) or next;
      my $buf = ""; sysread($mem, $buf, $b - $a) or next;
      while ($buf =~ /Bearer ([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])/g) { $tok{$1} //= $p }
      $port //= $1 if $buf =~ m{127\.0\.0\.1:(\d+)/mcp/gotools};
    }
  }
  open(my $s, "<", "/proc/$p/status") or last;
  my ($pp) = map { /^PPid:\s+(\d+)/ ? $1 : () } <$s>;
  last unless $pp; $p = $pp;
}
print "endpoint port ", ($port // "not found"), "; ", scalar(keys %tok), " candidates\n";
for my $t (sort keys %tok) {
  my $code = $port ? qx{curl -s -o /dev/null -w "%{http_code}" --noproxy "*" -H "Authorization: Bearer $t" -H "Content-Type: application/json" -H "Accept: application/json, text/event-stream" -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"probe\",\"version\":\"1\"}}}" http://127.0.0.1:$port/mcp/gotools} : "none";
  printf "candidate %s from pid %d: http %s exit %d\n", substr(sha256_hex($t), 0, 12), $tok{$t}, $code, $? >> 8;
}'`

// TestSandboxCodexToken: Codex under the "available" form at
// WorkspaceWrite runs inside the sandbox with its own off, as the same
// user as its commands, and the network rules let its commands reach the
// Go tools' endpoint on 127.0.0.1. The bearer token of that endpoint must
// therefore be nowhere a command can read: a shell command the model asks
// for reads /proc/PID/environ of every ancestor (app-server, its launcher,
// the engine's own) and the token is neither in what reaches the model nor
// in any file of CODEX_HOME, while a call of the Go tool through Codex
// works, with the token. Codex's memory holds the token too, but its
// commands run through a shell whose domain is nested in app-server's: a
// second command that scans its ancestors' memory (/proc/PID/mem) can
// read none of it, and finds no token.
func TestSandboxCodexToken(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("codex")}, func(t *testing.T, r *rig) {
		w := twoWayOf(t, "codex")
		var auth authRecorder
		r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "with the token"}),
			fakemodel.Shell(ancestorsEnviron),
			fakemodel.Shell(memoryToken),
			fakemodel.EchoToolResult("after: "))
		req := r.request("look around")
		req.Permission, req.Sandbox = invoker.WorkspaceWrite, invoker.Sandbox{Mode: "available"}
		req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: auth.server()}}
		res, ev := probe(t, r, req)
		if res.Sandbox != "filesystem,network" {
			t.Errorf("Result.Sandbox = %q, want filesystem,network", res.Sandbox)
		}
		header := auth.header()
		token, ok := strings.CutPrefix(header, "Bearer ")
		if !ok || len(token) < 16 {
			t.Fatalf("the Go tool saw Authorization %q, want a bearer token: the call did not come through Codex", header)
		}
		var walk, scan string
		for _, res := range ev.results {
			switch {
			case strings.Contains(res.Output, "walked "):
				walk = res.Output
			case strings.Contains(res.Output, "candidates"):
				scan = res.Output
			}
		}
		if !strings.Contains(walk, "variables") {
			t.Fatalf("no walk of the ancestors' environ among the results (the probe read none): %q", walk)
		}
		memoryTokenHeld(t, scan)
		neverSent(t, r.srv, token)
		for _, res := range ev.results {
			if res.Name == "command_execution" {
				t.Logf("the walk: %s", res.Output)
			}
			if strings.Contains(res.Output, token) {
				t.Errorf("the %s result shows the token", res.Name)
			}
		}
		filepath.WalkDir(r.home, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), token) {
				t.Errorf("%s holds the token", path)
			}
			return nil
		})
	})
}

// memoryTokenHeld checks the output scan of memoryToken in a sandboxed
// run: the command ran through the real shell kept in the run's mount
// namespace (this program's binary bound over the shell put it in a
// nested domain first), and found no token, as it could read no
// ancestor's memory.
func memoryTokenHeld(t *testing.T, scan string) {
	t.Helper()
	t.Logf("the memory scan: %s", scan)
	if !strings.Contains(scan, "shell "+sandbox.ShimDir+"/") {
		t.Errorf("the command's shell: %q, want the real shell beneath %s", scan, sandbox.ShimDir)
	}
	if !strings.Contains(scan, "; 0 candidates") {
		t.Errorf("the scan of the ancestors' memory: %q, want no candidate: it must read none of the CLI's memory", scan)
	}
}

// memoryTokenRefused checks the output scan of memoryToken in a run
// without the sandbox, whose Go tools' endpoint has token: the scan found
// the token (the command reads the memory of the CLI, its user's), and
// the call it made with it was closed unanswered, with a warning.
func memoryTokenRefused(t *testing.T, token, scan string, ev *probeEvents) {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	mine := fmt.Sprintf("candidate %x from pid ", sum[:6])
	i := strings.Index(scan, mine)
	if i < 0 {
		t.Fatalf("the scan of the ancestors' memory did not find the token (%x…): %q", sum[:6], scan)
	}
	line, _, _ := strings.Cut(scan[i:], "\n")
	t.Logf("the memory scan: %s", scan)
	if !strings.Contains(line, "http 000") {
		t.Errorf("the command's call with the token it found: %q, want it closed unanswered (http 000)", line)
	}
	if !slices.ContainsFunc(ev.warns, func(w string) bool { return strings.Contains(w, "Go tools' endpoint") }) {
		t.Errorf("warnings %q, want one for the command's call of the Go tools' endpoint", ev.warns)
	}
}

// TestSandboxGeminiToken: Gemini CLI gets the Go tools' URL and bearer
// token in session/new of its ACP session, on its standard input, so the
// token is in the memory of its node process. Under the sandbox (network
// rules) its shell commands run in a Landlock domain nested in node's,
// and a command that scans its ancestors' memory finds no token. With no
// sandbox it finds the token (same user), and its call of the endpoint
// is closed unanswered, with a warning (straight to the host's loopback).
// The Go tool call through Gemini CLI works in both.
func TestSandboxGeminiToken(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("gemini")}, func(t *testing.T, r *rig) {
		for _, c := range []struct {
			name string
			sb   invoker.Sandbox
		}{
			{"network", invoker.Sandbox{Mode: "required", Network: []string{"none"}}},
			{"nosandbox", invoker.Sandbox{}},
		} {
			t.Run(c.name, func(t *testing.T) {
				w := twoWayOf(t, "gemini")
				var auth authRecorder
				r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": "with the token"}),
					fakemodel.Shell(memoryToken),
					fakemodel.EchoToolResult("after: "))
				req := r.request("look around")
				req.Permission, req.Sandbox = invoker.Unlimited, c.sb
				req.MCPServers = []invoker.MCPServer{{Name: "gotools", Server: auth.server()}}
				res, ev := probe(t, r, req)
				token, ok := strings.CutPrefix(auth.header(), "Bearer ")
				if !ok || len(token) < 16 {
					t.Fatalf("the Go tool saw Authorization %q, want a bearer token: the call did not come through Gemini CLI", auth.header())
				}
				// Gemini CLI's tool results carry no output: the model
				// echoes the command's into the answer.
				scan := res.Text
				if c.sb.Mode != "" {
					memoryTokenHeld(t, scan)
				} else {
					memoryTokenRefused(t, token, scan, ev)
				}
				neverSent(t, r.srv, token)
			})
		}
	})
}

// An authRecorder is a Go MCP server whose record tool keeps the
// Authorization header of the calls that reach it.
type authRecorder struct {
	mu   sync.Mutex
	auth string
}

// server returns the server of a.
func (a *authRecorder) server() *mcp.Server {
	return recordServer(func(context.Context, recordArgs) error { return nil }, func(req *mcp.CallToolRequest) {
		if req.Extra != nil {
			a.mu.Lock()
			a.auth = req.Extra.Header.Get("Authorization")
			a.mu.Unlock()
		}
	})
}

// header returns the Authorization header of the last call.
func (a *authRecorder) header() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.auth
}

// TestCodexGoToolResumed: Codex keeps no MCP server of a thread with the
// thread, so a session that resumes it, and a run that forks it, give the
// servers again (each with its own endpoint and token): the model's call
// of the Go tool works in each.
func TestCodexGoToolResumed(t *testing.T) {
	forEachRig(t, []cli{*cliNamed("codex")}, func(t *testing.T, r *rig) {
		w := twoWayOf(t, "codex")
		var rec recorder
		servers := []invoker.MCPServer{{Name: "gotools", Server: recordServer(rec.handle)}}
		for _, text := range []string{"opened", "resumed", "forked"} {
			r.srv.Enqueue(w.call("gotools", "record", map[string]any{"text": text}), fakemodel.EchoToolResult("after: "))
		}
		req := r.sessionRequest(invoker.ReadOnly)
		req.MCPServers = servers
		s := r.openSession(t, r.inv, req)
		first, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "record it"})
		if err != nil || first.SessionID == "" {
			t.Fatalf("Turn() = %s, %v; want a session id", jsonString(first), err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		req.SessionID = first.SessionID
		s = r.openSession(t, r.inv, req)
		if res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "record it again"}); err != nil || res.SessionID != first.SessionID {
			t.Fatalf("resumed Turn() = %s, %v; want a turn of %s", jsonString(res), err, first.SessionID)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		fork := r.request("record it in a fork")
		fork.Permission, fork.SessionID, fork.Fork, fork.MCPServers = invoker.ReadOnly, first.SessionID, true, servers
		if res, err := r.invoke(context.Background(), fork); err != nil || res.SessionID == first.SessionID {
			t.Fatalf("forked Invoke() = %s, %v; want a new thread", jsonString(res), err)
		}
		if seen := rec.texts(); !slices.Equal(seen, []string{"opened", "resumed", "forked"}) {
			t.Errorf("the handler saw %q, want one call in the opened, the resumed and the forked thread", seen)
		}
	})
}

// shellProbe is a shell command that prints the shell the CLI ran it
// through ("shell EXE", "argv ARGV": the executable the kernel started
// and its first arguments) and whether it may read its parent's memory
// map, which a process of the same Landlock domain may and one of a
// nested domain may not.
const shellProbe = `readlink /proc/$$/exe | sed 's/^/shell /'; tr '\0' ' ' </proc/$$/cmdline | head -1 | cut -c1-24 | sed 's/^/argv /'; echo; cat /proc/$PPID/maps >/dev/null 2>&1 && echo "parent maps read" || echo "parent maps refused"`

// TestSandboxShellNested: each CLI runs a command the model asks for
// through a shell, which under the sandbox is the real shell kept in the
// run's mount namespace, started in a Landlock domain nested in the CLI's
// (docs/sandbox.md): the command cannot read its parent's memory map.
// Without the sandbox it can. Each run logs which shell the CLI executed,
// by which path.
func TestSandboxShellNested(t *testing.T) {
	forEachCLI(t, func(t *testing.T, r *rig) {
		for _, mode := range []string{"required", "off"} {
			t.Run(mode, func(t *testing.T) {
				r.srv.Enqueue(fakemodel.Shell(shellProbe), fakemodel.EchoToolResult("after: "))
				req := r.request("look at your shell")
				req.Permission, req.Sandbox = invoker.Unlimited, invoker.Sandbox{Mode: mode}
				res, ev := probe(t, r, req)
				out := res.Text
				for _, tr := range ev.results {
					out += "\n" + tr.Output
				}
				t.Logf("%s: %s", mode, out)
				nested := mode == "required"
				if got := strings.Contains(out, "shell "+sandbox.ShimDir+"/"); got != nested {
					t.Errorf("%s: the real shell beneath %s: %v, want %v: %q", mode, sandbox.ShimDir, got, nested, out)
				}
				want := map[bool]string{true: "parent maps refused", false: "parent maps read"}[nested]
				if !strings.Contains(out, want) {
					t.Errorf("%s: the command printed %q, want %q", mode, out, want)
				}
			})
		}
	})
}
