package jsonl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/clinvoke/clinvoke/internal/jsonl"
)

func ExampleReader() {
	stdout := strings.NewReader(`{"type":"start"}` + "\n" +
		`{"type":"tool","output":"` + strings.Repeat("x", 100) + `"}` + "\r\n" +
		`{"type":"done"}`) // the last line has no newline

	r := jsonl.NewReader(stdout, 64)
	var kept []json.RawMessage
	for {
		line, err := r.ReadLine()
		var tooLong *jsonl.LineTooLongError
		if errors.As(err, &tooLong) {
			fmt.Println("skipped:", err)
			continue // the stream goes on
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("read error:", err)
			return
		}
		kept = append(kept, line) // no copy needed: the line is ours
	}
	for _, m := range kept {
		fmt.Println(string(m))
	}
	// Output:
	// skipped: line of 127 bytes exceeds the limit of 64 bytes
	// {"type":"start"}
	// {"type":"done"}
}

func ExampleTail() {
	stderr := jsonl.NewTail(24)
	fmt.Fprintln(stderr, "loading config")
	fmt.Fprintln(stderr, "connecting to api")
	fmt.Fprintln(stderr, "error: auth required")
	fmt.Printf("%q (%d bytes written)\n", stderr.String(), stderr.Len())
	// Output:
	// "…\nerror: auth required\n" (54 bytes written)
}
