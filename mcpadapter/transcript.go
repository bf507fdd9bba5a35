package mcpadapter

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// A TranscriptEntry is one line of the file named by
// Options.TranscriptPath, written when a run ends (or is refused).
type TranscriptEntry struct {
	// Time is when the run ended.
	Time time.Time `json:"time"`
	// Tool is the MCP tool called, such as "codex" or "codex_parallel".
	Tool string `json:"tool"`
	// CLI is the invoker's name.
	CLI string `json:"cli"`
	// Task is the task's index in a parallel call, nil for a single call.
	Task *int `json:"task,omitempty"`
	// Request fields, as the run received them (after defaults).
	Prompt       string             `json:"prompt"`
	Workdir      string             `json:"workdir"`
	Permission   invoker.Permission `json:"permission"`
	Model        string             `json:"model,omitempty"`
	Resume       string             `json:"resume_session_id,omitempty"`
	SystemPrompt string             `json:"system_prompt,omitempty"`
	Images       []string           `json:"images,omitempty"`
	// Result fields, as in Output.
	Status     string        `json:"status"`
	Text       string        `json:"text"`
	SessionID  string        `json:"session_id,omitempty"`
	ExitCode   int           `json:"exit_code"`
	DurationMS int64         `json:"duration_ms"`
	Usage      invoker.Usage `json:"usage"`
	Error      string        `json:"error,omitempty"`
	Stderr     string        `json:"stderr,omitempty"`
}

// A transcript appends entries to a file. Each line is written with one
// write call on a file opened with O_APPEND, under a lock: lines of
// concurrent calls never interleave, and several processes may share the
// file. The file is opened for each line, so nothing stays open between
// calls and nothing needs closing when the server stops.
type transcript struct {
	path string
	mu   sync.Mutex
}

func (t *transcript) append(e *TranscriptEntry) error {
	if t == nil || t.path == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	_, werr := f.Write(line)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("transcript: %w", werr)
	}
	if cerr != nil {
		return fmt.Errorf("transcript: %w", cerr)
	}
	return nil
}
