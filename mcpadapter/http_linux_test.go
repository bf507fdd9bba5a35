package mcpadapter_test

// The example server over streamable HTTP, as a separate process: calls
// whose client goes away, a shutdown while runs are active, the request
// size limit.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// httpServer is the example server started by startHTTPServer.
type httpServer struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the server is reaped
}

var addrRE = regexp.MustCompile(`transport=http://(127\.0\.0\.1:[0-9]+)`)

// startHTTPServer starts the example server on a free port of 127.0.0.1,
// serving the codex backend with this test binary running s.
func startHTTPServer(t *testing.T, bin string, s fakeagent.Script, root, transcript string, flags ...string) *httpServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-http", "127.0.0.1:0", "-cli", "codex", "-sandbox", "off", "-codex-bin", os.Args[0], "-root", root,
		"-transcript", transcript, "-progress", "1ms"}, flags...)...)
	cmd.Env = append(os.Environ(), s.Env()...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &httpServer{cmd: cmd, exited: make(chan struct{})}
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		<-copied // Wait closes the pipe: read it to its end first
		cmd.Wait()
		close(srv.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op when it exited, as it should have
		<-srv.exited
		if t.Failed() {
			mu.Lock()
			t.Logf("server stderr:\n%s", log.String())
			mu.Unlock()
		}
	})
	select {
	case a := <-addr:
		srv.url = "http://" + a
	case <-srv.exited:
		t.Fatalf("the server exited before serving: %v", cmd.ProcessState)
	case <-time.After(testenv.Timeout(testenv.Hang)):
		t.Fatal("the server did not say where it listens")
	}
	return srv
}

// connectHTTP connects a go-sdk client to url, with progress
// notifications sent to the returned channel. maxRetries is the
// transport's: a negative number makes a broken stream end the session at
// once.
func connectHTTP(t *testing.T, url string, hc *http.Client, maxRetries int) (*mcp.ClientSession, chan *mcp.ProgressNotificationParams) {
	t.Helper()
	progress := make(chan *mcp.ProgressNotificationParams, 1000)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: maxRetries}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	return cs, progress
}

// waitStreaming waits for a progress message of token saying the fake
// streams, which it does once its whole tree is started.
func waitStreaming(progress chan *mcp.ProgressNotificationParams, token string) {
	for p := range progress {
		if p.ProgressToken == token && (strings.Contains(p.Message, "running: ") || strings.Contains(p.Message, "thinking")) {
			return
		}
	}
}

func TestExampleServerHTTPDisconnectAndShutdown(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	transcript := filepath.Join(t.TempDir(), "transcript.jsonl")
	s := fakeagent.Script{Flavor: fakeagent.Codex, Tool: true, StreamFor: time.Hour, Grandchild: true, Escapee: true, Tag: fakeagent.NewTag()}
	srv := startHTTPServer(t, bin, s, root, transcript)

	// A client whose connection drops mid-call: its run is killed.
	dropped := newKillableClient()
	cs, progress := connectHTTP(t, srv.url, dropped.Client, -1) // a dead client does not come back
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", root)}
		params.SetProgressToken("drop")
		_, err := cs.CallTool(ctx, params)
		errc <- err
	}()
	waitStreaming(progress, "drop")
	// The client process dies: every connection it had is closed, with
	// no notifications/cancelled.
	dropped.kill()
	if e := transcriptEntries(t, transcript, 1); e[0].Status != mcpadapter.StatusCancelled || !strings.Contains(e[0].Error, "went away") {
		t.Errorf("transcript entry %+v, want cancelled because the client went away", e[0])
	}
	noSurvivors(t, s.Tag, srv.cmd.Process.Pid)
	cancel()
	<-errc

	// SIGINT while a run is active: the server exits only once the run
	// is reaped and recorded, and answers the call first.
	// The server closes the session's standalone stream as it exits,
	// maybe before the client has read the answer on the call's stream;
	// with no retry left, the go-sdk client would end the session, and
	// fail the call, on whichever it notices first.
	cs2, progress2 := connectHTTP(t, srv.url, nil, 0)
	resc := make(chan callOutcome, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "codex", Arguments: args("stream", root)}
		params.SetProgressToken("sigint")
		res, err := cs2.CallTool(context.Background(), params)
		resc <- callOutcome{res, err}
	}()
	waitStreaming(progress2, "sigint")
	if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	// Nothing waits here: everything must be done when the server exits.
	noSurvivors(t, s.Tag, srv.cmd.Process.Pid)
	var final []mcpadapter.TranscriptEntry
	for _, e := range readTranscript(t, transcript) {
		if e.Status != mcpadapter.StatusRunning {
			final = append(final, e)
		}
	}
	if len(final) != 2 || final[1].Status != mcpadapter.StatusCancelled || !strings.Contains(final[1].Error, "shutting down") {
		t.Errorf("transcript when the server exited: %+v, want the second run cancelled by the shutdown", final)
	}
	if !srv.cmd.ProcessState.Success() {
		t.Errorf("server exit: %v, want success", srv.cmd.ProcessState)
	}
	r := <-resc
	checkShutdownAnswer(t, r.res, r.err)
	// The server is gone: the client's DELETE at Close goes out on a
	// connection the server closed as it exited, or is refused; the one
	// error tolerated.
	if err := cs2.Close(); err != nil && !serverGone(err) {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
	// The dropped client's DELETE goes out on a connection killed under
	// it, or finds the server gone.
	if err := cs.Close(); err != nil && !serverGone(err) {
		t.Errorf("ClientSession.Close() error = %v", err)
	}
}

// serverGone reports whether err is the failure of a request to a server
// that exited: the connection it closed as it exited (net/http says
// "server closed idle connection" when that happened as the request went
// out on it), or no listener.
func serverGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, net.ErrClosed) || // a connection the dropped client's own death closed
		strings.Contains(err.Error(), "server closed idle connection")
}

// killableClient is an HTTP client whose connections can all be closed
// at once, in use or idle, as the death of the client's process would.
type killableClient struct {
	*http.Client
	mu    sync.Mutex
	conns []net.Conn
}

func newKillableClient() *killableClient {
	k := &killableClient{}
	var d net.Dialer
	k.Client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
		}
		return c, err
	}}}
	return k
}

func (k *killableClient) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
}

func TestExampleServerRequestLimit(t *testing.T) {
	bin := buildServer(t)
	root := t.TempDir()
	s := fakeagent.Script{Flavor: fakeagent.Codex, Answer: "read it", Tag: fakeagent.NewTag()}
	srv := startHTTPServer(t, bin, s, root, filepath.Join(t.TempDir(), "transcript.jsonl"), "-stateless", "-max-request", fmt.Sprint(6<<20))

	call := func(prompt string) (*http.Response, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"codex","arguments":{"prompt":` +
			jsonString(t, prompt) + `,"workdir":` + jsonString(t, root) + `}}}`
		req, err := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// 5 MiB: over go-sdk's default of 4 MiB, under the limit given.
	if resp, body := call(strings.Repeat("x", 5<<20)); resp.StatusCode != http.StatusOK || !strings.Contains(body, "read it") {
		t.Errorf("5 MiB prompt: %s %.200s, want the answer", resp.Status, body)
	}
	resp, body := call(strings.Repeat("x", 7<<20))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "-max-request") || !strings.Contains(body, "limit of 6291456 bytes") {
		t.Errorf("7 MiB prompt: %s %.300s, want 413 naming the limit and the flag", resp.Status, body)
	}
	noSurvivors(t, s.Tag, srv.cmd.Process.Pid)
}
