package mcpadapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// A TranscriptEntry is one line of the file named by
// Options.TranscriptPath: what a call asked for, and the [Output] it was
// answered with. A run writes two: one of status "running" as soon as its
// session id is known (so that a run cut off with its server can still be
// resumed), and one when it ends, with the same Run. A refused call writes
// one line.
type TranscriptEntry struct {
	// Time is when the line was written: when the run ended, or, for a
	// "running" line, when its session id became known.
	Time time.Time `json:"time"`
	// Run pairs the lines of one run; empty for a call refused before any
	// run (a refused parallel call).
	Run string `json:"run,omitempty"`
	// Tool is the MCP tool called, such as "codex" or "codex_parallel".
	Tool string `json:"tool"`
	// CLI is the invoker's name.
	CLI string `json:"cli"`
	// Task is the task's index in a parallel call; nil for a single call,
	// and for a parallel call refused as a whole, whose one entry has no
	// prompt and the call's defaults as its request fields.
	Task *int `json:"task,omitempty"`
	// Prompt is the task's prompt.
	Prompt string `json:"prompt"`
	// Workdir is the agent's working directory: resolved (symbolic links
	// evaluated) for a run, as given for a refused call.
	Workdir string `json:"workdir"`
	// Permission is the run's permission, after the default is applied;
	// as given for a refused call.
	Permission invoker.Permission `json:"permission"`
	// Model is the model asked for; empty means the CLI's default.
	Model string `json:"model,omitempty"`
	// ResumeSessionID is the session_id the call resumed; empty for a new
	// session. (Output.SessionID is the session the run reported.)
	ResumeSessionID string `json:"resume_session_id,omitempty"`
	// Fork reports that the call forked ResumeSessionID rather than
	// resuming it.
	Fork bool `json:"fork,omitempty"`
	// SystemPrompt is the system prompt addition asked for.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Images are the attached image files, absolute for a run, as given
	// for a refused call.
	Images []string `json:"images,omitempty"`
	// Identity is who made the call: the name of its bearer token, or the
	// subject of its OAuth token (see [HTTPAccess]); empty for a call
	// without authentication.
	Identity string `json:"identity,omitempty"`

	// Output is what the call was answered with, its fields inline in
	// the line (status, text, session_id, exit_code, duration_ms, usage,
	// error). Its Status is StatusRunning on the line written when the
	// run's session id became known, whose ExitCode is -1 and DurationMS
	// the time until then. Output.Resume, Output.Structured and
	// Output.Turns are not recorded (see MarshalJSON): they are empty in
	// every entry read back.
	Output
	// Stderr is the tail of the CLI's standard error (Result.Stderr),
	// for diagnosis; it is not sent to the client.
	Stderr string `json:"stderr,omitempty"`
}

// MarshalJSON writes e as a transcript line: Output's fields inline, but
// for those the transcript does not record (Resume, the sentence for the
// client; Structured and Turns), and with no session_id when it is empty,
// as the lines have always been written. (Output.SessionID cannot omit
// itself: the tools' output schema requires it.)
func (e TranscriptEntry) MarshalJSON() ([]byte, error) {
	type line TranscriptEntry // without this method
	l := line(e)
	l.Resume, l.Structured, l.Turns = "", nil, 0
	b, err := json.Marshal(l)
	if err != nil || e.SessionID != "" {
		return b, err
	}
	// Every quote inside a JSON string is escaped, so this can only be
	// the key itself, which is never first nor last.
	return bytes.Replace(b, []byte(`,"session_id":"",`), []byte(`,`), 1), nil
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
