package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/mcpadapter"
)

// echoAgent is an invoker.Invoker that answers at once, standing in for
// codex.New() and its kin, which need the real CLI. Until its context is
// cancelled, a prompt of "wait" blocks, as a long agent turn would.
type echoAgent struct{ started chan struct{} }

func (echoAgent) Name() string { return "echo" }

// Capabilities declares no optional Request field and no sessions.
func (echoAgent) Capabilities() invoker.Capabilities { return invoker.Capabilities{} }

// OpenSession refuses: echoAgent has no long-lived mode.
func (echoAgent) OpenSession(context.Context, invoker.SessionRequest) (invoker.Session, error) {
	return nil, invoker.ErrUnsupported
}

func (a echoAgent) Invoke(ctx context.Context, req invoker.Request) (*invoker.Result, error) {
	if req.Prompt == "wait" {
		a.started <- struct{}{}
		<-ctx.Done()
		return &invoker.Result{SessionID: "session-2", Text: "half an ans", ExitCode: -1}, ctx.Err()
	}
	return &invoker.Result{SessionID: "session-1", Text: "you said: " + req.Prompt}, nil
}

func Example() {
	ctx := context.Background()

	// The server: the invokers' tools, with runs tied to the server's
	// lifetime and working directories confined to one root.
	lifetime, stop := context.WithCancel(ctx)
	defer stop()
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	err := mcpadapter.Register(server, &mcpadapter.Options{
		Context: lifetime,
		Roots:   []string{os.TempDir()},
	}, echoAgent{})
	if err != nil {
		log.Fatal(err)
	}

	// A client, connected in memory.
	t1, t2 := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, t1, nil)
	if err != nil {
		log.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, t2, nil)
	if err != nil {
		log.Fatal(err)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, tl := range tools.Tools {
		fmt.Println("tool:", tl.Name)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "echo",
		Arguments: map[string]any{"prompt": "hello", "workdir": os.TempDir()},
	})
	if err != nil {
		log.Fatal(err) // a protocol failure; a failed run is res.IsError
	}
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %q (session %s)\n", out.Status, out.Text, out.SessionID)

	// A workdir outside the roots is refused before anything starts.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "echo",
		Arguments: map[string]any{"prompt": "hello", "workdir": "/"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("refused:", res.IsError)

	// Structured teardown: the client closes its session, then the server
	// session ends.
	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := ss.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// tool: echo
	// tool: echo_parallel
	// completed: "you said: hello" (session session-1)
	// refused: true
}

// Stopping the server cancels the runs in flight: the call is answered with
// an isError result that keeps the partial text and the session id.
func ExampleOptions_context() {
	ctx := context.Background()
	lifetime, stop := context.WithCancel(ctx)
	defer stop()
	agent := echoAgent{started: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	if err := mcpadapter.Register(server, &mcpadapter.Options{Context: lifetime}, agent); err != nil {
		log.Fatal(err)
	}
	t1, t2 := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, t1, nil)
	if err != nil {
		log.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1.0.0"}, nil).Connect(ctx, t2, nil)
	if err != nil {
		log.Fatal(err)
	}

	go func() {
		<-agent.started
		stop() // as on Ctrl-C
	}()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "echo",
		Arguments: map[string]any{"prompt": "wait", "workdir": os.TempDir()},
	})
	if err != nil {
		log.Fatal(err)
	}
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("isError:", res.IsError)
	fmt.Println(out.Status+":", out.Error)
	fmt.Printf("partial text %q, session %s\n", out.Text, out.SessionID)
	fmt.Println(out.Resume)

	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := ss.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// isError: true
	// cancelled: the server is shutting down
	// partial text "half an ans", session session-2
	// To continue this session, call echo again with session_id "session-2" and the same workdir.
}

// A server that stops cancels the runs in flight (Options.Context), then
// waits until every call has been recorded before it exits.
func ExampleTracker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	transcript := filepath.Join(dir, "transcript.jsonl")

	lifetime, stop := context.WithCancel(ctx)
	defer stop()
	agent := echoAgent{started: make(chan struct{})}
	tracker := new(mcpadapter.Tracker)
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	err = mcpadapter.Register(server, &mcpadapter.Options{Context: lifetime, Tracker: tracker, TranscriptPath: transcript}, agent)
	if err != nil {
		log.Fatal(err)
	}
	t1, t2 := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, t1, nil)
	if err != nil {
		log.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1.0.0"}, nil).Connect(ctx, t2, nil)
	if err != nil {
		log.Fatal(err)
	}
	answered := make(chan error)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:      "echo",
			Arguments: map[string]any{"prompt": "wait", "workdir": os.TempDir()},
		})
		answered <- err
	}()
	<-agent.started

	stop() // the first signal
	if err := tracker.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	// Every run is reaped and recorded: the process could exit now.
	data, err := os.ReadFile(transcript)
	if err != nil {
		log.Fatal(err)
	}
	var e mcpadapter.TranscriptEntry
	if err := json.Unmarshal(data, &e); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s (session %s)\n", e.Status, e.Error, e.SessionID)

	if err := <-answered; err != nil {
		log.Fatal(err)
	}
	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := ss.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// cancelled: the server is shutting down (session session-2)
}
