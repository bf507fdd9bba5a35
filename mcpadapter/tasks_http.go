package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLiftedBody bounds the size of a POST body that liftTasks reads to
// find a task-augmented call; a larger body goes to the SDK as it is (the
// SDK bounds bodies too, by StreamableHTTPOptions.MaxRequestBodyBytes).
const maxLiftedBody = 8 << 20

// liftTasks returns h with the "task" member of each tools/call in a POST
// body moved into the params' _meta, under taskRequestKey, where the
// tasks middleware finds it: the SDK drops members of tools/call params
// it does not know.
func liftTasks(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(tasksHeader, "1")
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, maxLiftedBody+1))
		if err != nil || len(head) > maxLiftedBody || !bytes.Contains(head, []byte(`"task"`)) {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
			h.ServeHTTP(w, r)
			return
		}
		if lifted, ok := liftBody(head); ok {
			head = lifted
			r.ContentLength = int64(len(head))
			r.Header.Set("Content-Length", strconv.Itoa(len(head)))
		}
		r.Body = readCloser{bytes.NewReader(head), r.Body}
		h.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// liftBody rewrites the JSON-RPC message, or batch of messages, of body;
// ok is false when nothing changed.
func liftBody(body []byte) ([]byte, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return nil, false
		}
		changed := false
		for i, m := range batch {
			if out, ok := liftMessage(m); ok {
				batch[i], changed = out, true
			}
		}
		if !changed {
			return nil, false
		}
		out, err := json.Marshal(batch)
		return out, err == nil
	}
	return liftMessage(trimmed)
}

func liftMessage(msg []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return nil, false
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil || method != "tools/call" {
		return nil, false
	}
	params, ok := liftParams(m["params"])
	if !ok {
		return nil, false
	}
	m["params"] = params
	out, err := json.Marshal(m)
	return out, err == nil
}

// liftParams moves the "task" member of the params of a tools/call into
// their _meta; ok is false when nothing changed.
func liftParams(raw json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte(`"task"`)) {
		return nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil {
		return nil, false
	}
	task, ok := params["task"]
	if !ok || bytes.Equal(bytes.TrimSpace(task), []byte("null")) {
		return nil, false
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	if meta == nil { // "_meta": null
		meta = map[string]json.RawMessage{}
	}
	meta[taskRequestKey] = task
	delete(params, "task")
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, false
	}
	out, err := json.Marshal(params)
	return out, err == nil
}

// tasksHeader marks the requests that came through a layer that lifts the
// "task" of tools/call params (Tools.Handler, Tools.Transport): only their
// sessions are told that the server takes tasks.
const tasksHeader = "Clinvoke-Tasks"

// Transport returns t with the "task" member of each tools/call the client
// sends moved where the tools find it, as Tools.Handler does over HTTP:
// serve stdio (or any transport but streamable HTTP) with it to serve
// tasks there. Without it, the server declares no tasks capability to the
// transport's clients, and serves their calls as plain ones.
func (t *Tools) Transport(tr mcp.Transport) mcp.Transport {
	if t.sh.cfg.tasks.Disabled {
		return tr
	}
	return liftingTransport{tr}
}

type liftingTransport struct{ mcp.Transport }

func (l liftingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := l.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return liftingConn{c}, nil
}

type liftingConn struct{ mcp.Connection }

func (c liftingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		return msg, err
	}
	if req.Method == "tools/call" {
		if params, ok := liftParams(req.Params); ok {
			req.Params = params
		}
	}
	switch ex := req.Extra.(type) {
	case nil:
		req.Extra = &mcp.RequestExtra{Header: http.Header{tasksHeader: {"1"}}}
	case *mcp.RequestExtra:
		if ex.Header == nil {
			ex.Header = http.Header{}
		}
		ex.Header.Set(tasksHeader, "1")
	}
	return req, nil
}
