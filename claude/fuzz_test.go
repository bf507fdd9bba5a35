package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary lines to a decoder: it must never panic, must
// return at least one event per line, and its events must always marshal.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.stdout")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			f.Add(bytes.Clone(sc.Bytes()))
		}
	}
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}}`))
	f.Add([]byte(`{"type":"system","subtype":"api_retry","error":{"a":1},"error_status":"x"}`))
	f.Add([]byte(`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`))
	f.Add([]byte(`{"type":"result","subtype":"error_max_turns","is_error":true,"result":null,"usage":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDecoder()
		for range 2 { // twice: state from the first call must not break the second
			evs, err := d.Decode(bytes.Clone(line))
			if err != nil {
				t.Fatalf("Decode error = %v", err)
			}
			if len(evs) == 0 && len(bytes.TrimSpace(line)) > 0 {
				t.Fatalf("no event for %q", line)
			}
			for _, ev := range evs {
				if _, err := json.Marshal(ev); err != nil {
					t.Fatalf("json.Marshal(%+v) = %v", ev, err)
				}
			}
		}
		_ = d.Stderr(line)
		_ = d.Outcome(1, string(line))
	})
}
