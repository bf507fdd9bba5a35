package sandbox

import "testing"

// TestNodeOptions: the option is added after the caller's options, once,
// and a value that holds its text where node does not read it as an
// option (inside a quoted value) still gets it.
func TestNodeOptions(t *testing.T) {
	for _, tc := range []struct{ current, want string }{
		{"", NodeInspectorOff},
		{"--max-old-space-size=512", "--max-old-space-size=512 " + NodeInspectorOff},
		{NodeInspectorOff, NodeInspectorOff},
		{"--no-warnings " + NodeInspectorOff, "--no-warnings " + NodeInspectorOff},
		{`--title="x ` + NodeInspectorOff + `"`, `--title="x ` + NodeInspectorOff + `" ` + NodeInspectorOff},
		{NodeInspectorOff + " --no-warnings", NodeInspectorOff + " --no-warnings " + NodeInspectorOff},
	} {
		if got := NodeOptions(tc.current); got != tc.want {
			t.Errorf("NodeOptions(%q) = %q, want %q", tc.current, got, tc.want)
		}
	}
}
