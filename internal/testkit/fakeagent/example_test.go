package fakeagent_test

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"

	"github.com/clinvoke/clinvoke/internal/testkit/fakeagent"
)

// The test binary runs itself as a fake Codex (its TestMain calls
// fakeagent.Main first). A fixed SessionID makes the output repeatable.
func Example() {
	s := fakeagent.Script{SessionID: "thread-1", Answer: "hi there"}

	cmd := exec.Command(os.Args[0], "exec", "--json", "-")
	cmd.Env = append(os.Environ(), s.Env()...)
	cmd.Stdin = strings.NewReader("say hi")
	out, err := cmd.Output()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	// Output:
	// {"type":"thread.started","thread_id":"thread-1"}
	// {"type":"turn.started"}
	// {"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hi there"}}
	// {"type":"turn.completed","usage":{"input_tokens":2,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":3,"reasoning_output_tokens":0}}
}
