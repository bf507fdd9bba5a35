package mcpadapter_test

// Two replicas of the example server in -stateless mode behind a real
// load balancer (nginx, started as a process of this test with a
// generated configuration), as docs/serving.md's "Scaling out" shows, each
// requiring a bearer token of the same file.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// nginxConf is the load balancer's configuration: round robin over the
// replicas, no buffering (progress notifications stream through), long
// reads (a call is one long response), bodies up to the servers' limit,
// and the client's Host header passed on (the SDK's DNS-rebinding
// protection refuses a request that reaches 127.0.0.1 with another host
// name, such as the upstream's).
const nginxConf = `%s
worker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	upstream mcp {
%s	}
	server {
		listen %s;
		location / {
			proxy_pass http://mcp;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $http_host;
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 1h;
			client_max_body_size 16m;
		}
	}
}
`

// startNginx runs nginx in front of backends and returns its URL. It
// fails under CI=true when nginx is missing (.ci/run installs it), and
// skips otherwise.
func startNginx(t *testing.T, backends ...string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, err2 := os.Stat(p); err2 == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nginx is not installed: apt-get install nginx-light (.ci/run does)")
		}
		t.Skip("nginx is not installed (apt-get install nginx-light)")
	}
	// A free port: the race with another listener taking it is harmless
	// in a test and shows as nginx failing to start.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	var upstream strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&upstream, "\t\tserver %s;\n", b)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers write in dir, which is root's
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, dir, upstream.String(), addr), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// nginx's fast stop; its workers follow. (Its graceful stop,
		// SIGQUIT, waits for the clients' idle keep-alive connections.)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(testenv.Timeout(testenv.Hang)):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out.String(), log)
		}
	})
	// Ready when it accepts connections.
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", cmd.ProcessState, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not accept connections on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStatelessReplicasBehindLoadBalancer(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: time.Second, Grandchild: true, Escapee: true,
		Answer: "done", Tag: fakeagent.NewTag()}
	var (
		replicas    []*httpServer
		transcripts []string
		backends    []string
	)
	tokens := writeTokens(t, "alice:"+aliceToken, "bob:"+bobToken)
	for i := range 2 {
		tr := filepath.Join(t.TempDir(), fmt.Sprintf("replica%d.jsonl", i))
		srv := startHTTPServer(t, bin, s, root, tr, "-stateless", "-max", "-1", "-auth-tokens", tokens)
		replicas = append(replicas, srv)
		transcripts = append(transcripts, tr)
		backends = append(backends, strings.TrimPrefix(srv.url, "http://"))
	}
	lb := startNginx(t, backends...)

	// Through the balancer, a request without the token is refused by
	// whichever replica gets it, and starts nothing.
	lbs := &accessServer{url: lb}
	for range 4 {
		resp, body := lbs.do(t, endpoints("", root)["POST tools/call"])
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("a call without a token through the balancer: %s %q, want 401 with a Bearer challenge", resp.Status, body)
		}
	}
	// Calls alternate between two clients' tokens, each with its identity.
	identity := func(i int) (name, token string) {
		if i%2 == 0 {
			return "alice", aliceToken
		}
		return "bob", bobToken
	}

	const calls, dropped = 20, 5
	var (
		wg       sync.WaitGroup
		slots    = make(chan struct{}, 6) // calls in flight at once, for a small machine
		mu       sync.Mutex
		answered int
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			drop := i%(calls/dropped) == 0
			hc := newKillableClient()
			_, bearerToken := identity(i)
			hc.Client.Transport = bearer{token: bearerToken, base: hc.Client.Transport}
			cs, progress := connectHTTP(t, lb, hc.Client, -1)
			token := fmt.Sprint("call", i)
			resc := make(chan callOutcome, 1)
			go func() {
				params := &mcp.CallToolParams{Name: "codex", Arguments: args(fmt.Sprint("task ", i), root)}
				params.SetProgressToken(token)
				res, err := cs.CallTool(context.Background(), params)
				resc <- callOutcome{res, err}
			}()
			if drop {
				waitStreaming(progress, token) // progress reaches the client through the balancer
				hc.kill()                      // the client dies mid-call
				r := <-resc
				if r.err == nil {
					t.Errorf("call %d: answered after its client's connections were closed", i)
				}
				// Its connections are dead: the client's DELETE fails on one
				// of them, or is refused by the stateless server (405).
				if err := cs.Close(); err != nil {
					t.Errorf("call %d: ClientSession.Close() error = %v", i, err)
				}
				return
			}
			r := <-resc
			var out mcpadapter.Output
			if r.err == nil {
				decode(t, r.res, &out)
			}
			if r.err != nil || r.res.IsError || out.Text != "done" {
				t.Errorf("call %d: error %v, output %+v; want the answer", i, r.err, out)
			} else {
				mu.Lock()
				answered++
				mu.Unlock()
			}
			if err := cs.Close(); err != nil {
				t.Errorf("call %d: ClientSession.Close() error = %v", i, err)
			}
		}()
	}
	wg.Wait()

	// Every run ends in a final transcript line of the replica that ran
	// it: 15 completed and 5 cancelled because their client went away.
	counts := map[mcpadapter.Status]int{}
	perReplica := make([]int, len(replicas))
	deadline := time.Now().Add(testenv.Timeout(testenv.Hang))
	var wrongIdentity []string
	for {
		clear(counts)
		wrongIdentity = wrongIdentity[:0]
		total := 0
		for k, tr := range transcripts {
			perReplica[k] = 0
			for _, e := range readTranscript(t, tr) {
				if e.Status == mcpadapter.StatusRunning {
					continue
				}
				counts[e.Status]++
				perReplica[k]++
				total++
				if e.Status == mcpadapter.StatusCancelled && !strings.Contains(e.Error, "went away") {
					t.Errorf("replica %d: run cancelled with %q, want the client gone", k, e.Error)
				}
				var i int
				if _, err := fmt.Sscanf(e.Prompt, "task %d", &i); err == nil {
					if name, _ := identity(i); e.Identity != name {
						wrongIdentity = append(wrongIdentity, fmt.Sprintf("%q of %q", e.Prompt, e.Identity))
					}
				}
			}
		}
		if total >= calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(wrongIdentity) > 0 {
		t.Errorf("runs recorded with the wrong identity: %v", wrongIdentity)
	}
	if counts[mcpadapter.StatusCompleted] != calls-dropped || counts[mcpadapter.StatusCancelled] != dropped || answered != calls-dropped {
		t.Errorf("runs by status %v, %d answered; want %d completed and answered, %d cancelled", counts, answered, calls-dropped, dropped)
	}
	for k, n := range perReplica {
		if n == 0 {
			t.Errorf("replica %d ran no call: the balancer did not spread them (%v)", k, perReplica)
		}
	}
	t.Logf("runs per replica: %v", perReplica)
	var pids []int
	for _, r := range replicas {
		pids = append(pids, r.cmd.Process.Pid)
	}
	noSurvivors(t, s.Tag, pids...)

	for _, r := range replicas {
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
		<-r.exited
		if !r.cmd.ProcessState.Success() {
			t.Errorf("replica exit: %v, want success", r.cmd.ProcessState)
		}
	}
}
