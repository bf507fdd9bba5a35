package fakeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// isCodexAppServer reports whether args start Codex's app-server, the
// long-lived mode that speaks JSON-RPC on stdin and stdout.
func isCodexAppServer(flavor string, args []string) bool {
	return flavor == Codex && len(args) > 0 && args[0] == "app-server"
}

// appRPC is one JSON-RPC message a client writes.
type appRPC struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ThreadID string `json:"threadId"`
		TurnID   string `json:"turnId"`
		Input    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"input"`
		ApprovalPolicy json.RawMessage            `json:"approvalPolicy"`
		Config         map[string]json.RawMessage `json:"config"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// appServer is one run of the fake app-server.
type appServer struct {
	a      *agent
	thread string
	mu     sync.Mutex
	turn   string        // the turn in flight, "" when idle
	last   string        // the turn that completed last
	intr   chan struct{} // closed to interrupt it
	done   chan struct{} // closed when its goroutine ended
	n      int           // turns so far
	two    *codexTwoWay
}

// codexAppServer runs the fake app-server until end of input, and returns
// the exit status (see "Sessions" in the package documentation).
func (a *agent) codexAppServer(rec recorder) int {
	if err := a.startSession(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		return 2
	}
	srv := &appServer{a: a, thread: a.sid, two: newCodexTwoWay(a.args)}
	defer srv.two.clients.close()
	time.Sleep(a.s.SilentFor) // a server slow to start: nothing is answered meanwhile
	readInput(a, rec, func(m *appRPC) { srv.handle(m) })
	return a.endOfInput(0) // like the real app-server, even with a turn in flight
}

func (s *appServer) reply(id json.RawMessage, result any) {
	s.a.emit(obj{{"id", id}, {"result", result}})
}

func (s *appServer) notify(method string, params obj) {
	s.a.emit(obj{{"method", method}, {"params", params}, {"emittedAtMs", time.Now().UnixMilli()}})
}

func (s *appServer) handle(m *appRPC) {
	if m.Method == "" && len(m.ID) > 0 {
		// The client's response to a request of the server's.
		res := m.Result
		if len(m.Error) > 0 && string(m.Error) != "null" {
			res = json.RawMessage("null")
		}
		s.two.replies.deliver(string(m.ID), res)
		return
	}
	switch m.Method {
	case "initialize":
		s.reply(m.ID, obj{{"userAgent", "fakeagent/0.169.0"}, {"codexHome", "/nonexistent"},
			{"platformFamily", "unix"}, {"platformOs", "linux"}})
	case "initialized":
	case "thread/start", "thread/resume":
		if strings.Contains(m.Params.ThreadID, "missing") {
			// As Codex answers for a thread it has no rollout of.
			s.a.emit(obj{{"id", m.ID}, {"error", obj{{"code", -32600}, {"message", "no rollout found for thread id " + m.Params.ThreadID}}}})
			return
		}
		if m.Params.ThreadID != "" {
			s.thread = m.Params.ThreadID
		}
		s.two.threadConfig(m.Params.ApprovalPolicy, m.Params.Config)
		th := obj{{"id", s.thread}, {"sessionId", s.thread}, {"status", obj{{"type", "idle"}}}}
		s.reply(m.ID, obj{{"thread", th}})
		s.notify("thread/started", obj{{"thread", th}})
	case "turn/start":
		var prompt []string
		for _, in := range m.Params.Input {
			if in.Type == "text" {
				prompt = append(prompt, in.Text)
			}
		}
		s.mu.Lock()
		busy := s.turn != ""
		s.mu.Unlock()
		if busy {
			s.a.emit(obj{{"id", m.ID}, {"error", obj{{"code", -32600}, {"message", "a turn is already running"}}}})
			return
		}
		s.two.mu.Lock()
		s.two.setPolicy(m.Params.ApprovalPolicy)
		s.two.mu.Unlock()
		s.mu.Lock()
		s.n++
		s.turn = uuid7()
		s.intr, s.done = make(chan struct{}), make(chan struct{})
		turn, intr, done, n := s.turn, s.intr, s.done, s.n
		s.mu.Unlock()
		s.reply(m.ID, obj{{"turn", obj{{"id", turn}, {"items", []obj{}}, {"status", "inProgress"}, {"error", nil}}}})
		go func() {
			defer close(done)
			s.runTurn(n, turn, strings.Join(prompt, "\n"), intr)
		}()
	case "turn/interrupt":
		if s.a.s.IgnoreInterrupt {
			return // no answer, no end of turn
		}
		s.mu.Lock()
		turn, intr, done := s.turn, s.intr, s.done
		s.mu.Unlock()
		if turn == "" || turn != m.Params.TurnID {
			s.a.emit(obj{{"id", m.ID}, {"error", obj{{"code", -32600}, {"message", "no such turn in progress"}}}})
			return
		}
		close(intr)
		<-done
		s.reply(m.ID, obj{})
	case "thread/backgroundTerminals/clean":
		s.mu.Lock()
		last := s.last
		s.mu.Unlock()
		if late := s.a.s.AskLate; late != "" && last != "" {
			// A question after turn/completed, which the client must
			// refuse: asked, and run if accepted, before the clean is
			// answered.
			go func() {
				s.codexAsk(context.Background(), last, late)
				s.reply(m.ID, obj{})
			}()
			return
		}
		s.reply(m.ID, obj{})
	default:
		if len(m.ID) > 0 {
			s.a.emit(obj{{"id", m.ID}, {"error", obj{{"code", -32601}, {"message", "method not found: " + m.Method}}}})
		}
	}
}

