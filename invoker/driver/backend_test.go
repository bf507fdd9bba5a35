package driver_test

import (
	"bytes"
	"encoding/json"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// testBackend runs the fake agent in its Codex flavour and decodes just
// enough of Codex's stream to test the engine: the backends' own decoders
// are tested in their packages.
type testBackend struct {
	binary string // default executable name
	unset  []string
	cmdErr error
}

var _ driver.Backend = testBackend{}

func (testBackend) Name() string { return "fake" }

func (b testBackend) Binary() string {
	if b.binary == "" {
		return "clinvoke-fake-agent"
	}
	return b.binary
}

func (testBackend) InstallHint() string { return "npm install -g fake-agent" }

func (testBackend) Hint(string) string { return "" }

func (testBackend) Capabilities() invoker.Capabilities {
	return invoker.Capabilities{Model: true, Resume: true, Images: true, SystemPrompt: true}
}

func (b testBackend) Command(req *invoker.Request) (*driver.Command, error) {
	if b.cmdErr != nil {
		return nil, b.cmdErr
	}
	args := append([]string{"exec", "--json"}, req.ExtraArgs...)
	return &driver.Command{
		Args:  append(args, "-"),
		Env:   []string{"FAKE_BACKEND_VAR=backend"},
		Unset: b.unset,
		Stdin: req.Prompt,
	}, nil
}

func (testBackend) NewDecoder(*invoker.Request) driver.Decoder { return &testDecoder{} }

type testDecoder struct {
	session, text string
	usage         invoker.Usage
	done, failed  bool
	failure       string
}

func (d *testDecoder) Decode(line []byte) ([]invoker.Event, error) {
	var v struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread_id"`
		Item     *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
		Usage *struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return []invoker.Event{{Kind: invoker.KindWarning, Text: "malformed line"}}, nil
	}
	ev := invoker.Event{Raw: line}
	switch {
	case v.Type == "thread.started":
		d.session = v.ThreadID
		ev.Kind, ev.SessionID = invoker.KindSession, v.ThreadID
	case v.Type == "item.completed" && v.Item != nil && v.Item.Type == "agent_message":
		d.text = v.Item.Text
		ev.Kind, ev.Text = invoker.KindMessage, v.Item.Text
	case v.Type == "item.completed" && v.Item != nil && v.Item.Type == "reasoning":
		ev.Kind, ev.Text = invoker.KindReasoning, v.Item.Text
	case v.Type == "turn.completed":
		d.done = true
		if v.Usage != nil {
			d.usage = invoker.Usage{InputTokens: v.Usage.In, OutputTokens: v.Usage.Out}
		}
		ev.Kind = invoker.KindDone
	case v.Type == "turn.failed":
		d.failed = true
		if v.Error != nil {
			d.failure = v.Error.Message
		}
		ev.Kind = invoker.KindDone
	default:
		ev.Kind = invoker.KindRaw
	}
	return []invoker.Event{ev}, nil
}

// fatalSignature is a stderr line the test decoder treats as fatal.
const fatalSignature = "FATAL: not logged in"

func (d *testDecoder) Stderr(line []byte) error {
	if bytes.Contains(line, []byte(fatalSignature)) {
		return invoker.ErrAuthRequired
	}
	return nil
}

func (d *testDecoder) Outcome(code int, stderr string) driver.Outcome {
	out := driver.Outcome{SessionID: d.session, Text: d.text, Usage: d.usage, Success: d.done && !d.failed}
	if d.failed {
		out.Err = &invoker.StreamError{Message: d.failure}
	}
	return out
}
