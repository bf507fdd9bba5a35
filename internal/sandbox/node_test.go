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

// TestNodeOptionsIn: the value is read from an environment (unset is
// empty), the option after it.
func TestNodeOptionsIn(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, NodeInspectorOff},
		{[]string{"HOME=/h", "NODE_OPTIONS=--no-warnings"}, "--no-warnings " + NodeInspectorOff},
		{[]string{"NODE_OPTIONS_X=--no-warnings", "XNODE_OPTIONS=--no-deprecation"}, NodeInspectorOff},
	} {
		if got := NodeOptionsIn(tc.env); got != tc.want {
			t.Errorf("NodeOptionsIn(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