// runTurn prints turn n: the scripted items, then turn/completed; an
// interrupt ends it with status interrupted.
func (s *appServer) runTurn(n int, turn, prompt string, intr <-chan struct{}) {
	a := s.a
	sc := &a.s
	a.prompt = prompt
	tp := func(extra ...kv) obj {
		return append(obj{{"threadId", s.thread}, {"turnId", turn}}, extra...)
	}
	pause := func(d time.Duration) bool { return pauseUnless(d, intr) }
	end := func(status string) {
		s.mu.Lock()
		s.turn, s.last = "", turn
		s.mu.Unlock()
		s.notify("turn/completed", obj{{"threadId", s.thread}, {"turn", obj{{"id", turn}, {"items", []obj{}},
			{"status", status}, {"error", nil}}}})
	}
	a.beginTurn(n)
	s.notify("turn/started", obj{{"threadId", s.thread}, {"turn", obj{{"id", turn}, {"status", "inProgress"}}}})
	if sc.Tool {
		id := "call_" + randHex(6)
		cmd := "/bin/bash -lc '" + toolCommand + "'"
		s.notify("item/started", tp(kv{"item", obj{{"type", "commandExecution"}, {"id", id}, {"command", cmd},
			{"status", "inProgress"}, {"aggregatedOutput", nil}, {"exitCode", nil}}}))
		s.notify("item/completed", tp(kv{"item", obj{{"type", "commandExecution"}, {"id", id}, {"command", cmd},
			{"status", "completed"}, {"aggregatedOutput", toolOutput + "\n"}, {"exitCode", 0}}}))
	}
	var outs outcomes
	if sc.twoWay() {
		ctx, cancel := stopOn(intr)
		var err error
		outs, err = s.codexActions(ctx, turn)
		cancel()
		if err != nil {
			end("interrupted")
			return
		}
	}
	if sc.StreamFor > 0 {
		stop := time.Now().Add(sc.StreamFor)
		for k := 0; time.Now().Before(stop); k++ {
			s.notify("item/completed", tp(kv{"item", obj{{"type", "reasoning"}, {"id", "rs_" + randHex(6)},
				{"summary", []string{fmt.Sprintf("Working, step %d.", k+1)}}, {"content", []string{}}}}))
			if !pause(sc.interval()) {
				end("interrupted")
				return
			}
		}
	}
	answer := outs.answer(sc, n)
	msg := "msg_" + randHex(6)
	s.notify("item/started", tp(kv{"item", obj{{"type", "agentMessage"}, {"id", msg}, {"text", ""}}}))
	for i, piece := range split(answer, sc.Chunks) {
		if i > 0 && !pause(sc.interval()) {
			end("interrupted")
			return
		}
		s.notify("item/agentMessage/delta", tp(kv{"itemId", msg}, kv{"delta", piece}))
		if strings.Contains(prompt, PromptDie) {
			os.Exit(3)
		}
	}
	// PromptStall stalls mid-message, before the message is complete;
	// StallFor after the answer, before the end of the turn (as codex
	// exec's fake prints its whole messages before it).
	if strings.Contains(prompt, PromptStall) && !pause(sleepFor) {
		end("interrupted")
		return
	}
	s.notify("item/completed", tp(kv{"item", obj{{"type", "agentMessage"}, {"id", msg}, {"text", answer}}}))
	if !pause(sc.StallFor) {
		end("interrupted")
		return
	}
	in, out := tokens(prompt), tokens(answer)
	s.notify("thread/tokenUsage/updated", tp(kv{"tokenUsage", obj{{"total", obj{{"totalTokens", in + out},
		{"inputTokens", in}, {"cachedInputTokens", 0}, {"outputTokens", out}, {"reasoningOutputTokens", 0}}}}}))
	if sc.NoTerminal {
		os.Exit(sc.ExitCode) // a server that dies mid-turn: no turn/completed
	}
	end("completed")
}
