package driver

import "strings"

// cliError names the CLI in the message of every error an Invoker or a
// Session returns ("codex: ..."); errors.Is and errors.As see through it.
type cliError struct {
	CLI string
	Err error
}

func (e *cliError) Error() string { return e.CLI + ": " + e.Err.Error() }

func (e *cliError) Unwrap() error { return e.Err }

// lastLines returns at most n trailing non-empty lines of s, joined by
// " | " and cut to max bytes.
func lastLines(s string, n, max int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var kept []string
	for i := len(lines) - 1; i >= 0 && len(kept) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			kept = append(kept, l)
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	out := strings.Join(kept, " | ")
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return out
}
