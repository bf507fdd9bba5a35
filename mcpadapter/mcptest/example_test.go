package mcptest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clinvoke/clinvoke/claude"
	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker/invokertest"
	"github.com/clinvoke/clinvoke/mcpadapter"
	"github.com/clinvoke/clinvoke/mcpadapter/mcptest"
)

// A Client calls the tools of a server built on mcpadapter, here serving
// Claude Code played by an invokertest.Agent (the test binary, handed over
// to it by invokertest.Main in TestMain), and decodes the result. In a
// test, mcptest.Connect(t, server, tools, nil) does what NewClient and
// Close do here.
func Example() {
	agent := invokertest.Agent{CLI: "claude", Answer: "The tests pass."}
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, nil, claude.New(agent.Options()))
	if err != nil {
		log.Fatal(err)
	}
	c, err := mcptest.NewClient(server, tools, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Fatal(err)
		}
	}()

	out, err := c.Call(context.Background(), "claude", mcpadapter.Input{Prompt: "Run the tests.", Workdir: os.TempDir()})
	fmt.Println(out.Status, out.Text, err)
	// Output:
	// completed The tests pass. <nil>
}

// An Invoker tells when a run has started, so that a call is cancelled
// while its agent is at work (here stalled, having started a process of
// its own): the client gets no answer, as MCP has it, and once Wait
// returns nothing the agent started is alive.
func ExampleInvoker() {
	agent := invokertest.Agent{CLI: "codex", Answer: "Half an", Stall: time.Hour, LeaveBehind: true}
	inv := mcptest.NewInvoker(codex.New(agent.Options()))
	server := mcp.NewServer(&mcp.Implementation{Name: "agents", Version: "v1.0.0"}, nil)
	tools, err := mcpadapter.Register(server, nil, inv)
	if err != nil {
		log.Fatal(err)
	}
	c, err := mcptest.NewClient(server, tools, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		req, err := inv.WaitStart(context.Background())
		fmt.Println("started:", req.Prompt, err)
		cancel()
	}()
	_, err = c.Call(ctx, "codex", mcpadapter.Input{Prompt: "Explain.", Workdir: os.TempDir()})
	fmt.Println(errors.Is(err, context.Canceled))
	if err := c.Wait(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("survivors:", len(invokertest.Survivors()))
	// Output:
	// started: Explain. <nil>
	// true
	// survivors: 0
}
