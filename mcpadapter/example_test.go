package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
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

	// The server: the invokers' tools, with working directories confined
	// to one root.
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		Roots: []string{os.TempDir()},
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

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, tl := range list.Tools {
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

	// Structured teardown: the client closes its session, the server
	// session ends, and the tools are shut down (nothing is left running).
	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := ss.Wait(); err != nil {
		log.Fatal(err)
	}
	if err := tools.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// tool: echo
	// tool: echo_parallel
	// completed: "you said: hello" (session session-1)
	// refused: true
}

// Shutdown cancels the runs in flight and returns once each is recorded:
// a server could exit then and lose nothing. The call is answered with an
// isError result that keeps the partial text and the session id, and
// calls arriving afterwards are refused.
func ExampleTools_Shutdown() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	transcript := filepath.Join(dir, "transcript.jsonl")

	agent := echoAgent{started: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{TranscriptPath: transcript}, agent)
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
	call := func(prompt string) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:      "echo",
			Arguments: map[string]any{"prompt": prompt, "workdir": os.TempDir()},
		})
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	answered := make(chan *mcp.CallToolResult)
	go func() { answered <- call("wait") }()
	<-agent.started

	// As on the first signal; a host gives its server little time, so a
	// real server bounds ctx.
	if err := tools.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	data, err := os.ReadFile(transcript)
	if err != nil {
		log.Fatal(err)
	}
	var e mcpadapter.TranscriptEntry
	if err := json.Unmarshal(data, &e); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("recorded: %s: %s (session %s)\n", e.Status, e.Error, e.SessionID)

	res := <-answered
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("isError:", res.IsError)
	fmt.Printf("partial text %q\n", out.Text)
	fmt.Println(out.Resume)

	res = call("hello")
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("later call %s: %s\n", out.Status, out.Error)

	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := ss.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// recorded: cancelled: the server is shutting down (session session-2)
	// isError: true
	// partial text "half an ans"
	// To continue this session, call echo again with session_id "session-2" and the same workdir.
	// later call refused: the server is shutting down
}

// Over streamable HTTP, the tools' Handler wraps the SDK's, so that a
// call whose HTTP request ends unanswered (the client went away, its
// session was deleted or timed out) is cancelled and its process tree
// killed. The SDK alone lets such a run go on to its end.
func ExampleTools_Handler() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, nil, echoAgent{})
	if err != nil {
		log.Fatal(err)
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(tools.Handler(sdk)) // in a real server: http.Server{Handler: tools.Handler(sdk)}
	defer ts.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL}, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "echo",
		Arguments: map[string]any{"prompt": "hello over HTTP", "workdir": os.TempDir()},
	})
	if err != nil {
		log.Fatal(err)
	}
	var out mcpadapter.Output
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %q\n", out.Status, out.Text)

	if err := cs.Close(); err != nil { // deletes the session
		log.Fatal(err)
	}
	if err := tools.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// completed: "you said: hello over HTTP"
}

// bearerClient sends a bearer token with every request.
type bearerClient struct{ token string }

func (b bearerClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A server on the network says who may use it: here, named bearer tokens
// (a file of NAME:TOKEN lines with LoadTokens, which follows the file as
// it is rotated). Every request without one of them is refused with 401
// before it reaches anything; a call's identity, the token's name, is in
// its transcript lines, log records and span, and Tools.Calls lists it.
func ExampleHTTPAccess() {
	ctx := context.Background()
	tokens, err := mcpadapter.ParseTokens("alice:" + "0123456789abcdef0123456789abcdef")
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, &mcpadapter.Options{
		HTTPAccess:               mcpadapter.HTTPAccess{Tokens: tokens},
		MaxConcurrentPerIdentity: 2, // one client cannot take every slot
	}, echoAgent{})
	if err != nil {
		log.Fatal(err)
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(tools.Handler(sdk))
	defer ts.Close()

	resp, err := http.Post(ts.URL, "application/json", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("without a token:", resp.Status, resp.Header.Get("WWW-Authenticate"))

	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ts.URL,
		HTTPClient: &http.Client{Transport: bearerClient{token: "0123456789abcdef0123456789abcdef"}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "echo",
		Arguments: map[string]any{"prompt": "hello", "workdir": os.TempDir()},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("with alice's token: isError", res.IsError)

	if err := cs.Close(); err != nil {
		log.Fatal(err)
	}
	if err := tools.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// without a token: 401 Unauthorized Bearer realm="mcp"
	// with alice's token: isError false
}
