// Package fakeagent is a scripted stand-in for the Codex, Gemini and Claude
// Code CLIs, for the tests, benchmarks and demo of clinvoke. It prints each
// CLI's real JSONL event shapes (copied from captures of the real CLIs,
// field order included) and misbehaves on demand: it streams for a while,
// stays silent, stalls before its terminal event, ignores SIGINT and
// SIGTERM, leaves a grandchild or a setsid escapee behind, keeps stdout open
// from a grandchild after exiting, prints a line of many MiB, prints
// malformed and non-UTF-8 lines, fails, exits non-zero with stderr, or
// replays a captured stream.
//
// It is not a separate program: a test binary (or the demo binary) runs it
// by re-executing itself, as os/exec's tests do with helperCommand. Main,
// called first in TestMain, turns the process into the fake agent when the
// environment asks for it; a Script says what the fake does, and
// Script.Env returns the environment that asks for it. The fake and the
// helper processes it starts are all this binary: no shell and no external
// program (not even sleep) is needed.
//
// # Usage
//
// In a package whose tests start agents:
//
//	func TestMain(m *testing.M) {
//		fakeagent.Main() // runs the fake agent and exits, when asked to
//		goleak.VerifyTestMain(fakeagent.CheckOrphans(m))
//	}
//
//	func TestCancel(t *testing.T) {
//		s := fakeagent.Script{
//			Flavor:     fakeagent.Claude,
//			StreamFor:  time.Hour,
//			Grandchild: true,
//			Escapee:    true,
//			RecordDir:  t.TempDir(),
//			Tag:        fakeagent.NewTag(),
//		}
//		inv := claude.New(invoker.Options{Binary: os.Args[0]})
//		ctx, cancel := context.WithCancel(context.Background())
//		req := invoker.Request{Prompt: "hi", Workdir: t.TempDir(), Env: s.Env(),
//			OnEvent: func(invoker.Event) { cancel() }}
//		_, err := inv.Invoke(ctx, req)
//		// ... check err, then prove that nothing of the tree survived:
//		rec, _ := fakeagent.ReadRecord(s.RecordDir)
//		if alive := rec.Alive(); len(alive) > 0 {
//			t.Errorf("processes survived Invoke: %v", alive)
//		}
//		if left := fakeagent.Survivors(s.Tag); len(left) > 0 {
//			t.Errorf("tagged processes survived Invoke: %v", left)
//		}
//		t.Cleanup(rec.Kill) // leave no sleeper behind if the library failed
//	}
//
// Without goleak, end TestMain with os.Exit(fakeagent.CheckOrphans(m).Run()).
//
// # Behaviour
//
// By default the fake reads standard input to EOF before anything else,
// like the real CLIs with a piped prompt (a stdin that is never closed
// hangs it, as it hangs Codex), then prints its events with one write call
// per line and exits 0. The Script documentation lists the order of
// everything it prints. On SIGINT and SIGTERM it ends the way the real CLI
// of its flavour does (docs/cli-facts.md): Codex exits 1 (143 on SIGTERM)
// without a terminal event; Claude prints an error_during_execution result
// and exits 0 on SIGINT, exits 143 without result on SIGTERM; Gemini exits
// 0 without result. It never stops the processes it started: that is the
// library's job, and what tests using it prove.
//
// Helper processes record themselves before the fake prints its first
// event, so a test that has read one line can rely on ReadRecord listing
// the whole tree.
//
// # Sessions
//
// With the Claude flavour and --input-format stream-json among its
// arguments, the fake runs Claude Code's long-lived mode instead: it reads
// one JSON line at a time, and answers each user message with one turn
// (system init, the Tool call, progress for StreamFor, the answer in
// Chunks, StallFor, and a result; the default answer is "Turn N: " and
// DefaultAnswer). A control_request of subtype interrupt during a turn is
// acknowledged with a control_response and ends the turn the way Claude
// Code does (a user line "[Request interrupted by user]" and a result of
// subtype error_during_execution); the fake then waits for the next
// message. End of input between turns exits 0. Misbehaviour: IgnoreInterrupt
// ignores interrupt requests; a prompt holding PromptStall stalls before its
// result until interrupted; one holding PromptDie exits 3 mid-turn. A
// set_model control request switches the model the next turns report,
// except to RefusedModel, which is refused; set_permission_mode is
// acknowledged, or refused with Script.RefuseModeSwitch.
// Standard input is recorded as it arrives.
//
// With the Codex flavour and app-server as its first argument, the fake
// speaks Codex's app-server JSON-RPC the same way: initialize,
// thread/start or thread/resume, and per turn/start the turn's item
// notifications (a commandExecution for Tool, reasoning for StreamFor, the
// answer as agentMessage deltas and item, StallFor after it) and
// turn/completed; turn/interrupt
// ends the turn with status interrupted (IgnoreInterrupt: no answer at
// all), thread/resume of an id holding "missing" fails as for an unknown
// thread, SilentFor delays every answer (a slow start), thread/backgroundTerminals/clean answers {}, and end of input exits
// 0 even with a turn in flight, as the real app-server does.
//
// With the Gemini flavour and --acp, and with the ACP flavour whatever its
// arguments, the fake is an Agent Client Protocol agent: initialize,
// authenticate, session/new or session/load, session/set_mode,
// session/set_model or session/set_config_option, and per session/prompt
// the turn's session/update notifications (see acpAgent.prompt for their
// order: tool_call and tool_call_update for Tool, agent_thought_chunk for
// StreamFor, agent_message_chunk for the answer), then the prompt's
// response with stop reason end_turn and the usage; session/cancel ends
// the turn with stop reason cancelled (IgnoreInterrupt: not at all).
// Script.ACP tunes what differs between agents (the initialize response,
// modes, models, authentication, requests of their own, broken lines). The
// Gemini flavour speaks as Gemini CLI 0.61.0 does: its tool call ids, its
// usage in _meta.quota, modes that decide what is asked (yolo asks
// nothing, autoEdit no edit), and with Fail session/new and session/load
// fail with an Internal error whose details are Fail; the ACP flavour's
// Fail fails the prompt instead.
//
// In each of the three protocols, SessionHelper starts a helper before the
// first turn that the fake keeps and uses on every turn, as a CLI keeps an
// MCP server (a turn whose helper is gone ends the fake with status 4), and
// TurnSpawns makes every turn, before its first event, start the processes
// a cancelled turn's tools leave behind: a grandchild in the fake's group, a
// setsid daemon and an env -i daemon, each recorded with the turn's number
// (Record.Turn), so that a test can check from outside that a library
// killed them and left the fake and its helper running.
//
// # Two-way control
//
// In each of the three protocols, Script.Ask, Script.Edit and
// Script.CallTool script what a program deciding on the agent's actions
// and giving it tools meets: every turn, before its answer, the fake asks
// its client for permission to run the Ask command, in the CLI's own
// request (Claude Code's can_use_tool control request under
// --permission-prompt-tool stdio, Codex's
// item/commandExecution/requestApproval unless the approval policy is
// never, ACP's session/request_permission unless the mode is yolo), runs
// it with sh -c if allowed, and reports the call and its result or the
// denial; then it asks, the same way, to write the Edit file (Claude
// Code's Write tool, Codex's fileChange item and
// item/fileChange/requestApproval, Gemini CLI's write_file as a tool call
// of kind edit, which autoEdit mode does not ask about), writes
// EditContent into it if allowed, and reports the change or the denial;
// then it calls the CallTool tool of an MCP server its client configured,
// the CLI's way (Claude Code: an sdk server of --mcp-config over
// mcp_message control requests, or a URL or command one; Codex: the
// mcp_servers tables of -c options and of thread/start's config, headers
// from bearer_token_env_var, env_http_headers and http_headers; ACP: the
// mcpServers of session/new), as a go-sdk MCP client over streamable HTTP
// or stdio. The turn's answer states what happened, one line per action:
// OutcomeApproved, OutcomeEdited (or OutcomeEditFailed), OutcomeDenied and
// the client's message, the tool's result text, OutcomeToolError or
// OutcomeToolFailed. An interrupt while the fake waits for an answer or a
// tool ends the turn as interrupted and cancels the call (Claude Code's
// sdk servers get notifications/cancelled); an answer that comes after it
// is dropped. An allow for the session (Claude Code's updatedPermissions,
// a rule or the mode acceptEdits, Codex's acceptForSession, ACP's
// allow_always options) is remembered for later turns. The fake has no
// sandbox: what it runs, it runs.
//
// # Finding survivors
//
// Record.Alive checks recorded processes by pid and start time, counting
// zombies as dead. Survivors finds the processes whose initial environment
// carries a Script's Tag, wherever they went (re-parented, in another
// session); Orphans finds every fake and helper started by this process,
// except the env -i daemons of TurnSpawns, whose environment holds neither:
// only their record finds them, and a test should end with Record.Kill.
// Whatever is left, a helper ends at the latest when the process that made
// its script (with Script.Env) exits, or after ten minutes: a test binary
// leaves none of them running (Linux; elsewhere they sleep out their ten
// minutes).
// These scans use /proc and work on Linux only; elsewhere Alive is best
// effort (signal 0 on Unix) and Survivors and Orphans find nothing.
package fakeagent
