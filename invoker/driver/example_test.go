package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/clinvoke/clinvoke/invoker"
	"github.com/clinvoke/clinvoke/invoker/driver"
)

// catBackend adapts a toy "CLI" to the engine: cat, which prints its
// standard input back. The prompt is a JSON event line; cat echoes it, and
// the decoder reads it as the final answer. A real backend builds its CLI's
// flags from the Request and decodes the CLI's own event stream.
type catBackend struct{}

func (catBackend) Name() string                       { return "cat" }
func (catBackend) Binary() string                     { return "cat" }
func (catBackend) InstallHint() string                { return "apt-get install coreutils" }
func (catBackend) Capabilities() invoker.Capabilities { return invoker.Capabilities{} }
func (catBackend) Hint(string) string                 { return "" }

func (catBackend) Command(req *invoker.Request) (*driver.Command, error) {
	line, err := json.Marshal(map[string]string{"answer": req.Prompt})
	if err != nil {
		return nil, err
	}
	return &driver.Command{Stdin: string(line) + "\n"}, nil
}

func (catBackend) NewDecoder(*invoker.Request) driver.Decoder { return &catDecoder{} }

// catDecoder keeps what one run established.
type catDecoder struct {
	answer string
	done   bool
}

func (d *catDecoder) Decode(line []byte) ([]invoker.Event, error) {
	var ev struct{ Answer string }
	if err := json.Unmarshal(line, &ev); err != nil {
		return []invoker.Event{driver.Malformed(line, err)}, nil
	}
	d.answer, d.done = ev.Answer, true
	return []invoker.Event{
		{Kind: invoker.KindMessage, Text: ev.Answer, Raw: line},
		{Kind: invoker.KindDone, Raw: line},
	}, nil
}

func (d *catDecoder) Stderr([]byte) error { return nil }

func (d *catDecoder) Outcome(exitCode int, stderr string) driver.Outcome {
	return driver.Outcome{Text: d.answer, Success: d.done && exitCode == 0}
}

// A backend is a command line and a decoder; New gives it the engine: the
// containment, the ladder, the sweep, the timeouts and the errors that
// every backend shares.
func ExampleNew() {
	inv := driver.New(catBackend{}, invoker.Options{Binary: "/bin/cat"})
	res, err := inv.Invoke(context.Background(), invoker.Request{
		Prompt:  "Hello from a backend of my own.",
		Workdir: os.TempDir(),
		OnEvent: func(ev invoker.Event) { fmt.Printf("%s %q\n", ev.Kind, ev.Text) },
	})
	fmt.Println(res.Text, err)
	// Output:
	// message "Hello from a backend of my own."
	// done ""
	// Hello from a backend of my own. <nil>
}
