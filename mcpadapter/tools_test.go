package mcpadapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/internal/testkit/testenv"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// TestShutdownWaitsForTheRecord checks that a call stops counting only
// once its transcript line is written: a server that exits as soon as
// Shutdown returns loses no record.
func TestShutdownWaitsForTheRecord(t *testing.T) {
	b := newBlocker("codex")
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	h := newHarness(t, &mcpadapter.Options{TranscriptPath: path}, b)
	tools := h.tools

	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())}); err != nil {
			t.Errorf("CallTool() error = %v", err)
		}
	}()
	<-b.started
	if n := tools.Active(); n != 1 {
		t.Errorf("Active() = %d with one call running, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := tools.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() error = %v", err)
	}
	if n := tools.Active(); n != 0 {
		t.Errorf("Active() = %d after Shutdown, want 0", n)
	}
	// No waiting here: the record must be on disk when Shutdown returns.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var first, last mcpadapter.TranscriptEntry
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || first.Status != mcpadapter.StatusRunning || first.SessionID != "sess-blocked" ||
		last.Status != mcpadapter.StatusCancelled || last.Run != first.Run || last.Run == "" {
		t.Errorf("transcript when Shutdown returned:\n%s\nwant a running line with the session id, then the run's cancelled line", data)
	}
	<-done
}

// httpHarness serves the adapter's tools over streamable HTTP, with the
// tools' handler around the SDK's.
func httpHarness(t *testing.T, stateless bool, b *blocker) (*httptest.Server, *mcpadapter.Tools) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "clinvoke-test", Version: "v0.0.1"}, nil)
	tools, err := mcpadapter.Register(server, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // last: every call must have ended
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v", err)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	t.Cleanup(func() {
		// A session whose client vanished stays open on the server.
		for ss := range server.Sessions() {
			if err := ss.Close(); err != nil {
				t.Errorf("ServerSession.Close() error = %v", err)
			}
		}
	})
	ts := httptest.NewServer(tools.Handler(h))
	t.Cleanup(ts.Close)
	return ts, tools
}

// checkClientGone waits for the blocked run's end and checks its cause.
func checkClientGone(t *testing.T, b *blocker, tools *mcpadapter.Tools) {
	t.Helper()
	if cause := <-b.cancelled; !errors.Is(cause, mcpadapter.ErrClientGone) {
		t.Errorf("the run's context ended with %v, want ErrClientGone", cause)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout(testenv.Hang))
	defer cancel()
	if err := tools.Wait(ctx); err != nil {
		t.Errorf("Wait() error = %v", err)
	}
}

// TestHTTPDisconnectCancels checks that a call whose client went away is
// cancelled, on each path: the stream dropped (stateless and stateful),
// and the session deleted. go-sdk v1.8.0 alone lets the run go on.
func TestHTTPDisconnectCancels(t *testing.T) {
	t.Run("stateless, request dropped", func(t *testing.T) {
		b := newBlocker("codex")
		ts, tools := httpHarness(t, true, b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"codex","arguments":{"prompt":"hi","workdir":` +
			jsonString(t, t.TempDir()) + `}}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		errc := make(chan error, 1)
		go func() {
			resp, err := ts.Client().Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errc <- err
		}()
		<-b.started
		cancel() // the client drops the request
		checkClientGone(t, b, tools)
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("request error = %v, want context.Canceled", err)
		}
	})

	for _, path := range []string{"connection dropped", "session deleted"} {
		t.Run("stateful, "+path, func(t *testing.T) {
			b := newBlocker("codex")
			ts, tools := httpHarness(t, false, b)
			// Every request on a connection of its own: the drop below
			// closes the connections of that moment, and the client's
			// DELETE at Close must not go out on one of them, kept in a
			// pool, as net/http would (it then fails with EOF, a failure
			// of the test's own doing, not of the server).
			hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			called := make(chan outcome, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "codex", Arguments: args("hi", t.TempDir())})
				called <- outcome{res, err}
			}()
			<-b.started
			switch path {
			case "connection dropped":
				ts.CloseClientConnections()
			case "session deleted":
				req, err := http.NewRequest(http.MethodDelete, ts.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Mcp-Session-Id", cs.ID())
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("DELETE: %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("DELETE: %s, want 204", resp.Status)
				}
			}
			checkClientGone(t, b, tools)
			// A dropped connection ends the call with an error. A deleted
			// session may end it either way: its stream can still carry
			// the cancelled run's answer before the server closes it.
			switch o := <-called; {
			case o.err != nil:
			case path == "session deleted" && o.res.IsError:
			default:
				t.Errorf("CallTool() = %+v, nil; want the connection's end or, for a deleted session, the cancelled run's answer", o.res)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("ClientSession.Close() error = %v", err)
			}
		})
	}
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}
