// Command fakemodel serves a scripted internal/testkit/fakemodel.Server on 127.0.0.1
// until interrupted, for probing a real agent CLI by hand:
//
//	go run ./internal/testkit/fakemodel/cmd/fakemodel -dump /tmp/reqs 'shell:echo hello' 'echo:done: '
//
// It prints the base URLs, then one line per request received; with -dump
// it also writes each request (headers and body) to a numbered file in that
// directory. Turns are given as arguments:
//
//	text:ANSWER   an answer          shell:COMMAND  a shell tool call
//	echo:PREFIX   PREFIX + the tool result the CLI sent back
//	stall:PARTIAL stream PARTIAL, then hang
//	fail:STATUS   an HTTP error with the API's error JSON
//	call:[NAMESPACE/]NAME:JSON  a call of the tool NAME (in the OpenAI
//	              namespace tool NAMESPACE) with the arguments JSON, such as
//	              'call:mcp__clinvoke/claude:{"prompt":"hi","workdir":"/tmp"}'

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
)

func main() {
	dump := flag.String("dump", "", "write each request to a file in this directory")
	flag.Parse()
	var turns []fakemodel.Turn
	for _, a := range flag.Args() {
		kind, val, _ := strings.Cut(a, ":")
		switch kind {
		case "text":
			turns = append(turns, fakemodel.Answer(val))
		case "shell":
			turns = append(turns, fakemodel.Shell(val))
		case "echo":
			turns = append(turns, fakemodel.EchoToolResult(val))
		case "stall":
			turns = append(turns, fakemodel.Stall(val))
		case "call":
			name, args, _ := strings.Cut(val, ":")
			c := fakemodel.Call{Name: name}
			if ns, n, ok := strings.Cut(name, "/"); ok {
				c.Namespace, c.Name = ns, n
			}
			if args != "" {
				if err := json.Unmarshal([]byte(args), &c.Input); err != nil {
					fmt.Fprintln(os.Stderr, "fakemodel: bad arguments in", a+":", err)
					os.Exit(2)
				}
			}
			turns = append(turns, fakemodel.Turn{Call: &c})
		case "fail":
			code, err := strconv.Atoi(val)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fakemodel: bad status in", a)
				os.Exit(2)
			}
			turns = append(turns, fakemodel.Fail(code, "fake "+val+" error"))
		default:
			fmt.Fprintln(os.Stderr, "fakemodel: unknown turn", a)
			os.Exit(2)
		}
	}
	srv := fakemodel.Start()
	defer srv.Close()
	srv.Enqueue(turns...)
	fmt.Printf("ANTHROPIC_BASE_URL=%s\nOPENAI base_url=%s\nGOOGLE_GEMINI_BASE_URL=%s\n",
		srv.AnthropicBaseURL(), srv.OpenAIBaseURL(), srv.GeminiBaseURL())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen := 0
	for {
		select {
		case <-sig:
			return
		case <-tick.C:
		}
		reqs := srv.Requests()
		for ; seen < len(reqs); seen++ {
			r := reqs[seen]
			fmt.Printf("%s #%d %s %s?%s api=%s scripted=%v body=%dB pending=%d\n",
				time.Now().Format("15:04:05.000"), seen, r.Method, r.Path, r.Query, r.API, r.Scripted, len(r.Body), srv.Pending())
			if *dump != "" {
				var b strings.Builder
				fmt.Fprintf(&b, "%s %s?%s\n", r.Method, r.Path, r.Query)
				_ = http.Header(r.Header).Write(&b)
				b.WriteString("\n")
				b.Write(r.Body)
				_ = os.WriteFile(filepath.Join(*dump, fmt.Sprintf("%03d.txt", seen)), []byte(b.String()), 0o644)
			}
		}
	}
}
