package mcpadapter

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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
	var params map[string]json.RawMessage
	if json.Unmarshal(m["params"], &params) != nil {
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
	if m["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(m)
	return out, err == nil
}
