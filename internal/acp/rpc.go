package acp

import (
	"bytes"
	"encoding/json"
)

// JSON-RPC error codes the client sends or recognises.
const (
	codeMethodNotFound = -32601
	// codeAuthRequired is ACP's "authentication required" error.
	codeAuthRequired = -32000
)

// message is any JSON-RPC 2.0 message: a request (Method and ID), a
// notification (Method), or a response (ID with Result or Error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

// hasID reports whether the message carries an id (null counts: a
// response to a request the peer could not parse).
func (m *message) hasID() bool { return len(m.ID) > 0 }

// rpcError is a JSON-RPC error object. Agents put the detail in data:
// Gemini CLI in data.details, others as a string.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// text returns the error's message with the detail of its data, if any.
func (e *rpcError) text() string {
	msg := e.Message
	var d struct {
		Details string `json:"details"`
		Message string `json:"message"`
	}
	var s string
	switch {
	case json.Unmarshal(e.Data, &s) == nil && s != "":
		msg += ": " + s
	case json.Unmarshal(e.Data, &d) == nil && d.Details != "":
		msg += ": " + d.Details
	case d.Message != "":
		msg += ": " + d.Message
	}
	return msg
}

// The encoders below use maps, whose keys encoding/json sorts: every line
// the client writes has its keys in one order ({"id":1,"jsonrpc":"2.0",
// "method":...,"params":...}), the order of the recorded sessions
// (gemini/testdata/session) that the client's output is checked against.

// request encodes a request of the client.
func request(id int64, method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

// notification encodes a notification of the client.
func notification(method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	return b
}

// result encodes the client's answer to the agent's request id.
func result(id json.RawMessage, res any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	return b
}

// errorReply encodes the client's error answer to the agent's request id.
func errorReply(id json.RawMessage, code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return b
}

// idKey returns the canonical form of a response id for the table of
// pending calls: the client sends integers, which some peers echo as
// strings or floats ("3", 3.0).
func idKey(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	var n json.Number
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		n = json.Number(s)
	} else if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	if f, err := n.Float64(); err == nil && f == float64(int64(f)) {
		return int64(f), true
	}
	return 0, false
}
