package mcpadapter

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestCheckSessionID checks the handlers' own check, which refuses what
// the schema's pattern refuses even when a call bypasses the schema.
func TestCheckSessionID(t *testing.T) {
	pattern := regexp.MustCompile(sessionIDPattern)
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"", true}, // a new session
		{"0199a213-81c0-7800-8aa1-bbab2a035a53", true}, // Codex, v7
		{"5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e18", true}, // Gemini, Claude Code, v4
		{"5B8C3F2E-9D41-4C7A-B1E6-2F0A7D9C4E18", true},
		{"latest", false},
		{"3", false},
		{"my-thread", false},
		{"5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e1", false},
		{"5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e18\n", false},
		{" 5b8c3f2e-9d41-4c7a-b1e6-2f0a7d9c4e18", false},
		{"5b8c3f2e9d41-4c7a-b1e6-2f0a7d9c4e18-", false},
		{"5b8c3f2g-9d41-4c7a-b1e6-2f0a7d9c4e18", false},
	} {
		err := checkSessionID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("checkSessionID(%q) = %v, want ok %v", tc.id, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, errRefused) || !strings.Contains(err.Error(), "not a session id")) {
			t.Errorf("checkSessionID(%q) = %v, want a refusal saying it is not a session id", tc.id, err)
		}
		if tc.id != "" && pattern.MatchString(tc.id) != tc.ok {
			t.Errorf("sessionIDPattern matches %q: %v, want %v", tc.id, !tc.ok, tc.ok)
		}
	}
}
