package acp

import (
	"encoding/json"

	"github.com/clinvoke/clinvoke/invoker/driver"
)

// The replay of a loaded session.
//
// On session/load an agent replays the session's history as session/update
// notifications (the earlier prompts as user_message_chunk, the answers as
// agent_message_chunk, the tool calls), which the client drops: they come
// between turns. ACP has the agent write the whole replay before its
// response to session/load, but Gemini CLI 0.61.0's handler starts the
// replay without awaiting it and returns, so most of the replay follows
// the response: a turn started as soon as the response was read took the
// earlier answer as the start of its own ("first answersecond answer").
// No update says where a replay ends, and a replayed update is like one of
// a turn.
//
// So the client sends one more request after the response to session/load,
// pingMethod, and the session is ready only once the agent has answered
// it: what the agent wrote before that answer is the replay, dropped like
// any update between turns. The method is an extension method (its name
// starts with an underscore) that no agent knows: ACP has an agent answer
// a method it does not know with the error "method not found", as the
// five agents of docs/acp-agents.md do; any answer, error or result, ends
// the wait. This holds for an agent that has written its replay by the
// time it handles the next request it reads, as Gemini CLI does (its
// replay is one chain of writes started before the response; the next
// request is read from standard input later), and as an agent that
// follows ACP does. It costs a loaded session one round trip, and a new
// session nothing.

// pingMethod is the request whose answer ends the replay of a loaded
// session.
const pingMethod = "_clinvoke/ping"

// awaitReplay returns the step that sends pingMethod, and makes the
// session ready (with calls, as ready) once the agent answered it.
func (p *Protocol) awaitReplay(calls []rpcCall) driver.Step {
	return driver.Step{Write: [][]byte{p.call(pingMethod, map[string]string{"sessionId": p.session}, func(*message, json.RawMessage) (driver.Step, error) {
		return p.ready(calls), nil
	})}}
}
